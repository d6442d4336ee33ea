import NIOCore
import Testing

@testable import Pipeline

/// Which of our addresses a wildcard socket's session replies from, and what may move it (the red team replayed a
/// client's nominating check to another of our addresses, and the DTLS replies went there).
struct ReplyAddressTests {
    static let own: Set<[UInt8]> = [[192, 0, 2, 2], [198, 18, 5, 1], [0xfd, 0] + [UInt8](repeating: 0, count: 13) + [2]]

    /// A reference around the value, for #expect's closures.
    final class Replies {
        var value: ReplyAddress
        init(ownAddresses: Set<[UInt8]>?) { value = ReplyAddress(ownAddresses: ownAddresses) }
        func heard(at address: SocketAddress, nominating: Bool, check: [UInt8]? = nil) -> Bool {
            value.heard(at: address, nominating: nominating, check: check)
        }
    }

    static func address(_ text: String) -> SocketAddress { try! SocketAddress(ipAddress: text, port: 8189) }

    @Test func theFirstCheckSetsItAndOnlyANominatingOneMovesIt() {
        let reply = Replies(ownAddresses: Self.own)
        #expect(reply.heard(at: Self.address("192.0.2.2"), nominating: false, check: [1]))
        #expect(reply.value.current == Self.address("192.0.2.2"))
        // A check of another pair, not nominating: answered from its own address, but replies stay.
        #expect(!reply.heard(at: Self.address("198.18.5.1"), nominating: false, check: [2]))
        #expect(reply.heard(at: Self.address("198.18.5.1"), nominating: true, check: [3]))
        #expect(reply.value.current == Self.address("198.18.5.1"))
        // Media to another address, authenticated SRTP included, does not (a racing copy would move it).
        #expect(!reply.heard(at: Self.address("fd00::2"), nominating: false))
        #expect(reply.value.current == Self.address("198.18.5.1"))
    }

    @Test func aCheckHeardOnceMovesNothingAgain() {
        let reply = Replies(ownAddresses: Self.own)
        #expect(reply.heard(at: Self.address("192.0.2.2"), nominating: true, check: [7, 7, 7]))
        // The same check replayed to another of our addresses.
        #expect(!reply.heard(at: Self.address("198.18.5.1"), nominating: true, check: [7, 7, 7]))
        #expect(reply.value.current == Self.address("192.0.2.2"))
        // Only the latest 64 are remembered: bounded whatever a client sends.
        for id in 0..<200 { _ = reply.heard(at: Self.address("192.0.2.2"), nominating: false, check: [UInt8(id & 0xff), UInt8(id >> 8)]) }
        #expect(reply.heard(at: Self.address("198.18.5.1"), nominating: true, check: [7, 7, 7]))
    }

    @Test func onlyThisMachinesUnicastAddressesCount() {
        let reply = Replies(ownAddresses: Self.own)
        for stranger in ["192.0.2.255", "255.255.255.255", "224.0.0.1", "ff02::1", "203.0.113.9", "fe80::1"] {
            #expect(!reply.heard(at: Self.address(stranger), nominating: true, check: Array(stranger.utf8)), "\(stranger)")
        }
        #expect(reply.value.current == nil)
        // Loopback's whole /8 is this machine's.
        #expect(reply.heard(at: Self.address("127.0.0.2"), nominating: true))
    }

    @Test func aSocketWithOneAddressHasNoneToChoose() {
        let reply = Replies(ownAddresses: nil)
        #expect(!reply.heard(at: Self.address("192.0.2.2"), nominating: true, check: [1]))
        #expect(reply.value.current == nil)
    }

    @Test func theMachinesAddressesAreUnicastAndNotLinkLocal() {
        let addresses = ReplyAddress.machineAddresses()
        #expect(addresses.contains([127, 0, 0, 1]))
        #expect(!addresses.contains { $0.count == 16 && $0[0] == 0xfe && $0[1] & 0xc0 == 0x80 })
    }
}
