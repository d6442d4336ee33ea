import Bitstream

/// `[webrtc]`: the daemon's one WHIP endpoint (HTTP) and its one ICE port (UDP), shared by every stream with
/// `listen = "whip"`. Sessions are told apart by their ICE username, then by their address (RFC 8445 §2.5).
public struct WebRTCServerConfiguration: Sendable, Equatable {
    /// Where WHIP clients `POST` their offers: `http://HOST:PORT/whip/STREAM`.
    public var http: ListenAddress
    /// The UDP socket every session's media arrives on (the host candidate of every answer).
    public var media: ListenAddress
    /// Addresses put in answers as host candidates instead of `media`'s (NAT, or a wildcard `media` host).
    public var announce: [String] = []
    /// Host names the WHIP endpoint answers to besides its certificate's, `listen`'s and `localhost` (DNS
    /// rebinding: any other `Host:` is answered 421).
    public var serverNames: [String] = []
    /// WebRTC sessions open at once, all streams together (each holds a DTLS association and SRTP contexts).
    public var maximumSessions = 64
    /// HTTPS for the WHIP endpoint and the share page; nil: plain HTTP, on loopback only.
    public var tls: TLSFiles?

    /// The operator's certificate (PEM, the server's first, then its chain) and unencrypted private key (PEM).
    public struct TLSFiles: Sendable, Equatable {
        public var certificate: String
        public var key: String
    }

    public init(http: ListenAddress, media: ListenAddress) {
        self.http = http
        self.media = media
    }

    /// The addresses answers name as candidates, where `media` is one address or `announce` is set (a wildcard
    /// `media` names the interfaces' addresses at each offer: `HostCandidates`).
    public var candidateAddresses: [String] { announce.isEmpty ? [media.host] : announce }

    /// `media` is 0.0.0.0 or ::: datagrams come to every address of the machine, and replies leave from the one
    /// each came to (`WildcardMediaSocket`).
    public var mediaIsWildcard: Bool { BindAddress.resolveNumeric(media.host)?.isWildcard == true }

    /// The WHIP URL of `stream`.
    public func url(of stream: String) -> String {
        "\(tls == nil ? "http" : "https")://\(http.host.contains(":") ? "[\(http.host)]" : http.host):\(http.port)/whip/\(stream)"
    }
}

/// A stream fed by WebRTC (`listen = "whip"`): who may post offers to it, and how its RTP is received.
public struct WebRTCSettings: Sendable, Equatable {
    /// The bearer token a WHIP client must present (RFC 6750), read from `token_file`.
    public var token: BearerToken
    public var tokenFile: String
    /// Reorder window and keyframe requests; payload type and clock rate come from the negotiated session.
    public var rtp: RTPSettings
    /// `remb = false`: no REMB offered or sent, to a sender without transport-cc.
    public var remb = true
    /// `transport_cc = false`: transport-wide feedback never answered; the sender follows REMB (or its losses).
    public var transportCC = true
    /// `max_bitrate` (bits per second): the sender's ceiling, in the answer (`b=TIAS`, `b=AS`), in REMB and as the
    /// share page's encoder limit; nil: none but the sender's own (REMB at most 50 Mbit/s).
    public var maximumBitrate: UInt64?

    /// What the share page asks the browser's encoder for when `max_bitrate` is not set: room for a 1080p screen
    /// in motion (Chromium allows itself about 2.5 Mbit/s otherwise).
    static let sharePageDefaultBitrate: UInt64 = 20_000_000

    /// Where a libwebrtc sender starts its estimate (`x-google-start-bitrate` in the answer) instead of its own
    /// 300 kbit/s, at which a 1080p screen's first keyframe takes seconds to pace out while the encoder drops
    /// frames: REMB's start, within `max_bitrate`.
    var startBitrate: UInt64 { min(ReceiverBitrateAllowance.initial, maximumBitrate ?? .max) }

    /// The RTCP feedback answers may offer to send.
    var feedback: Set<WebRTCAnswer.NegotiatedVideo.Feedback> {
        Set(WebRTCAnswer.NegotiatedVideo.Feedback.allCases.filter { (remb || $0 != .remb) && (transportCC || $0 != .transportCC) })
    }

    public init(token: BearerToken, tokenFile: String) {
        self.token = token
        self.tokenFile = tokenFile
        var rtp = RTPSettings()
        // A browser answers a PLI within a frame; without one a session that starts mid-GOP waits for the
        // encoder's next keyframe (seconds, for a screen).
        rtp.keyframeRequest = .pli
        rtp.rtcpMux = true
        // A keyframe arrives as a burst of a hundred packets or more within milliseconds: a window counted in
        // packets must outlast a NACK's round trip through such a burst (64 did not, on loopback with 10 ms delay).
        rtp.reorderWindow = 256
        self.rtp = rtp
    }
}

/// A secret presented as `Authorization: Bearer …`. Its description never shows it; it is compared in constant
/// time (the number of matching bytes does not show in the time a refusal takes).
public struct BearerToken: Sendable, Equatable, CustomStringConvertible {
    private let bytes: [UInt8]

    /// RFC 6750 §2.1's b64token characters only, 16 to 512 of them.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        let allowed: (UInt8) -> Bool = {
            (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) || Array("-._~+/=".utf8).contains($0)
        }
        guard (16...512).contains(bytes.count), bytes.allSatisfy(allowed) else { return nil }
        self.bytes = bytes
    }

    public func matches(_ presented: some Collection<UInt8>) -> Bool {
        var difference = UInt8(presented.count == bytes.count ? 0 : 1)
        // Always walks the whole expected token, whatever was presented.
        var iterator = presented.makeIterator()
        for byte in bytes { difference |= byte ^ (iterator.next() ?? 0) }
        return difference == 0
    }

    public var description: String { "<token>" }
}
