import CSocketOwner
import Glibc
import NIOCore

/// Who holds an HTTP endpoint's connection, for fair shares of its places: another machine by its address (IPv4
/// whole, IPv6 by its /64: a host has all of it), or, for this machine's own clients (on loopback, where every
/// client is 127.0.0.1, or on one of its addresses), the local user that owns the client's socket (the kernel says,
/// through sock_diag). A loopback connection whose owner cannot be learnt (netlink not allowed) counts as one party.
enum ConnectionParty: Hashable, Sendable, CustomStringConvertible {
    case remote([UInt8])
    case localUser(UInt32)
    case loopback

    var isRemote: Bool {
        if case .remote = self { return true }
        return false
    }

    /// The network a remote party is part of, which holds a share of its own: an IPv4 /24, an IPv6 /48 (a site's
    /// allocation: one customer holds 256 or 65 536 /64s, each a party); nil for local parties.
    var network: [UInt8]? {
        guard case .remote(let prefix) = self else { return nil }
        return Array(prefix.prefix(prefix.count == 4 ? 3 : 6))
    }

    var description: String {
        switch self {
        case .remote(let prefix):
            return prefix.count == 4 ? prefix.map(String.init).joined(separator: ".")
                : stride(from: 0, to: prefix.count, by: 2).map { String(UInt16(prefix[$0]) << 8 | UInt16(prefix[$0 + 1]), radix: 16) }
                    .joined(separator: ":") + "::/64"
        case .localUser(let uid): return "local user \(uid)"
        case .loopback: return "loopback"
        }
    }

    /// The party of a connection from `remote` to `local`; nil when the channel has no remote address.
    static func of(remote: SocketAddress?, local: SocketAddress?) -> ConnectionParty? {
        guard let remote, let bytes = remote.ipAddressBytes else { return nil }
        let address = BindAddress(bytes: bytes).unmapped
        let localAddress = local?.ipAddressBytes.map { BindAddress(bytes: $0).unmapped }
        // This machine's own clients, on loopback or on any of its addresses: the kernel knows the client's socket
        // (one syscall; another machine's is not found).
        if let port = remote.port, let localAddress, let localPort = local?.port,
           let uid = loopbackOwner(peer: address.bytes, peerPort: port, local: localAddress.bytes, localPort: localPort) {
            return .localUser(uid)
        }
        return address.isLoopback ? .loopback : .remote(Array(address.bytes.prefix(8)))
    }

    /// The uid of the client's socket of a connection from this machine, or nil when the kernel does not say.
    private static func loopbackOwner(peer: [UInt8], peerPort: Int, local: [UInt8], localPort: Int) -> UInt32? {
        guard peer.count == local.count, peer.count == 4 || peer.count == 16 else { return nil }
        var uid: UInt32 = 0
        let result = peer.withUnsafeBufferPointer { peerBytes in
            local.withUnsafeBufferPointer { localBytes in
                streamrecv_loopback_peer_uid(peer.count == 4 ? AF_INET : AF_INET6, peerBytes.baseAddress, UInt16(peerPort),
                                             localBytes.baseAddress, UInt16(localPort), &uid)
            }
        }
        return result == 0 ? uid : nil
    }
}
