/// The SDP answer of a receive-only, ICE-lite WHIP endpoint (RFC 9725 §4.2) to a `WebRTCOffer`, following the
/// answerer's rules of JSEP (RFC 8829 §5.3.1): one video m-section is accepted with one payload type, one audio
/// section beside it is taken to be dropped (`WebRTCAnswer+Audio.swift`), every other m-section is rejected in place,
/// and the accepted ones alone form the BUNDLE group (RFC 8843 §7.3), in the offer's order.
///
/// Where the answer's attributes go is chosen so that browsers, libdatachannel, aiortc and GStreamer's webrtcbin
/// all take it: ICE credentials and the fingerprint at session level (RFC 8839 §5.4 and RFC 8842 §5.1 allow it;
/// webrtcbin refuses a fingerprint given at both levels), `a=mid` and `a=setup` in every m-section, rejected ones
/// too (webrtcbin's and aiortc's checks look at each m-section, whatever its port).
public enum WebRTCAnswer {
    /// What this server says about itself.
    public struct LocalParameters: Sendable {
        /// RFC 8839 §5.4: 4 to 256 ICE characters (ALPHA, DIGIT, "+", "/").
        public var iceUsernameFragment: String
        /// 22 to 256 ICE characters.
        public var icePassword: String
        /// The SHA-256 digest of the DTLS certificate: 32 bytes.
        public var fingerprintSHA256: [UInt8]
        /// Host candidates (IPv4 or IPv6 literals): the first is the m-line's port and the c= line's address.
        public var candidates: [(address: String, port: UInt16)]
        public var sessionID: UInt64

        public init(iceUsernameFragment: String, icePassword: String, fingerprintSHA256: [UInt8],
                    candidates: [(address: String, port: UInt16)], sessionID: UInt64) {
            self.iceUsernameFragment = iceUsernameFragment
            self.icePassword = icePassword
            self.fingerprintSHA256 = fingerprintSHA256
            self.candidates = candidates
            self.sessionID = sessionID
        }
    }

    /// What was agreed for the one video stream: what the receiver needs to depacketize it and send feedback.
    public struct NegotiatedVideo: Sendable, Equatable {
        /// The RTCP feedback this server may send (RFC 4585 §4.2 names), when the offer allowed it.
        public enum Feedback: String, Sendable, Hashable, CaseIterable {
            case nack = "nack"
            case pli = "nack pli"
            case fir = "ccm fir"
            case remb = "goog-remb"
            case transportCC = "transport-cc"
        }

        public var mid: String
        public var payloadType: UInt8
        public var codec: VideoCodec
        /// H.264 packetization-mode, 0 or 1 (RFC 6184 §8.1: 0 when absent); 0 for H.265.
        public var packetizationMode: Int
        public var clockRate: UInt32
        /// The offer's `a=fmtp` text for the payload type (may carry sprop-parameter-sets).
        public var formatParameters: String?
        /// The first `a=ssrc` that is not a repair stream (RTX or FEC, RFC 5576 §4.2 groups); nil without one.
        public var remoteSSRC: UInt32?
        public var feedback: Set<Feedback>
        /// The RTX payload type (RFC 4588) whose `apt` is the chosen one, when offered: retransmissions asked for by
        /// NACK come in it, on the repair SSRC, each carrying its original sequence number.
        public var retransmissionPayloadType: UInt8?
        /// `a=extmap` ids, when offered.
        public var absSendTimeID: UInt8?
        public var transportWideCCID: UInt8?
        /// The simulcast streams the offer would send (their rids), declined: the answer has no `a=simulcast`, so
        /// the sender sends one stream, its first (RFC 8853 §5.3).
        public var declinedSimulcast: [String] = []
        /// The offer's audio, answered and dropped on arrival (`WebRTCAnswer+Audio.swift`); nil: none, or rejected.
        public var acceptedAudio: AcceptedAudio?
        /// The section whose ICE credentials and fingerprint the BUNDLE's one transport uses: the answer's tagged
        /// one, the first of its group (RFC 8843 §7.3.1): the audio's where the offer tagged it.
        public var transportMid: String?

        /// What the sender was told about bandwidth, for the status line and the log.
        public var bandwidthFeedback: String {
            feedback.contains(.transportCC) ? "transport-cc" : feedback.contains(.remb) ? "REMB" : "no bandwidth feedback"
        }

