@testable import MediaSecurity

/// The daemon's DTLS server and a browser-like DTLS client, with the datagrams between them carried by hand, so a
/// test can drop, cut or reorder any of them.
final class InMemoryHandshake {
    let serverIdentity: DTLSIdentity
    let clientIdentity: DTLSIdentity?
    let server: DTLSServerAssociation
    let client: DTLSClientAssociation
    private(set) var serverEvents: [DTLSEvent] = []
    private(set) var clientEvents: [DTLSEvent] = []
    /// Every datagram either side sent, for checks on their sizes and record boundaries.
    private(set) var sentDatagrams: [[UInt8]] = []

    /// Identities are made fresh unless given; `serverExpects`/`clientExpects` default to the real fingerprints.
    init(
        serverIdentity: DTLSIdentity? = nil, clientIdentity: DTLSIdentity?? = .none,
        serverExpects: [UInt8]? = nil, clientExpects: [UInt8]? = nil,
        clientProfiles: String? = "SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80",
        initialTimeout: Duration? = nil
    ) throws {
        let serverIdentity = try serverIdentity ?? DTLSIdentity.generate()
        let clientIdentity: DTLSIdentity? = switch clientIdentity {
        case .none: try DTLSIdentity.generate()
        case .some(let given): given
        }
        self.serverIdentity = serverIdentity
        self.clientIdentity = clientIdentity
        server = try DTLSServerAssociation(
            identity: serverIdentity,
            expectedPeerFingerprint: serverExpects ?? clientIdentity?.fingerprintSHA256
                ?? Array(repeating: 0, count: 32),
            initialTimeout: initialTimeout
        )
        client = try DTLSClientAssociation(
            identity: clientIdentity, expectedPeerFingerprint: clientExpects ?? serverIdentity.fingerprintSHA256,
            srtpProfiles: clientProfiles, initialTimeout: initialTimeout
        )
    }

    func takeFromClient() -> [[UInt8]] {
        let datagrams = client.core.takeOutgoingDatagrams()
        sentDatagrams += datagrams
        return datagrams
    }

    func takeFromServer() -> [[UInt8]] {
        let datagrams = server.takeOutgoingDatagrams()
        sentDatagrams += datagrams
        return datagrams
    }

    func deliverToServer(_ datagrams: [[UInt8]]) {
        for datagram in datagrams { serverEvents.append(server.receive(datagram)) }
    }

    func deliverToClient(_ datagrams: [[UInt8]]) {
        for datagram in datagrams { clientEvents.append(client.core.receive(datagram)) }
    }

    /// Carries datagrams both ways until neither side has any left.
    func exchange(rounds: Int = 16) {
        for _ in 0..<rounds {
            let toServer = takeFromClient()
            let toClient = takeFromServer()
            if toServer.isEmpty && toClient.isEmpty { return }
            deliverToServer(toServer)
            deliverToClient(toClient)
        }
    }

    var serverKeys: DTLSKeyingMaterial? { Self.keys(in: serverEvents) }
    var clientKeys: DTLSKeyingMaterial? { Self.keys(in: clientEvents) }
    var serverFailure: DTLSFailure? { Self.failure(in: serverEvents) }
    var clientFailure: DTLSFailure? { Self.failure(in: clientEvents) }

    private static func keys(in events: [DTLSEvent]) -> DTLSKeyingMaterial? {
        for case .connected(let keys) in events { return keys }
        return nil
    }

    private static func failure(in events: [DTLSEvent]) -> DTLSFailure? {
        for case .failed(let failure) in events { return failure }
        return nil
    }
}

/// The lengths of the DTLS records that make up `datagram`, or nil when it does not end on a record boundary.
func dtlsRecordLengths(_ datagram: [UInt8]) -> [Int]? {
    var lengths: [Int] = []
    var offset = 0
    while datagram.count - offset >= 13 {
        let length = 13 + (Int(datagram[offset + 11]) << 8 | Int(datagram[offset + 12]))
        guard length <= datagram.count - offset else { return nil }
        lengths.append(length)
        offset += length
    }
    return offset == datagram.count ? lengths : nil
}

/// A small seeded generator (SplitMix64), so every run feeds the same garbage.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension Array where Element == UInt8 {
    init(hex: String) {
        let digits = hex.filter { !$0.isWhitespace }.map { UInt8($0.hexDigitValue!) }
        self = stride(from: 0, to: digits.count, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }
    }
}
