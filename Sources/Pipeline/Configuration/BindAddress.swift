import Glibc
import NIOCore

/// An address a listening socket can be bound to, for telling whether two listen addresses collide.
struct BindAddress: Equatable, Sendable {
    /// 4 or 16 bytes, network order.
    var bytes: [UInt8]

    var isWildcard: Bool { bytes.allSatisfy { $0 == 0 } }
    var isIPv6: Bool { bytes.count == 16 }
    /// 127.0.0.0/8 or ::1.
    var isLoopback: Bool { bytes.count == 4 ? bytes[0] == 127 : bytes == [UInt8](repeating: 0, count: 15) + [1] }

    /// `text` when it is one numeric IPv4 or IPv6 address (no name lookup); nil otherwise.
    static func resolveNumeric(_ text: String) -> BindAddress? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return BindAddress(bytes: withUnsafeBytes(of: &v4) { Array($0) }) }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return BindAddress(bytes: withUnsafeBytes(of: &v6) { Array($0) }) }
        return nil
    }

    /// Every address `host` stands for when binding (getaddrinfo with AI_PASSIVE: "localhost" is 127.0.0.1 and
    /// ::1); nil when it stands for none.
    static func resolve(_ host: String) -> [BindAddress]? {
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return nil }
        defer { freeaddrinfo(first) }
        var addresses: [BindAddress] = []
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let current = entry {
            if let address = current.pointee.ai_addr {
                switch Int32(address.pointee.sa_family) {
                case AF_INET:
                    var raw = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
                    addresses.append(BindAddress(bytes: withUnsafeBytes(of: &raw) { Array($0) }))
                case AF_INET6:
                    var raw = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
                    addresses.append(BindAddress(bytes: withUnsafeBytes(of: &raw) { Array($0) }).unmapped)
                default:
                    break
                }
            }
            entry = current.pointee.ai_next
        }
        return addresses.isEmpty ? nil : addresses
    }

    /// An IPv4-mapped IPv6 address (::ffff:a.b.c.d) as the IPv4 address it is: a socket bound to one takes the
    /// other's port.
    var unmapped: BindAddress {
        guard bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff else { return self }
        return BindAddress(bytes: Array(bytes[12...]))
    }

    /// Whether a socket bound to one of `a` and one bound to one of `b` (same protocol and port) collide: the same
    /// address, a wildcard and an address of its family, or the IPv6 wildcard, which Linux binds dual-stack.
    static func overlap(_ a: [BindAddress], _ b: [BindAddress]) -> Bool {
        a.contains { first in
            b.contains { second in
                first == second || (first.isWildcard && (first.isIPv6 || !second.isIPv6))
                    || (second.isWildcard && (second.isIPv6 || !first.isIPv6))
            }
        }
    }
}

extension SocketAddress {
    /// The IP address in network order (4 or 16 bytes), without the port; nil for a Unix socket.
    var ipAddressBytes: [UInt8]? {
        withSockAddr { address, _ in
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                var raw = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
                return withUnsafeBytes(of: &raw) { Array($0) }
            case AF_INET6:
                var raw = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
                return withUnsafeBytes(of: &raw) { Array($0) }
            default:
                return nil
            }
        }
    }
}
