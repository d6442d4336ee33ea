import Glibc

/// `[webrtc]`'s sockets when a service manager holds them across restarts (socket activation), told apart from the
/// streams' listeners by reserved `FileDescriptorName=`s. Adopted instead of bound, once `InheritedSocket` has
/// checked that each is what the configuration says. Owned by the daemon until `WebRTCServer.bind` adopts them.
struct InheritedWebRTCSockets: Sendable {
    /// The WHIP endpoint: a listening TCP socket bound to `[webrtc] listen`.
    static let httpName = "whip-http"
    /// The ICE port: a UDP socket bound to `[webrtc] media`.
    static let mediaName = "whip-media"
    /// No stream may be named so (the configuration refuses it).
    static let reservedNames: Set<String> = [httpName, mediaName]

    var http: Int32?
    var media: Int32?
}

/// A descriptor passed by socket activation, checked against the address the configuration gives it: a socket of
/// another kind or address would serve something else than what `--check-config` approved (plain HTTP beyond
/// loopback, or answers naming a port nobody reads).
enum InheritedSocket {
    struct Mismatch: Error, CustomStringConvertible {
        let description: String
    }

    enum Kind {
        case tcpListener, udp

        var words: String { self == .tcpListener ? "a listening TCP socket" : "a UDP socket" }
    }

    /// "tcp 127.0.0.1:8889" when `descriptor` is a socket of `kind` bound to `expected` (one of its host's addresses,
    /// its port); otherwise throws, saying what the socket is and which unit setting makes it fit.
    static func check(_ descriptor: Int32, name: String, kind: Kind, expected: ListenAddress, key: String) throws(Mismatch) -> String {
        let (domain, type, transport) = (option(descriptor, SO_DOMAIN), option(descriptor, SO_TYPE), option(descriptor, SO_PROTOCOL))
        let listening = option(descriptor, SO_ACCEPTCONN) == 1
        let bound = boundAddress(descriptor)
        let isTCP = type == Int32(SOCK_STREAM.rawValue) && transport == Int32(IPPROTO_TCP)
        let isUDP = type == Int32(SOCK_DGRAM.rawValue) && transport == Int32(IPPROTO_UDP)
        let sort = isTCP ? (listening ? "a listening TCP socket" : "a TCP socket that is not listening") : isUDP ? "a UDP socket" : "another kind of socket"
        let what = [AF_INET, AF_INET6].contains(domain) ? bound.map { "\(sort) bound to \($0.text)" } ?? sort : "not an IP socket"
        let fits = (kind == .tcpListener ? isTCP && listening : isUDP)
            && bound.map { $0.port == expected.port && (BindAddress.resolve(expected.host) ?? []).contains($0.address.unmapped) } == true
        guard fits, let bound else {
            let setting = kind == .tcpListener ? "ListenStream" : "ListenDatagram"
            throw Mismatch(description: "the inherited socket '\(name)' is \(what); [webrtc] \(key) = \"\(expected.host):\(expected.port)\" needs \(kind.words) bound there (\(setting)= in the socket unit and \(key) must name the same address)")
        }
        return "\(kind == .tcpListener ? "tcp" : "udp") \(bound.text)"
    }

    /// Takes a UDP port for the daemon alone. systemd binds every socket with SO_REUSEADDR, and on a UDP port that
    /// lets any local user bind the same port and take the datagrams: cleared on the socket itself (systemd keeps
    /// it, so this outlives restarts), then no other socket may already be there (one bound before the first start).
    /// Returns false when /proc/net/udp did not show the socket, so that no other could be looked for.
    static func claimUDPPort(_ descriptor: Int32, name: String) throws(Mismatch) -> Bool {
        var off: Int32 = 0
        var status = stat()
        guard setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &off, socklen_t(MemoryLayout<Int32>.size)) == 0,
              fstat(descriptor, &status) == 0 else {
            throw Mismatch(description: "the inherited socket '\(name)': \(String(cString: strerror(errno)))")
        }
        guard let sharers = UDPPortSharers.others(sharingWith: UInt64(status.st_ino), in: UDPPortSharers.current()) else { return false }
        guard sharers.isEmpty else {
            let who = sharers.map { "uid \($0.uid) (socket inode \($0.inode))" }.joined(separator: ", ")
            throw Mismatch(description: "the inherited socket '\(name)' shares its UDP port with \(who), bound there while the socket unit allowed it (SO_REUSEADDR): it would receive the media. Stop that program, then start streamrecvd again")
        }
        return true
    }

    private static func option(_ descriptor: Int32, _ name: Int32) -> Int32? {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(descriptor, SOL_SOCKET, name, &value, &length) == 0 ? value : nil
    }

    /// inet_ntop's text, up to its terminating zero.
    private static func printed(_ text: [CChar]) -> String {
        String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The address and port the socket is bound to, nil for one that is not an IP socket. Read from the raw
    /// sockaddr bytes (family, then the port in network order at 2, the IPv4 address at 4 or the IPv6 one at 8):
    /// the sockaddr structs' members come into this module through other modules' headers.
    private static func boundAddress(_ descriptor: Int32) -> (address: BindAddress, port: Int, text: String)? {
        var raw = [UInt8](repeating: 0, count: 128)
        var length = socklen_t(raw.count)
        let named = raw.withUnsafeMutableBytes { getsockname(descriptor, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length) }
        guard named == 0, length >= 8 else { return nil }
        let family = raw.withUnsafeBytes { Int32($0.load(as: sa_family_t.self)) }
        let port = Int(raw[2]) << 8 | Int(raw[3])
        let bytes: [UInt8]
        switch family {
        case AF_INET: bytes = Array(raw[4..<8])
        case AF_INET6 where length >= 24: bytes = Array(raw[8..<24])
        default: return nil
        }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        _ = bytes.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &text, socklen_t(text.count)) }
        let printed = printed(text)
        return (BindAddress(bytes: bytes), port, family == AF_INET ? "\(printed):\(port)" : "[\(printed)]:\(port)")
    }
}