        public init(
            mid: String, payloadType: UInt8, codec: VideoCodec, packetizationMode: Int, clockRate: UInt32,
            formatParameters: String?, remoteSSRC: UInt32?, feedback: Set<Feedback>, absSendTimeID: UInt8?,
            transportWideCCID: UInt8?
        ) {
            self.mid = mid
            self.payloadType = payloadType
            self.codec = codec
            self.packetizationMode = packetizationMode
            self.clockRate = clockRate
            self.formatParameters = formatParameters
            self.remoteSSRC = remoteSSRC
            self.feedback = feedback
            self.absSendTimeID = absSendTimeID
            self.transportWideCCID = transportWideCCID
        }
    }

    public static let absSendTimeURI = "http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time"
    public static let transportWideCCURI = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
    /// The most host candidates written (their local preferences stay distinct, RFC 8445 §5.1.2.1).
    public static let maximumCandidates = 32

    /// The answer text (CRLF line ends) and the negotiated video. Throws when the offer has no video this server
    /// can take, or when `local` is not something to put in SDP. `feedback` is what this server is willing to send
    /// (an operator may turn REMB or transport-cc off); what is answered is that, where the offer allows it.
    /// Transport-cc needs both its feedback and its header extension offered; where it is answered, REMB is not
    /// (a sender takes the lower of the two, and its own delay-based estimate is the better). `maximumBitrate`
    /// (bits per second) is written as `b=TIAS` (RFC 3890) and `b=AS` (RFC 4566, kbit/s): a sender's ceiling.
    /// `startBitrate` (bits per second) is added to the format parameters as `x-google-start-bitrate` (kbit/s),
    /// where libwebrtc's senders start their estimate instead of 300 kbit/s; others ignore it (RFC 6184 §8.1).
    public static func make(
        for offer: WebRTCOffer, local: LocalParameters, codecs: Set<VideoCodec>,
        feedback: Set<NegotiatedVideo.Feedback> = Set(NegotiatedVideo.Feedback.allCases), maximumBitrate: UInt64? = nil,
        startBitrate: UInt64? = nil
    ) throws(WebRTCAnswerError) -> (sdp: String, media: NegotiatedVideo) {
        try validate(local)
        var (chosen, video) = try VideoChoice.choose(in: offer, codecs: codecs)
        video.feedback.formIntersection(feedback)
        if video.feedback.contains(.transportCC), video.transportWideCCID != nil {
            video.feedback.remove(.remb)
        } else {
            video.feedback.remove(.transportCC)
            video.transportWideCCID = nil
        }
        let audio = chooseAudio(in: offer, video: video, videoIndex: chosen)
        video.acceptedAudio = audio?.audio
        // In the offer's order: its tagged section stays the answer's tagged one where accepted (RFC 8843 §7.3.1).
        let accepted = [video.mid] + (audio.map { [$0.audio.mid] } ?? [])
        let mids = (offer.bundleGroup(containing: video.mid) ?? []).filter(accepted.contains)
        let group = mids.isEmpty ? accepted : mids
        video.transportMid = group.first
        var lines = sessionLines(local: local, mids: group)
        let connection = connectionLine(local)
        for (index, media) in offer.media.enumerated() {
            if index == chosen {
                lines += videoLines(media, video, local: local, connection: connection, bitrates: (maximumBitrate, startBitrate))
            } else if let audio, index == audio.index {
                lines += audioLines(media, audio.audio, local: local, connection: connection)
            } else {
                lines += rejectedLines(media, connection: connection)
            }
        }
        return (lines.map { $0 + "\r\n" }.joined(), video)
    }

    /// JSEP §5.3.1's session part, with `a=ice-lite` (RFC 8839 §5.3): the client does every connectivity check.
    private static func sessionLines(local: LocalParameters, mids: [String]) -> [String] {
        let fingerprint = local.fingerprintSHA256.map { hex($0) }.joined(separator: ":")
        return [
            "v=0", "o=- \(local.sessionID) 2 IN IP4 127.0.0.1", "s=-", "t=0 0",
            "a=group:BUNDLE \(mids.joined(separator: " "))", "a=ice-lite",
            "a=ice-ufrag:\(local.iceUsernameFragment)", "a=ice-pwd:\(local.icePassword)",
            "a=fingerprint:sha-256 \(fingerprint)",
        ]
    }

