/// A WHIP client's SDP offer (RFC 9725 §4.2), read for what a receive-only, ICE-lite server needs to answer it:
/// the BUNDLE groups (RFC 8843), ICE credentials (RFC 8839 §5.4), DTLS fingerprints and role (RFC 8842 §5) and, per
/// m-section, the RTP payload formats with their `a=rtpmap`, `a=fmtp` and `a=rtcp-fb` (RFC 4585 §4.2), header
/// extensions (`a=extmap`, RFC 8285) and sources (`a=ssrc`, `a=ssrc-group`, RFC 5576). Attributes it does not use are
/// skipped; a line it does use that does not follow its grammar is an error naming the line, so a peer's typo is
/// reported rather than half-understood. Input is bounded before anything is kept (`Limits`).
public struct WebRTCOffer: Sendable, Equatable {
    /// Bounds on what a peer can make the reader hold: an offer from a browser is 3 to 10 KiB and 50 to 200 lines.
    public enum Limits {
        public static let bytes = 64 * 1024
        public static let lines = 2000
        public static let lineLength = 4096
        public static let mediaSections = 16
        public static let payloadTypesPerSection = 64
    }

    /// The `o=` line (RFC 8866 §5.2); the session id and version stay text, as some stacks write more than 64 bits.
    public struct Origin: Sendable, Equatable {
        public var username: String
        public var sessionID: String
        public var sessionVersion: String
        public var address: String
    }

    /// `a=setup` (RFC 4145 §4, as RFC 8842 §5.2 uses it): which side opens the DTLS association.
    public enum Setup: String, Sendable {
        case actpass, active, passive
    }

    /// The media direction attribute (RFC 8866 §6.7, RFC 3264 §5.1); `sendrecv` when none is given.
    public enum Direction: String, Sendable {
        case sendrecv, sendonly, recvonly, inactive

        /// Whether the offerer sends media in this direction.
        public var sends: Bool { self == .sendrecv || self == .sendonly }
    }

    /// One `a=fingerprint` (RFC 8122 §5): the hash function's name, lower-cased, and the certificate's digest.
    public struct Fingerprint: Sendable, Equatable {
        public var algorithm: String
        public var bytes: [UInt8]

        public init(algorithm: String, bytes: [UInt8]) {
            self.algorithm = algorithm
            self.bytes = bytes
        }
    }

    /// The ICE and DTLS parameters of one transport (RFC 8839 §5.4, RFC 8842 §5): written at session level, in an
    /// m-section, or (RFC 8843 §7.2) only in the BUNDLE group's offerer-tagged m-section.
    public struct TransportParameters: Sendable, Equatable {
        public var iceUsernameFragment: String?
        public var icePassword: String?
        public var iceOptions: [String] = []
        public var fingerprints: [Fingerprint] = []
        /// Nil when not given: RFC 4145 §4 then means `active`.
        public var setup: Setup?

        /// The SHA-256 certificate digest (RFC 8842 §5.1: the hash every endpoint must support), when offered.
        public var sha256Fingerprint: [UInt8]? { fingerprints.first { $0.algorithm == "sha-256" }?.bytes }

        /// These parameters, each missing one taken from `fallback` (a media-level value overrides the session's).
        func filled(from fallback: TransportParameters) -> TransportParameters {
            var result = self
            result.iceUsernameFragment = iceUsernameFragment ?? fallback.iceUsernameFragment
            result.icePassword = icePassword ?? fallback.icePassword
            if iceOptions.isEmpty { result.iceOptions = fallback.iceOptions }
            if fingerprints.isEmpty { result.fingerprints = fallback.fingerprints }
            result.setup = setup ?? fallback.setup
            return result
        }
    }

    /// The m-line's media type (RFC 8866 §5.14).
    public enum Kind: Sendable, Equatable {
        case video, audio, application
        case other(String)

        /// The token as the m-line writes it.
        public var token: String {
            switch self {
            case .video: "video"
            case .audio: "audio"
            case .application: "application"
            case .other(let token): token
            }
        }
    }

