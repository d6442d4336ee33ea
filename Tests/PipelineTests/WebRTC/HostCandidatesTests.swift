import Testing

@testable import Pipeline

/// Which interface addresses an answer names for a wildcard `media` (RFC 8445 §5.1.1.1).
struct HostCandidatesTests {
    typealias Address = HostCandidates.InterfaceAddress

    static let machine: [Address] = [
        Address(interface: "lo", bytes: [127, 0, 0, 1], isUp: true),
        Address(interface: "eth0", bytes: [192, 0, 2, 2], isUp: true),
        Address(interface: "lo", bytes: [UInt8](repeating: 0, count: 15) + [1], isUp: true),
        Address(interface: "eth0", bytes: [0xfd, 0] + [UInt8](repeating: 0, count: 13) + [2], isUp: true),
        Address(interface: "eth0", bytes: [0xfe, 0x80] + [UInt8](repeating: 0, count: 13) + [2], isUp: true),
        Address(interface: "docker0", bytes: [172, 17, 0, 1], isUp: false),
        Address(interface: "veth1", bytes: [198, 18, 5, 1], isUp: true),
        // A second interface with the same address (a bond's members): named once.
        Address(interface: "eth1", bytes: [192, 0, 2, 2], isUp: true),
    ]

    @Test func anIPv4WildcardNamesTheIPv4AddressesOfInterfacesThatAreUpButNotLoopback() {
        #expect(HostCandidates.select(from: Self.machine, ipv6Socket: false, limit: 32) == ["192.0.2.2", "198.18.5.1"])
    }

    @Test func anIPv6WildcardNamesBothFamiliesIPv6FirstWithoutLinkLocal() {
        #expect(HostCandidates.select(from: Self.machine, ipv6Socket: true, limit: 32) == ["fd00::2", "192.0.2.2", "198.18.5.1"])
    }

    @Test func aMachineWithOnlyLoopbackNamesItsLoopbackAddresses() {
        let loopbackOnly = Self.machine.filter { $0.interface == "lo" }
        #expect(HostCandidates.select(from: loopbackOnly, ipv6Socket: true, limit: 32) == ["::1", "127.0.0.1"])
        #expect(HostCandidates.select(from: loopbackOnly, ipv6Socket: false, limit: 32) == ["127.0.0.1"])
        #expect(HostCandidates.select(from: [], ipv6Socket: true, limit: 32) == [])
    }

    @Test func theLimitKeepsTheFirst() {
        let many = (1...40).map { Address(interface: "veth\($0)", bytes: [10, 0, UInt8($0), 1], isUp: true) }
        let chosen = HostCandidates.select(from: many, ipv6Socket: false, limit: 32)
        #expect(chosen.count == 32)
        #expect(chosen.first == "10.0.1.1")
    }

    /// This machine's own list: every address read has 4 or 16 bytes, and loopback is among them.
    @Test func theMachinesAddressesAreRead() {
        let addresses = HostCandidates.interfaceAddresses()
        #expect(addresses.allSatisfy { $0.bytes.count == 4 || $0.bytes.count == 16 })
        #expect(addresses.contains { $0.bytes == [127, 0, 0, 1] })
    }
}
