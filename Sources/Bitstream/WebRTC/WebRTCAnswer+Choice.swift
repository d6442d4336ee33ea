/// Which video m-section and payload type an answer accepts, and what comes with it.
enum VideoChoice {
    /// Encodings that only repair another stream (RFC 4588 rtx, RFC 2198 red, RFC 5109 ulpfec, RFC 8627 flexfec):
    /// never chosen as the video. RTX is answered beside it when its `apt` is the chosen type (NACK's
    /// retransmissions come in it); RED and FEC never are.
    private static let repairEncodings: Set<String> = ["RTX", "RED", "ULPFEC", "FLEXFEC", "FLEXFEC-03"]
    /// RTP payload types that a receiver multiplexing RTCP cannot tell from RTCP (RFC 5761 §4).
    static let rtcpPayloadTypes: ClosedRange<UInt8> = 64...95

    /// The first video m-section that sends, is not rejected and has a payload type we take; its index and what was
    /// agreed. The m-line order is the offerer's preference (RFC 3264 §5.1), so the first fitting one is taken.
    static func choose(
        in offer: WebRTCOffer, codecs: Set<VideoCodec>
    ) throws(WebRTCAnswerError) -> (index: Int, video: WebRTCAnswer.NegotiatedVideo) {
        let sending = offer.media.indices.filter {
            offer.media[$0].kind == .video && offer.media[$0].direction.sends && !offer.media[$0].isRejected
        }
        guard !sending.isEmpty else { throw .noSendingVideo }
        var offered: [String] = []
        var colliding: (payloadType: UInt8, line: Int)?
        for index in sending {
            let media = offer.media[index]
            guard let (payload, codec, mode) = bestPayload(in: media, codecs: codecs, offered: &offered) else { continue }
            // Under rtcp-mux, RTP's payload types 64-95 read as RTCP packet types 192-223 (RFC 5761 §4): such a
            // packet is taken for RTCP and nothing would decode. Refused, unless the section has another usable type.
            guard !rtcpPayloadTypes.contains(payload.payloadType) else {
                colliding = colliding ?? (payload.payloadType, media.line)
                continue
            }
            let mid = try check(media, in: offer)
            return (index, negotiated(media, mid: mid, payload: payload, codec: codec, packetizationMode: mode))
        }
        if let colliding { throw .payloadTypeCollidesWithRTCP(payloadType: colliding.payloadType, line: colliding.line) }
        throw .noUsableCodec(accepted: VideoCodec.allCases.filter(codecs.contains), offered: offered)
    }

    /// The preferred payload type of one section: H.264 packetization-mode 1 (RFC 6184 §6.3: fragments, so no
    /// limit on NAL unit size), then H.264 mode 0 (§6.2: one NAL unit per packet), then H.265 (RFC 7798); the
    /// offerer's order among equals. Mode 2 (interleaved, §6.4) needs a de-interleaver and is skipped.
    private static func bestPayload(
        in media: WebRTCOffer.Media, codecs: Set<VideoCodec>, offered: inout [String]
    ) -> (WebRTCOffer.PayloadFormat, VideoCodec, Int)? {
        var best: (rank: Int, payload: WebRTCOffer.PayloadFormat, codec: VideoCodec, mode: Int)?
        // A usable type outside 64-95 is preferred to a better-ranked one inside (see `choose`).
        let payloads = media.payloads.filter { !rtcpPayloadTypes.contains($0.payloadType) } + media.payloads.filter { rtcpPayloadTypes.contains($0.payloadType) }
        for payload in payloads {
            let name = payload.encodingName?.uppercased() ?? "payload type \(payload.payloadType)"
            guard !repairEncodings.contains(name) else { continue }
            note(name, in: &offered)
            guard payload.clockRate == 90000 else { continue }  // RFC 6184 §8.1, RFC 7798 §7.1
            let candidate: (rank: Int, codec: VideoCodec, mode: Int)
            switch name {
            case "H264" where codecs.contains(.h264):
                var mode: UInt64 = 0
                if let written = payload.parameters["packetization-mode"] {
                    guard let value = SDPText.decimal(Substring(written), max: 1) else { continue }
                    mode = value
                }
                candidate = (mode == 1 ? 0 : 1, .h264, Int(mode))
            case "H265" where codecs.contains(.h265):
                // Decoding order numbers (RFC 7798 §7.1, sprop-max-don-diff > 0) are not depacketized: skipped.
                if let donDifference = payload.parameters["sprop-max-don-diff"], donDifference != "0" { continue }
                candidate = (2, .h265, 0)
            default:
                continue
            }
            let rank = candidate.rank + (rtcpPayloadTypes.contains(payload.payloadType) ? 10 : 0)
            if rank < best?.rank ?? .max { best = (rank, payload, candidate.codec, candidate.mode) }
        }
        return best.map { ($0.payload, $0.codec, $0.mode) }
    }