    private static func connectionLine(_ local: LocalParameters) -> String {
        let address = local.candidates.first?.address ?? "0.0.0.0"
        return "c=IN \(address.contains(":") ? "IP6" : "IP4") \(address)"
    }

    /// The accepted section: receive only, DTLS server (`setup:passive`, RFC 8842 §5.3: an ICE-lite server cannot
    /// reach the client first), RTCP multiplexed (RFC 8858), our host candidates and `a=end-of-candidates` (RFC 8840).
    private static func videoLines(
        _ media: WebRTCOffer.Media, _ video: NegotiatedVideo, local: LocalParameters, connection: String,
        bitrates: (maximum: UInt64?, start: UInt64?)
    ) -> [String] {
        let payloadType = video.payloadType
        let encoding = media.payload(payloadType)?.encodingName ?? (video.codec == .h264 ? "H264" : "H265")
        let formats = [payloadType] + (video.retransmissionPayloadType.map { [$0] } ?? [])
        var lines = [
            "m=video \(local.candidates.first?.port ?? 9) \(media.proto) \(formats.map(String.init).joined(separator: " "))", connection,
        ]
        if let maximum = bitrates.maximum { lines += ["b=AS:\(max(maximum / 1000, 1))", "b=TIAS:\(maximum)"] }
        lines += [
            "a=mid:\(video.mid)", "a=setup:passive", "a=recvonly", "a=rtcp-mux",
            "a=rtpmap:\(payloadType) \(encoding)/\(video.clockRate)",
        ]
        let start = bitrates.start.map { "x-google-start-bitrate=\(max($0 / 1000, 1))" }
        let parameters = [video.formatParameters, start].compactMap { $0 }.filter { !$0.isEmpty }
        if !parameters.isEmpty { lines.append("a=fmtp:\(payloadType) \(parameters.joined(separator: ";"))") }
        if let retransmission = video.retransmissionPayloadType {
            lines += ["a=rtpmap:\(retransmission) rtx/\(video.clockRate)", "a=fmtp:\(retransmission) apt=\(payloadType)"]
        }
        for feedback in NegotiatedVideo.Feedback.allCases where video.feedback.contains(feedback) {
            lines.append("a=rtcp-fb:\(payloadType) \(feedback.rawValue)")
        }
        if let id = video.absSendTimeID { lines.append("a=extmap:\(id) \(absSendTimeURI)") }
        if let id = video.transportWideCCID { lines.append("a=extmap:\(id) \(transportWideCCURI)") }
        return lines + candidateLines(local)
    }

    /// Our host candidates and `a=end-of-candidates` (RFC 8840).
    static func candidateLines(_ local: LocalParameters) -> [String] {
        var lines: [String] = []
        for (index, candidate) in local.candidates.enumerated() {
            // RFC 8445 §5.1.2.1: host type preference 126, local preference falling with the order, component 1.
            let priority = UInt32(126) << 24 | UInt32(65535 - index) << 8 | 255
            lines.append("a=candidate:\(index + 1) 1 udp \(priority) \(candidate.address) \(candidate.port) typ host")
        }
        lines.append("a=end-of-candidates")
        return lines
    }

    /// A rejected section (RFC 3264 §6, RFC 8829 §5.3.1): same media and proto, port 0, one of the offered formats,
    /// the mid kept so the offerer can match it, and out of the BUNDLE group (RFC 8843 §7.3.3). It still carries
    /// `a=setup` and, for RTP, `a=rtcp-mux`: webrtcbin (1.22) refuses an answer with an m-section lacking the one,
    /// aiortc (1.16) one whose audio or video m-section lacks either, whatever the port.
    private static func rejectedLines(_ media: WebRTCOffer.Media, connection: String) -> [String] {
        var lines = ["m=\(media.kind.token) 0 \(media.proto) \(media.formats.first ?? "0")", connection]
        if let mid = media.mid { lines.append("a=mid:\(mid)") }
        lines.append("a=setup:passive")
        if media.proto.uppercased().contains("RTP/") { lines.append("a=rtcp-mux") }
        return lines
    }

