import NIOCore

/// Which of our addresses a session's replies leave from, where the media socket is a wildcard (several addresses,
/// `WildcardMediaSocket`). ICE needs the address the client's chosen pair names: the one its nominating check, and
/// then its media, came to. What may move it, and what may not (the red team's attack: one of the client's own
/// checks replayed by an eavesdropper to another of our addresses moved the DTLS replies there, and the handshake
/// never finished):
/// - only an address of this machine's interfaces as they were at the offer, or of 127.0.0.0/8: not a broadcast or
///   multicast address a datagram was sent to, not an IPv6 link-local one (no socket binds it without a zone);
/// - a check's transaction ID moves it once: the same check again (a replay, to another address) does not.
/// Only a nominating check moves it: the client names its chosen pair with one (USE-CANDIDATE). Media does not,
/// authenticated or not: an on-path attacker racing a copy of the client's SRTP to another address ahead of the
/// original moved it before (the original then failed as a replay), and the RTCP went where the client never hears
/// it (the second red team). Any first check or datagram sets it.
struct ReplyAddress {
    private(set) var current: SocketAddress?
    /// IP addresses (4 or 16 bytes) this session's replies may leave from; nil: the socket has one, `current` stays nil.
    private let ownAddresses: Set<[UInt8]>?
    /// Transaction IDs of the checks heard, the latest last: a check seen once moves nothing again.
    private var checksHeard: [[UInt8]] = []
    static let checksRemembered = 64

    init(ownAddresses: Set<[UInt8]>?) { self.ownAddresses = ownAddresses }

    /// A datagram of the session came to `address` (`check`: a STUN check's transaction ID; `nominating`: a check
    /// with USE-CANDIDATE); true when replies now leave from another address than before.
    mutating func heard(at address: SocketAddress?, nominating: Bool, check: [UInt8]? = nil) -> Bool {
        // Media to where replies already leave from, the common case: nothing to look up.
        if check == nil, address == current { return false }
        // 127.0.0.0/8 is this machine's whole (Linux answers it on loopback, and drops it from anywhere else).
        guard let ownAddresses, let address, let bytes = address.ipAddressBytes,
              ownAddresses.contains(bytes) || (bytes.count == 4 && bytes[0] == 127) else { return false }
        if let check {
            guard !checksHeard.contains(check) else { return false }
            checksHeard.append(check)
            if checksHeard.count > Self.checksRemembered { checksHeard.removeFirst() }
        }
        guard current == nil || nominating, current != address else { return false }
        current = address
        return true
    }

    /// The machine's addresses a reply may leave from now: its interfaces' unicast addresses but IPv6 link-local.
    static func machineAddresses() -> Set<[UInt8]> {
        Set(HostCandidates.interfaceAddresses().map(\.bytes).filter { !HostCandidates.isLinkLocalIPv6($0) && !HostCandidates.isUnspecified($0) })
    }
}