    /// The transport conditions on the chosen section; its mid.
    private static func check(_ media: WebRTCOffer.Media, in offer: WebRTCOffer) throws(WebRTCAnswerError) -> String {
        guard media.proto.uppercased() == "UDP/TLS/RTP/SAVPF" else { throw .notDTLSSRTP(line: media.line) }
        guard let mid = media.mid, offer.bundleGroup(containing: mid) != nil else { throw .videoNotBundled(line: media.line) }
        guard media.rtcpMux else { throw .noRTCPMux(line: media.line) }
        guard media.transport.setup != .passive else { throw .passiveSetup(line: media.line) }
        guard media.transport.sha256Fingerprint != nil else { throw .noSHA256Fingerprint(line: media.line) }
        return mid
    }

    private static func negotiated(
        _ media: WebRTCOffer.Media, mid: String, payload: WebRTCOffer.PayloadFormat, codec: VideoCodec, packetizationMode: Int
    ) -> WebRTCAnswer.NegotiatedVideo {
        // The second and later members of FID (RFC 4588 §8.2) and FEC-FR (RFC 5956 §4.1) groups are repair streams.
        let repairSources = Set(media.sourceGroups.filter { ["FID", "FEC-FR"].contains($0.semantics.uppercased()) }
            .flatMap { $0.ssrcs.dropFirst() })
        let offeredFeedback = Set(media.feedback(for: payload.payloadType))
        // An extension the offerer marks recvonly or inactive is one it will not send (RFC 8285 §8). Ids above 14
        // need two-byte headers, which an answer must allow with `a=extmap-allow-mixed` (§6): not answered.
        func extensionID(_ uri: String) -> UInt8? {
            media.extensions.first { $0.uri == uri && ($0.direction ?? .sendrecv).sends && $0.id <= 14 }?.id
        }
        var video = WebRTCAnswer.NegotiatedVideo(
            mid: mid, payloadType: payload.payloadType, codec: codec, packetizationMode: packetizationMode,
            // Echoed only when it is visible ASCII: U+2028 and friends are line breaks to JavaScript's regexes, and
            // the answer goes back to the offerer's page. Without it the sender may pick mode 0, which we take too.
            clockRate: payload.clockRate ?? 90000,
            formatParameters: payload.formatParameters.flatMap { $0.utf8.allSatisfy { (0x20...0x7e).contains($0) } ? $0 : nil },
            remoteSSRC: media.sources.first { !repairSources.contains($0.ssrc) }?.ssrc,
            feedback: Set(WebRTCAnswer.NegotiatedVideo.Feedback.allCases.filter { offeredFeedback.contains($0.rawValue) }),
            absSendTimeID: extensionID(WebRTCAnswer.absSendTimeURI),
            transportWideCCID: extensionID(WebRTCAnswer.transportWideCCURI))
        video.declinedSimulcast = media.simulcastSendStreams
        // RTX for the chosen type (RFC 4588 §8.1: `apt`): a sender that has it resends only that way.
        video.retransmissionPayloadType = media.payloads.first {
            $0.encodingName?.uppercased() == "RTX" && $0.clockRate == payload.clockRate && !rtcpPayloadTypes.contains($0.payloadType)
                && $0.parameters["apt"].flatMap { SDPText.decimal(Substring($0), max: 127) } == UInt64(payload.payloadType)
        }?.payloadType
        return video
    }

    /// An encoding name for the error message: each once, at most 8 (tokens already, so printable ASCII).
    private static func note(_ name: String, in offered: inout [String]) {
        let name = String(name.prefix(32))
        guard offered.count < 8, !offered.contains(name) else { return }
        offered.append(name)
    }
}