    private static func validate(_ local: LocalParameters) throws(WebRTCAnswerError) {
        guard SDPText.isICECredential(Substring(local.iceUsernameFragment), length: 4...256),
              SDPText.isICECredential(Substring(local.icePassword), length: 22...256) else {
            throw .invalidLocalParameters("ICE credentials must be 4 to 256 and 22 to 256 ICE characters")
        }
        guard local.fingerprintSHA256.count == 32 else {
            throw .invalidLocalParameters("the SHA-256 fingerprint must have 32 bytes")
        }
        guard (1...maximumCandidates).contains(local.candidates.count),
              local.candidates.allSatisfy({ $0.port != 0 && isAddressLiteral($0.address) }) else {
            throw .invalidLocalParameters("1 to \(maximumCandidates) host candidates with IP literals and ports are needed")
        }
    }

    /// A dotted-quad IPv4 address, or text that can only be an IPv6 literal (hex digits, colons, dots).
    static func isAddressLiteral(_ address: String) -> Bool {
        let bytes = Array(address.utf8)
        if !bytes.contains(UInt8(ascii: ":")) {
            let parts = address.split(separator: ".", omittingEmptySubsequences: false)
            return parts.count == 4 && parts.allSatisfy { $0.utf8.count <= 3 && SDPText.decimal($0, max: 255) != nil }
        }
        return (2...45).contains(bytes.count) && bytes.allSatisfy { byte in
            switch byte {
            case 0x2e, 0x30...0x3a, 0x41...0x46, 0x61...0x66: true
            default: false
            }
        }
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 0x0f)]], as: UTF8.self)
    }
}

/// Why no answer could be made. Descriptions say what was offered where that helps the sender's operator.
public enum WebRTCAnswerError: Error, Equatable, CustomStringConvertible {
    /// No video m-section that sends (sendonly or sendrecv) and is not rejected.
    case noSendingVideo
    /// No payload type of a codec in `accepted` at 90 kHz; `offered` names the encodings (at most 8, each once).
    case noUsableCodec(accepted: [VideoCodec], offered: [String])
    /// The chosen video is not UDP/TLS/RTP/SAVPF (RFC 8829 §5.1.2): no DTLS-SRTP, nothing this server speaks.
    case notDTLSSRTP(line: Int)
    case videoNotBundled(line: Int)
    /// RFC 8829 §5.1.3 and RFC 8858: WebRTC multiplexes RTCP; this server has no separate RTCP port.
    case noRTCPMux(line: Int)
    /// `a=setup:passive` would make this server the DTLS client, which an ICE-lite server cannot be.
    case passiveSetup(line: Int)
    /// No SHA-256 fingerprint to check the client's certificate against (RFC 8842 §5.1 makes SHA-256 mandatory).
    case noSHA256Fingerprint(line: Int)
    /// The only usable video payload type is in 64-95, which RTCP's packet types shadow under rtcp-mux (RFC 5761 §4).
    case payloadTypeCollidesWithRTCP(payloadType: UInt8, line: Int)
    case invalidLocalParameters(String)

    public var description: String {
        switch self {
        case .noSendingVideo: "the offer sends no video (no sendonly or sendrecv video m-section)"
        case .noUsableCodec(let accepted, let offered):
            Self.noCodecMessage(accepted: accepted, offered: offered)
        case .notDTLSSRTP(let line): "line \(line): the video is not UDP/TLS/RTP/SAVPF"
        case .videoNotBundled(let line): "line \(line): the video m-section is in no BUNDLE group"
        case .noRTCPMux(let line): "line \(line): the video m-section has no a=rtcp-mux"
        case .passiveSetup(let line): "line \(line): a=setup:passive (this server can only be the DTLS server)"
        case .noSHA256Fingerprint(let line): "line \(line): no SHA-256 a=fingerprint"
        case .payloadTypeCollidesWithRTCP(let type, let line):
            "line \(line): video payload type \(type) is in 64-95, which RTCP's packet types shadow under rtcp-mux (RFC 5761 §4); offer it as 96-127 or 35-63"
        case .invalidLocalParameters(let problem): "local parameters: \(problem)"
        }
    }

    private static func noCodecMessage(accepted: [VideoCodec], offered: [String]) -> String {
        let list = offered.isEmpty ? "nothing usable" : offered.joined(separator: ", ")
        guard !accepted.isEmpty else { return "no video codec is enabled (offered: \(list))" }
        return "no \(accepted.map { $0 == .h264 ? "H.264" : "H.265" }.joined(separator: " or ")) video in the offer (offered: \(list))"
    }
}
