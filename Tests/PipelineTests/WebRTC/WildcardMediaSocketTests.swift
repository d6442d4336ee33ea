import Glibc
import NIOCore
import Testing

@testable import Pipeline

/// Replies from a wildcard media socket leave from the address chosen (the one the peer's datagram came to), not
/// from the route's source: 127.0.0.2 and 127.0.0.3 are this machine's too, and the kernel would pick 127.0.0.1.
@Suite(.serialized) struct WildcardMediaSocketTests {
    /// A UDP socket bound to `host` (IPv4 or IPv6 loopback) on a free port, with a 2 s receive timeout.
    static func peer(_ host: String) throws -> (descriptor: Int32, address: SocketAddress) {
        let address = try SocketAddress(ipAddress: host, port: 0)
        let descriptor = socket(host.contains(":") ? AF_INET6 : AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        #expect(descriptor >= 0)
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        #expect(address.withSockAddr { bind(descriptor, $0, socklen_t($1)) } == 0)
        return (descriptor, try boundAddress(descriptor))
    }

    static func boundAddress(_ descriptor: Int32) throws -> SocketAddress {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) } }
        return address(storage)
    }

    static func address(_ storage: sockaddr_storage) -> SocketAddress {
        var storage = storage
        return withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                if Int32(raw.pointee.sa_family) == AF_INET {
                    return raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { SocketAddress($0.pointee, host: "") }
                }
                return raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { SocketAddress($0.pointee, host: "") }
            }
        }
    }

    /// What `descriptor` received next, and from where.
    static func receive(_ descriptor: Int32) throws -> (bytes: [UInt8], from: SocketAddress)? {
        var buffer = [UInt8](repeating: 0, count: 2048)
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let count = buffer.withUnsafeMutableBytes { bytes in
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(descriptor, bytes.baseAddress, bytes.count, 0, $0, &length) }
            }
        }
        guard count >= 0 else { return nil }
        return (Array(buffer[0..<count]), address(storage).unmapped)
    }

    static func freePort() throws -> Int {
        let probe = try peer("127.0.0.1")
        defer { close(probe.descriptor) }
        return probe.address.port!
    }

    @Test(arguments: ["0.0.0.0", "::"])
    func aReplyLeavesFromTheAddressChosen(wildcard host: String) throws {
        let port = try Self.freePort()
        let socket = try WildcardMediaSocket.bind(ListenAddress(transport: .udp, host: host, port: port))
        defer { close(socket.descriptor) }
        #expect(socket.isIPv6 == host.contains(":"))
        let client = try Self.peer("127.0.0.1")
        defer { close(client.descriptor) }
        for source in ["127.0.0.2", "127.0.0.3", "127.0.0.1"] {
            let from = try SocketAddress(ipAddress: source, port: port)
            #expect(socket.send(Array(source.utf8), to: client.address, from: from))
            let received = try Self.receive(client.descriptor)
            #expect(received?.bytes == Array(source.utf8))
            #expect(received?.from == from, "sent from \(source), arrived from \(String(describing: received?.from))")
        }
        if socket.isIPv6 {
            let client6 = try Self.peer("::1")
            defer { close(client6.descriptor) }
            let from = try SocketAddress(ipAddress: "::1", port: port)
            #expect(socket.send([1, 2, 3], to: client6.address, from: from))
            #expect(try Self.receive(client6.descriptor)?.from == from)
        } else {
            // An IPv6 source cannot be chosen on an IPv4 socket: refused, nothing sent.
            #expect(!socket.send([1], to: client.address, from: try SocketAddress(ipAddress: "::1", port: port)))
        }
        // An address that is not this machine's: the kernel refuses, and the send says so.
        #expect(!socket.send([1], to: client.address, from: try SocketAddress(ipAddress: "192.0.2.123", port: port)))
    }

    @Test func aDualStackPeerIsNamedAsWhatItIs() throws {
        let mapped = try SocketAddress(ipAddress: "::ffff:198.18.0.7", port: 5000)
        let plain = try SocketAddress(ipAddress: "198.18.0.7", port: 5000)
        #expect(mapped.unmapped == plain)
        #expect(plain.mapped == mapped)
        let six = try SocketAddress(ipAddress: "fd00::7", port: 5000)
        #expect(six.unmapped == six)
        #expect(six.mapped == six)
    }

    /// A dual-stack socket's IPv4 peer is named as IPv4; a mapped source that came over IPv6 is a forgery, dropped.
    @Test func aMappedSourceIsTakenOnlyOverIPv4() throws {
        let socket = WildcardMediaSocket(descriptor: -1, isIPv6: true, port: 8189)
        let mapped = try SocketAddress(ipAddress: "::ffff:127.0.0.1", port: 4444)
        #expect(socket.peer(mapped, arrivedAt: try SocketAddress(ipAddress: "127.0.0.1", port: 0)) == (try SocketAddress(ipAddress: "127.0.0.1", port: 4444)))
        #expect(socket.peer(mapped, arrivedAt: try SocketAddress(ipAddress: "::ffff:192.0.2.2", port: 8189)) != nil)
        #expect(socket.peer(mapped, arrivedAt: try SocketAddress(ipAddress: "fd77::1", port: 0)) == nil)
        #expect(socket.peer(mapped, arrivedAt: nil) == nil)
        let six = try SocketAddress(ipAddress: "fd77::2", port: 4444)
        #expect(socket.peer(six, arrivedAt: try SocketAddress(ipAddress: "fd77::1", port: 0)) == six)
        let ipv4Socket = WildcardMediaSocket(descriptor: -1, isIPv6: false, port: 8189)
        let four = try SocketAddress(ipAddress: "192.0.2.9", port: 4444)
        #expect(ipv4Socket.peer(four, arrivedAt: nil) == four)
    }

    /// The destination a wildcard socket's datagram carried, as the session table names its local address.
    @Test func aDestinationBecomesALocalAddressWithTheSocketsPort() throws {
        let socket = WildcardMediaSocket(descriptor: -1, isIPv6: true, port: 8189)
        let info = NIOPacketInfo(destinationAddress: try SocketAddress(ipAddress: "::ffff:127.0.0.2", port: 0), interfaceIndex: 1)
        #expect(socket.local(from: info) == (try SocketAddress(ipAddress: "127.0.0.2", port: 8189)))
        #expect(socket.local(from: nil) == nil)
    }
}