    /// One RTP payload type of an m-section with what the attributes say about it.
    public struct PayloadFormat: Sendable, Equatable {
        public var payloadType: UInt8
        /// `a=rtpmap` (RFC 8866 §6.6): the encoding name as written ("H264", "VP8", "rtx"), nil without one.
        public var encodingName: String?
        public var clockRate: UInt32?
        public var channels: UInt16?
        /// The `a=fmtp` text after the payload type, as written (echoed unchanged in an answer).
        public var formatParameters: String?
        /// `a=rtcp-fb` values for this payload type, lower-cased with single spaces ("nack pli", "ccm fir").
        public var feedback: [String] = []

        /// `formatParameters` as name (lower-cased) to value; a bare item ("0-15") has an empty value.
        public var parameters: [String: String] {
            var result: [String: String] = [:]
            for item in (formatParameters ?? "").split(separator: ";") {
                let pair = item.split(separator: "=", maxSplits: 1)
                guard let name = pair.first?.trimmingSpaces(), !name.isEmpty, result[name.lowercased()] == nil else { continue }
                result[name.lowercased()] = pair.count > 1 ? pair[1].trimmingSpaces() : ""
            }
            return result
        }
    }

    /// `a=extmap` (RFC 8285 §8): an RTP header extension's local id and URI.
    public struct HeaderExtension: Sendable, Equatable {
        public var id: UInt8
        public var direction: Direction?
        public var uri: String

        public init(id: UInt8, direction: Direction?, uri: String) {
            self.id = id
            self.direction = direction
            self.uri = uri
        }
    }

    /// `a=ssrc:<ssrc> <attribute>` (RFC 5576 §4.1), the attribute as written ("cname:x", "msid:a b").
    public struct SourceAttribute: Sendable, Equatable {
        public var ssrc: UInt32
        public var attribute: String

        public init(ssrc: UInt32, attribute: String) {
            self.ssrc = ssrc
            self.attribute = attribute
        }
    }

    /// `a=ssrc-group` (RFC 5576 §4.2): "FID" pairs a source with its RTX source (RFC 4588 §8), "FEC-FR" with FEC.
    public struct SourceGroup: Sendable, Equatable {
        public var semantics: String
        public var ssrcs: [UInt32]

        public init(semantics: String, ssrcs: [UInt32]) {
            self.semantics = semantics
            self.ssrcs = ssrcs
        }
    }

    /// One m-section.
    public struct Media: Sendable, Equatable {
        /// The m= line's number (from 1), for messages.
        public var line: Int
        public var kind: Kind
        public var port: UInt16
        /// The transport protocol ("UDP/TLS/RTP/SAVPF" for WebRTC media, RFC 8829 §5.1.2).
        public var proto: String
        /// The m-line's formats as written: payload type numbers for RTP, "webrtc-datachannel" for data.
        public var formats: [String]
        /// One entry per payload type of an RTP m-line, in the m-line's (the offerer's preference) order.
        public var payloads: [PayloadFormat] = []
        public var mid: String?
        public var direction: Direction = .sendrecv
        /// RFC 8843 §6: port 0 with `a=bundle-only` is part of the BUNDLE group, not rejected.
        public var bundleOnly = false
        public var rtcpMux = false
        public var rtcpReducedSize = false
        /// The parameters in force for this m-section: its own, else the session's, else the BUNDLE tag's.
        public var transport = TransportParameters()
        /// `a=rtcp-fb:* <value>`: feedback for every payload type of the section.
        public var wildcardFeedback: [String] = []
        public var extensions: [HeaderExtension] = []
        public var sources: [SourceAttribute] = []
        public var sourceGroups: [SourceGroup] = []
        /// `a=simulcast:send` (RFC 8853 §5.1): the rid of each simulcast stream the offerer would send (the first
        /// of its alternatives, a paused one's `~` removed), in its order; empty without simulcast.
        public var simulcastSendStreams: [String] = []
        /// How many `a=candidate` lines (kept as a count: an ICE-lite server answers, it never checks pairs).
        public var candidateCount = 0
        public var endOfCandidates = false

        /// Port 0 without `a=bundle-only`: the offerer itself disabled the section (RFC 3264 §8.2).
        public var isRejected: Bool { port == 0 && !bundleOnly }

        public func payload(_ payloadType: UInt8) -> PayloadFormat? {
            payloads.first { $0.payloadType == payloadType }
        }

        /// Feedback offered for one payload type: its own `a=rtcp-fb` lines and the `*` ones.
        public func feedback(for payloadType: UInt8) -> [String] {
            (payload(payloadType)?.feedback ?? []) + wildcardFeedback
        }
    }

