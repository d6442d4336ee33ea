import Glibc
import NIOCore

/// The ICE port bound to a wildcard (`media = "0.0.0.0:P"` or `"[::]:P"`): every datagram arrives with the address
/// it was sent to (IP_PKTINFO, IPV6_RECVPKTINFO), and every reply leaves from that address. ICE needs it: a
/// response from another address than the check went to is no response to the client (RFC 8445 §7.2.5.2.1), and
/// the kernel's own choice (the route's source) is another address whenever the client reached one that is not
/// the route's (a second interface, a client on this machine sending to its LAN address). NIO reads the
/// destination but cannot send from a chosen address, so replies that need one go out by `sendmsg` here, on the
/// event loop that owns the socket. Both families: a dual-stack socket's IPv4 peers appear as IPv4 addresses to
/// the table (`unmapped`), and are mapped back on the way out.
struct WildcardMediaSocket {
    let descriptor: Int32
    let isIPv6: Bool
    let port: Int

    /// A UDP socket bound to `media` (a wildcard), SO_REUSEPORT as `WebRTCServer` binds its media socket, dual-stack
    /// when IPv6, asking for each datagram's destination. For `DatagramBootstrap.withBoundSocket`, which owns it.
    static func bind(_ media: ListenAddress) throws -> WildcardMediaSocket {
        let isIPv6 = media.host.contains(":")
        let descriptor = socket(isIPv6 ? AF_INET6 : AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { throw IOError(errnoCode: errno, reason: "socket") }
        do {
            try enable(descriptor, SOL_SOCKET, SO_REUSEPORT, 1)
            // IPv4 datagrams of a dual-stack socket carry IP_PKTINFO, IPv6 ones IPV6_PKTINFO.
            try enable(descriptor, Int32(IPPROTO_IP), IP_PKTINFO, 1)
            if isIPv6 {
                try enable(descriptor, Int32(IPPROTO_IPV6), IPV6_V6ONLY, 0)
                try enable(descriptor, Int32(IPPROTO_IPV6), IPV6_RECVPKTINFO, 1)
            }
            let address = try SocketAddress(ipAddress: media.host, port: media.port)
            let bound = address.withSockAddr { Glibc.bind(descriptor, $0, socklen_t($1)) }
            guard bound == 0 else { throw IOError(errnoCode: errno, reason: "bind to \(media)") }
        } catch {
            close(descriptor)
            throw error
        }
        return WildcardMediaSocket(descriptor: descriptor, isIPv6: isIPv6, port: media.port)
    }

    /// An inherited socket bound to `media` (a wildcard), asked for each datagram's destination (the unit that
    /// made it did not); nil when it cannot be.
    static func adopting(_ descriptor: Int32, media: ListenAddress) -> WildcardMediaSocket? {
        let isIPv6 = media.host.contains(":")
        guard (try? enable(descriptor, Int32(IPPROTO_IP), IP_PKTINFO, 1)) != nil else { return nil }
        if isIPv6, (try? enable(descriptor, Int32(IPPROTO_IPV6), IPV6_RECVPKTINFO, 1)) == nil { return nil }
        return WildcardMediaSocket(descriptor: descriptor, isIPv6: isIPv6, port: media.port)
    }

    private static func enable(_ descriptor: Int32, _ level: Int32, _ name: Int32, _ value: Int32) throws {
        var value = value
        guard setsockopt(descriptor, level, name, &value, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            throw IOError(errnoCode: errno, reason: "setsockopt")
        }
    }

    /// The address a datagram came to, with the socket's port, as the table names it (IPv4 as IPv4).
    func local(from packetInfo: NIOPacketInfo?) -> SocketAddress? {
        guard var address = packetInfo?.destinationAddress.unmapped else { return nil }
        address.port = port
        return address
    }

    /// Who sent a datagram that came to `destination`, as the table names peers: a dual-stack socket's IPv4 peer
    /// as IPv4. Nil (dropped) for an IPv4-mapped source that came over IPv6: only a forger writes one, a remote
    /// host posing as loopback or any IPv4 address (the red team's: Linux hands such a datagram to `[::]`).
    func peer(_ source: SocketAddress, arrivedAt destination: SocketAddress?) -> SocketAddress? {
        guard isIPv6, source.isIPv4Mapped else { return source }
        guard destination?.unmapped.protocol == .inet else { return nil }
        return source.unmapped
    }

    /// Sends `bytes` to `destination` from `source` (an address of this machine, as `local(from:)` gave it);
    /// false when the kernel took nothing (a full buffer, or `source` is gone): the datagram is lost, as UDP may.
    func send(_ bytes: [UInt8], to destination: SocketAddress, from source: SocketAddress) -> Bool {
        guard let sourceBytes = source.ipAddressBytes, isIPv6 || sourceBytes.count == 4,
              let target = isIPv6 ? destination.mapped : destination else { return false }
        // One control message: IP_PKTINFO's ipi_spec_dst on an IPv4 socket, IPV6_PKTINFO's address on an IPv6 one
        // (an IPv4 source as ::ffff:a.b.c.d, which Linux takes for an IPv4 destination too).
        let (level, type, payload): (Int32, Int32, [UInt8]) = if isIPv6 {
            (Int32(IPPROTO_IPV6), IPV6_PKTINFO, Self.mappedBytes(sourceBytes) + [0, 0, 0, 0])
        } else {
            (Int32(IPPROTO_IP), IP_PKTINFO, [0, 0, 0, 0] + sourceBytes + [0, 0, 0, 0])
        }
        let header = Self.aligned(MemoryLayout<cmsghdr>.size)
        var control = [UInt8](repeating: 0, count: header + Self.aligned(payload.count))
        control.withUnsafeMutableBytes { raw in
            var message = cmsghdr()
            message.cmsg_len = header + payload.count
            message.cmsg_level = level
            message.cmsg_type = type
            withUnsafeBytes(of: &message) { raw.copyMemory(from: $0) }
            raw.baseAddress!.advanced(by: header).copyMemory(from: payload, byteCount: payload.count)
        }
        let sent = target.withSockAddr { name, nameLength in
            bytes.withUnsafeBytes { data in
                control.withUnsafeMutableBytes { control in
                    var vector = iovec(iov_base: UnsafeMutableRawPointer(mutating: data.baseAddress), iov_len: data.count)
                    return withUnsafeMutablePointer(to: &vector) { vector in
                        var header = msghdr(msg_name: UnsafeMutableRawPointer(mutating: name), msg_namelen: socklen_t(nameLength),
                                            msg_iov: vector, msg_iovlen: 1, msg_control: control.baseAddress,
                                            msg_controllen: control.count, msg_flags: 0)
                        return sendmsg(descriptor, &header, Int32(MSG_DONTWAIT))
                    }
                }
            }
        }
        return sent == bytes.count
    }

    /// CMSG_ALIGN: control messages are laid out in units of size_t.
    private static func aligned(_ length: Int) -> Int {
        let unit = MemoryLayout<Int>.size
        return (length + unit - 1) / unit * unit
    }

    static func mappedBytes(_ bytes: [UInt8]) -> [UInt8] {
        bytes.count == 16 ? bytes : [UInt8](repeating: 0, count: 10) + [0xff, 0xff] + bytes
    }
}

extension SocketAddress {
    /// ::ffff:a.b.c.d.
    var isIPv4Mapped: Bool {
        guard case .v6 = self, let bytes = ipAddressBytes else { return false }
        return bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff
    }

    /// ::ffff:a.b.c.d:port as a.b.c.d:port (a dual-stack socket's IPv4 peer as what it is); other addresses as they are.
    var unmapped: SocketAddress {
        guard isIPv4Mapped, let bytes = ipAddressBytes,
              let address = try? SocketAddress(packedIPAddress: ByteBuffer(bytes: bytes[12...]), port: port ?? 0) else {
            return self
        }
        return address
    }

    /// An IPv4 address as ::ffff:a.b.c.d, for a dual-stack socket; an IPv6 one as it is; nil for a Unix address.
    var mapped: SocketAddress? {
        guard case .v4 = self, let bytes = ipAddressBytes else { return ipAddressBytes == nil ? nil : self }
        return try? SocketAddress(packedIPAddress: ByteBuffer(bytes: WildcardMediaSocket.mappedBytes(bytes)), port: port ?? 0)
    }
}
