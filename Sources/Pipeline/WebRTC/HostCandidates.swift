import Glibc
import NIOCore

/// The host candidates an answer names when `media` is a wildcard and no `announce` is set: the addresses of the
/// machine's interfaces now (read at each offer, so that an address that came later with DHCP or a VPN is named).
/// RFC 8445 §5.1.1.1: loopback addresses are left out, and IPv6 link-local ones (they need a zone a peer cannot
/// know); a machine with nothing else names its loopback addresses, so that a client on it still gets in.
enum HostCandidates {
    /// One interface address, as `getifaddrs` gives it.
    struct InterfaceAddress: Equatable {
        var interface: String
        /// 4 or 16 bytes, network order.
        var bytes: [UInt8]
        var isUp: Bool
    }

    /// The candidates for a wildcard socket of `family` (`.inet`: IPv4 only; `.inet6`: both, Linux binds `::`
    /// dual-stack), as text, IPv6 first (RFC 8421's preference; each is tried anyway), at most `limit`.
    static func select(from interfaces: [InterfaceAddress], ipv6Socket: Bool, limit: Int) -> [String] {
        let usable = interfaces.filter { $0.isUp && ($0.bytes.count == 4 || ipv6Socket) }
        var seen = Set<[UInt8]>()
        let unique = usable.filter { seen.insert($0.bytes).inserted }
        let reachable = unique.filter { !isLoopback($0.bytes) && !isLinkLocalIPv6($0.bytes) && !isUnspecified($0.bytes) }
        let chosen = reachable.isEmpty ? unique.filter { isLoopback($0.bytes) } : reachable
        let ordered = chosen.filter { $0.bytes.count == 16 } + chosen.filter { $0.bytes.count == 4 }
        return ordered.prefix(limit).map { text(of: $0.bytes) }
    }

    /// The machine's interface addresses now; empty when they cannot be read.
    static func interfaceAddresses() -> [InterfaceAddress] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(first) }
        var addresses: [InterfaceAddress] = []
        var entry: UnsafeMutablePointer<ifaddrs>? = first
        while let current = entry {
            entry = current.pointee.ifa_next
            guard let address = current.pointee.ifa_addr else { continue }
            // The address's bytes where the sockaddr structs keep them (at 4 for IPv4, at 8 for IPv6): their members
            // come into this module through other modules' headers.
            let raw = UnsafeRawPointer(address)
            let bytes: [UInt8]
            switch Int32(address.pointee.sa_family) {
            case AF_INET: bytes = Array(UnsafeRawBufferPointer(start: raw + 4, count: 4))
            case AF_INET6: bytes = Array(UnsafeRawBufferPointer(start: raw + 8, count: 16))
            default: continue
            }
            let flags = current.pointee.ifa_flags
            let name = UnsafeBufferPointer(start: current.pointee.ifa_name, count: strlen(current.pointee.ifa_name))
            addresses.append(InterfaceAddress(interface: String(decoding: name.map { UInt8(bitPattern: $0) }, as: UTF8.self), bytes: bytes,
                                              isUp: flags & UInt32(IFF_UP) != 0 && flags & UInt32(IFF_RUNNING) != 0))
        }
        return addresses
    }

    static func isLoopback(_ bytes: [UInt8]) -> Bool {
        bytes.count == 4 ? bytes[0] == 127 : bytes == [UInt8](repeating: 0, count: 15) + [1]
    }

    static func isLinkLocalIPv6(_ bytes: [UInt8]) -> Bool { bytes.count == 16 && bytes[0] == 0xfe && bytes[1] & 0xc0 == 0x80 }

    static func isUnspecified(_ bytes: [UInt8]) -> Bool { bytes.allSatisfy { $0 == 0 } }

    static func text(of bytes: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        _ = bytes.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