    public var origin: Origin
    public var sessionName: String
    public var startTime: UInt64
    public var stopTime: UInt64
    /// Each `a=group:BUNDLE` line's mids, in order (the first is the offerer-tagged m-section, RFC 8843 §7.2).
    public var bundleGroups: [[String]]
    /// The session-level ICE and DTLS parameters (each m-section's `transport` has them folded in).
    public var session: TransportParameters
    /// `a=ice-lite` at session level (RFC 8839 §5.3).
    public var iceLite: Bool
    public var media: [Media]

    /// The m-section with this mid (the answer's `NegotiatedVideo.mid` finds the remote ICE and DTLS parameters).
    public func media(withMid mid: String) -> Media? {
        media.first { $0.mid == mid }
    }

    /// The BUNDLE group an m-section's mid is in, if any.
    public func bundleGroup(containing mid: String?) -> [String]? {
        guard let mid else { return nil }
        return bundleGroups.first { $0.contains(mid) }
    }

    /// Reads an offer: CRLF or LF line ends, at most `Limits` of everything. Throws for input that is not SDP,
    /// for lines of attributes it reads that do not follow their grammar, and for an offer no WHIP endpoint could
    /// answer: no BUNDLE group, an m-section without mid, ICE credentials or fingerprint.
    public static func parse(_ text: String) throws(WebRTCOfferError) -> WebRTCOffer {
        // Measured before anything is copied: a 1 GB body costs a count, not an allocation.
        guard text.utf8.count <= Limits.bytes else { throw .tooLarge(bytes: text.utf8.count) }
        var reader = WebRTCOfferReader()
        try reader.read(Array(text.utf8))
        return try reader.finish()
    }
}

/// Why an offer was refused. Each description names the line and says what was expected, without echoing the
/// peer's text (it goes to logs and to the HTTP error body).
public enum WebRTCOfferError: Error, Equatable, CustomStringConvertible {
    case tooLarge(bytes: Int)
    case tooManyLines
    case lineTooLong(line: Int)
    case tooManyMediaSections(line: Int)
    case tooManyPayloadTypes(line: Int)
    /// The first line is not `v=0`.
    case notSDP
    /// A session line RFC 8866 §5 requires ("o=", "s=", "t=") is missing.
    case missingSessionLine(String)
    /// A line we read that does not follow its grammar; `expected` is our text, not the peer's.
    case malformed(line: Int, expected: String)
    case missingICECredentials(line: Int)
    case missingFingerprint(line: Int)
    /// No `a=group:BUNDLE`: RFC 9725 §4.2 makes BUNDLE mandatory for WHIP.
    case noBundleGroup
    case missingMid(line: Int)
    case duplicateMid(line: Int)
    /// A BUNDLE group names a mid no m-section has.
    case unknownBundleMid(line: Int)

    public var description: String {
        switch self {
        case .tooLarge(let bytes): "the offer has \(bytes) bytes (at most \(WebRTCOffer.Limits.bytes))"
        case .tooManyLines: "the offer has more than \(WebRTCOffer.Limits.lines) lines"
        case .lineTooLong(let line): "line \(line): longer than \(WebRTCOffer.Limits.lineLength) bytes"
        case .tooManyMediaSections(let line): "line \(line): more than \(WebRTCOffer.Limits.mediaSections) m-sections"
        case .tooManyPayloadTypes(let line): "line \(line): more than \(WebRTCOffer.Limits.payloadTypesPerSection) payload types"
        case .notSDP: "the offer is not an SDP session description (it must start with v=0)"
        case .missingSessionLine(let field): "the offer has no \(field) line"
        case .malformed(let line, let expected): "line \(line): expected \(expected)"
        case .missingICECredentials(let line): "line \(line): the m-section has no a=ice-ufrag and a=ice-pwd"
        case .missingFingerprint(let line): "line \(line): the m-section has no a=fingerprint"
        case .noBundleGroup: "the offer has no a=group:BUNDLE (WHIP requires BUNDLE, RFC 9725 section 4.2)"
        case .missingMid(let line): "line \(line): the m-section has no a=mid, so it cannot be bundled"
        case .duplicateMid(let line): "line \(line): a second m-section with the same a=mid"
        case .unknownBundleMid(let line): "line \(line): a=group:BUNDLE names a mid no m-section has"
        }
    }
}
