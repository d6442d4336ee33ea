import Foundation
import Glibc
import NIOCore
@testable import Pipeline
import Testing

/// Who holds a connection, for fair shares of an endpoint's places: a remote host by its address (IPv6 by its /64),
/// this machine's own clients by the user owning the client's socket.
struct ConnectionPartyTests {
    @Test func remoteHostsAreTheirAddressesAndIPv6HostsTheir64() throws {
        let local = try SocketAddress(ipAddress: "192.0.2.2", port: 8443)
        let host = try #require(ConnectionParty.of(remote: try SocketAddress(ipAddress: "192.0.2.9", port: 40000), local: local))
        #expect(host == .remote([192, 0, 2, 9]) && host.isRemote)
        #expect(host.description == "192.0.2.9" && host.network == [192, 0, 2])
        let v6Local = try SocketAddress(ipAddress: "2001:db8::2", port: 8443)
        let first = ConnectionParty.of(remote: try SocketAddress(ipAddress: "2001:db8:1:2:aaaa::1", port: 1), local: v6Local)
        let second = ConnectionParty.of(remote: try SocketAddress(ipAddress: "2001:db8:1:2:bbbb::7", port: 2), local: v6Local)
        #expect(first != nil && first == second, "one /64 is one host")
        #expect(first?.description == "2001:db8:1:2::/64" && first?.network == [0x20, 0x01, 0x0d, 0xb8, 0, 1])
        // An IPv4 client of a dual-stack socket is its IPv4 address.
        let mapped = ConnectionParty.of(remote: try SocketAddress(ipAddress: "::ffff:192.0.2.9", port: 3), local: v6Local)
        #expect(mapped == .remote([192, 0, 2, 9]))
        #expect(ConnectionParty.of(remote: nil, local: local) == nil)
    }

    /// A client on this machine is the user that owns its socket, as the kernel says (a real connection).
    @Test func aLocalClientIsItsUser() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && listen(listener, 1) == 0 && getsockname(listener, $0, &length) == 0 } }
        try #require(bound)
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(client) }
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, length) == 0 } }
        try #require(connected)
        var clientAddress = sockaddr_in()
        var clientLength = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &clientAddress) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(client, $0, &clientLength) } }
        let port = Int(UInt16(bigEndian: address.sin_port)), clientPort = Int(UInt16(bigEndian: clientAddress.sin_port))
        let party = ConnectionParty.of(remote: try SocketAddress(ipAddress: "127.0.0.1", port: clientPort),
                                       local: try SocketAddress(ipAddress: "127.0.0.1", port: port))
        #expect(party == .localUser(geteuid()) && party?.isRemote == false && party?.network == nil)
        #expect(party?.description == "local user \(geteuid())")
        // A loopback peer with no such socket (none connected from that port): loopback as one party.
        let unknown = ConnectionParty.of(remote: try SocketAddress(ipAddress: "127.0.0.1", port: 1), local: try SocketAddress(ipAddress: "127.0.0.1", port: port))
        #expect(unknown == .loopback && unknown?.description == "loopback")
    }
}
