/// Which RTP and RTCP packets of an RTSP session are the server's (RFC 2326 §12.39, RFC 3550 §8.2). Another
/// process on the server's address (a local user reading our port pair from /proc/net/udp) can send to our ports
/// from any port it likes and with any SSRC: the address alone proves nothing. Media is accepted only
///
/// - from the server's RTP port: the one SETUP's `server_port` names, or, when it names none, the first port on
///   the server's address that sends a valid RTP packet (learned once, kept for the session);
/// - with the session's SSRC: SETUP's `ssrc=`, or, when it names none, the first SSRC of an accepted packet (and
///   when the first packet from a named port or the connection carries another SSRC than `ssrc=`, that one: some
///   cameras name one SSRC and send another, and nobody else can send from there).
///
/// RTCP counts only from the server's RTCP port (`server_port`'s second number, or the learned RTP port + 1), and a
/// sender report or BYE only for the session's SSRC. A new SSRC within the session is refused (a camera whose
/// encoder restarts with a new SSRC goes quiet for the session, which then ends at `idle_timeout` and the next
/// session learns the new one): a source change cannot be told from a forged one. Pure; the caller checks the
/// address. Over interleaved TCP there are no ports (`port` nil), the SSRC rule still holds.
public struct RTSPMediaGate: Sendable, Equatable {
    public enum Ports: Sendable, Equatable {
        /// SETUP's server_port.
        case named(rtp: Int, rtcp: Int)
        /// None named: the first valid RTP packet's source port will be taken.
        case learning
        case learned(rtp: Int)
        /// Interleaved on the RTSP connection: no ports to check.
        case interleaved
    }

    public enum Source: Sendable, Equatable {
        /// SETUP's ssrc=, before the first packet.
        case named(UInt32)
        case learning
        case learned(UInt32)
    }

    public enum Verdict: Sendable, Equatable {
        case accepted
        /// Accepted, the first of the session, with another SSRC than SETUP's `ssrc=` named (taken from then on).
        case acceptedOtherThanNamed(named: UInt32)
        /// Not an RTP packet (too short, version not 2): dropped, the sequence gap tells the loss.
        case malformed
        /// From a port other than the server's.
        case foreignPort(Int)
        /// Another SSRC than the session's.
        case foreignSource(UInt32)

        public var isAccepted: Bool {
            switch self {
            case .accepted, .acceptedOtherThanNamed: true
            case .malformed, .foreignPort, .foreignSource: false
            }
        }
    }

    public private(set) var ports: Ports
    public private(set) var source: Source

    public init(serverPorts: (rtp: Int, rtcp: Int)?, interleaved: Bool = false, ssrc: UInt32?) {
        ports = interleaved ? .interleaved : serverPorts.map { .named(rtp: $0.rtp, rtcp: $0.rtcp) } ?? .learning
        source = ssrc.map { .named($0) } ?? .learning
    }

    /// The session's SSRC, once known.
    public var ssrc: UInt32? {
        switch source {
        case .named(let ssrc), .learned(let ssrc): ssrc
        case .learning: nil
        }
    }

    /// The server's RTCP port, once known (nil over interleaved TCP).
    public var rtcpPort: Int? {
        switch ports {
        case .named(_, let rtcp): rtcp
        case .learned(let rtp): rtp < 65535 ? rtp + 1 : nil
        case .learning, .interleaved: nil
        }
    }

    /// One RTP packet from `port` (nil over TCP) on the server's address; learns the port and SSRC from the first.
    public mutating func admitRTP(_ packet: UnsafeRawBufferPointer, fromPort port: Int?) -> Verdict {
        guard packet.count >= 12, packet[0] >> 6 == 2 else { return .malformed }
        let ssrc = (8..<12).reduce(UInt32(0)) { $0 << 8 | UInt32(packet[$1]) }
        switch ports {
        case .named(let rtp, _) where port != rtp, .learned(let rtp) where port != rtp:
            return .foreignPort(port ?? -1)
        default:
            break
        }
        switch source {
        case .named(let own) where own != ssrc && trustsPort:
            // Cameras are known to name one SSRC and send another; only the server can send from its named port or
            // on its connection, so its first packet's SSRC is taken instead.
            source = .learned(ssrc)
            return .acceptedOtherThanNamed(named: own)
        case .named(let own), .learned(let own):
            guard own == ssrc else { return .foreignSource(ssrc) }
            source = .learned(own)
        case .learning:
            source = .learned(ssrc)
        }
        if case .learning = ports, let port { ports = .learned(rtp: port) }
        return .accepted
    }

    /// Packets that reach us from the named server port or on the RTSP connection can only be the server's.
    private var trustsPort: Bool {
        switch ports {
        case .named, .interleaved: true
        case .learning, .learned: false
        }
    }

    /// Whether RTCP from `port` (nil over TCP) may be read at all.
    public func admitsRTCP(fromPort port: Int?) -> Bool {
        if case .interleaved = ports { return true }
        guard let expected = rtcpPort else { return false }
        return port == expected
    }

    /// Whether a sender report or BYE from `sender` speaks for this session: only the session's SSRC does (none
    /// does before the first RTP packet when SETUP named no SSRC).
    public func owns(_ sender: UInt32) -> Bool { ssrc == sender }
}
