/// The audio a sender sends beside its video (OBS's Opus, a browser's microphone): taken into the BUNDLE and
/// dropped on arrival, not rejected. RFC 3264 allows rejecting it (port 0), and the daemon did; but aiortc (1.16)
/// cannot set such an answer ("Failed to set remote audio description send parameters") and waits for ICE on the
/// rejected section for ever once given an rtpmap, and OBS (libdatachannel) is only known to stream when its audio
/// is taken, as every WHIP server it is used with takes it. Audio costs the daemon an SRTP authentication per
/// packet (about 50 a second), nothing else.
extension WebRTCAnswer {
    /// The one audio section answered (receive only, in the video's BUNDLE group): its packets are authenticated
    /// and dropped.
    public struct AcceptedAudio: Sendable, Equatable {
        public var mid: String
        public var payloadType: UInt8
        /// The rtpmap after the payload type, as offered ("opus/48000/2").
        public var encoding: String
        /// The encoding's name, lower-cased ("opus"), for the log.
        public var name: String

        public init(mid: String, payloadType: UInt8, encoding: String, name: String) {
            self.mid = mid
            self.payloadType = payloadType
            self.encoding = encoding
            self.name = name
        }
    }

    /// Encodings that only repair or signal another stream: never the audio answered.
    private static let auxiliaryAudioEncodings: Set<String> = ["RTX", "RED", "ULPFEC", "FLEXFEC", "CN", "TELEPHONE-EVENT"]

    /// The first audio section that sends, is bundled with the video, multiplexes RTCP and has a payload type with an
    /// rtpmap that collides with nothing of the video's or RTCP's (Opus preferred): its index and what is answered.
    static func chooseAudio(in offer: WebRTCOffer, video: NegotiatedVideo, videoIndex: Int) -> (index: Int, audio: AcceptedAudio)? {
        guard let group = offer.bundleGroup(containing: video.mid) else { return nil }
        let videoTypes = Set([video.payloadType] + (video.retransmissionPayloadType.map { [$0] } ?? []))
        for (index, media) in offer.media.enumerated() where index != videoIndex {
            guard media.kind == .audio, media.direction.sends, !media.isRejected, media.rtcpMux,
                  media.proto.uppercased() == "UDP/TLS/RTP/SAVPF", let mid = media.mid, group.contains(mid) else { continue }
            // Tagged first in the group, its transport becomes the session's: it must hold what the video's must.
            if group.first == mid, !transportUsable(media, in: offer) { continue }
            let usable = media.payloads.filter { payload in
                guard let name = payload.encodingName, let rate = payload.clockRate, rate > 0 else { return false }
                return !auxiliaryAudioEncodings.contains(name.uppercased()) && !videoTypes.contains(payload.payloadType)
                    && !VideoChoice.rtcpPayloadTypes.contains(payload.payloadType)
            }
            guard let chosen = usable.first(where: { $0.encodingName?.uppercased() == "OPUS" }) ?? usable.first,
                  let name = chosen.encodingName, let rate = chosen.clockRate else { continue }
            let encoding = "\(name)/\(rate)" + (chosen.channels.map { "/\($0)" } ?? "")
            return (index, AcceptedAudio(mid: mid, payloadType: chosen.payloadType, encoding: encoding, name: name.lowercased()))
        }
        return nil
    }

    /// What the chosen video's section must have for a session's transport (VideoChoice.check), where the audio's
    /// section carries it instead: a SHA-256 fingerprint, ICE credentials, and a setup that lets us be DTLS server.
    private static func transportUsable(_ media: WebRTCOffer.Media, in offer: WebRTCOffer) -> Bool {
        (media.transport.sha256Fingerprint ?? offer.session.sha256Fingerprint) != nil
            && (media.transport.iceUsernameFragment ?? offer.session.iceUsernameFragment) != nil
            && (media.transport.icePassword ?? offer.session.icePassword) != nil
            && media.transport.setup != .passive
    }

    /// The audio section of the answer: bundled on the video's transport, receive only, no feedback.
    static func audioLines(_ media: WebRTCOffer.Media, _ audio: AcceptedAudio, local: LocalParameters, connection: String) -> [String] {
        ["m=audio \(local.candidates.first?.port ?? 9) \(media.proto) \(audio.payloadType)", connection,
         "a=mid:\(audio.mid)", "a=setup:passive", "a=recvonly", "a=rtcp-mux", "a=rtpmap:\(audio.payloadType) \(audio.encoding)"]
            + candidateLines(local)
    }
}
