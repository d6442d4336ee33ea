import Glibc
@testable import Pipeline
import Testing

/// Sockets passed by socket activation for `[webrtc]`: checked against the configured address before adoption, and
/// a UDP port taken for the daemon alone (systemd's SO_REUSEADDR cleared; a socket already sharing it found).
struct InheritedSocketTests {
    /// A socket of `type` on 127.0.0.1 (a port the kernel picks, or `port`), with SO_REUSEADDR as systemd binds it;
    /// port -1 when it could not be bound.
    static func socket(_ type: __socket_type, port: Int = 0, listening: Bool = false) -> (descriptor: Int32, port: Int) {
        let descriptor = Glibc.socket(AF_INET, Int32(type.rawValue), 0)
        var one: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0 }
        }
        if listening { listen(descriptor, 8) }
        return (descriptor, bound ? Int(UInt16(bigEndian: address.sin_port)) : -1)
    }

    static func address(_ transport: ListenAddress.Transport, _ host: String, _ port: Int) -> ListenAddress {
        ListenAddress(transport: transport, host: host, port: port)
    }

    @Test func aListenerAndAUDPSocketOnTheConfiguredAddressesFit() throws {
        let http = Self.socket(SOCK_STREAM, listening: true)
        let media = Self.socket(SOCK_DGRAM)
        defer { close(http.descriptor); close(media.descriptor) }
        #expect(try InheritedSocket.check(http.descriptor, name: "whip-http", kind: .tcpListener, expected: Self.address(.tcp, "127.0.0.1", http.port), key: "listen")
                == "tcp 127.0.0.1:\(http.port)")
        // A name standing for the address fits too.
        #expect(try InheritedSocket.check(media.descriptor, name: "whip-media", kind: .udp, expected: Self.address(.udp, "localhost", media.port), key: "media")
                == "udp 127.0.0.1:\(media.port)")
    }

    @Test func aSocketOfAnotherKindOrAddressIsRefusedSayingWhatItIs() throws {
        let listener = Self.socket(SOCK_STREAM, listening: true)
        let unlistened = Self.socket(SOCK_STREAM)
        let datagram = Self.socket(SOCK_DGRAM)
        defer { for descriptor in [listener.descriptor, unlistened.descriptor, datagram.descriptor] { close(descriptor) } }
        let cases: [(Int32, InheritedSocket.Kind, ListenAddress, String)] = [
            (datagram.descriptor, .tcpListener, Self.address(.tcp, "127.0.0.1", datagram.port), "is a UDP socket bound to 127.0.0.1:\(datagram.port)"),
            (unlistened.descriptor, .tcpListener, Self.address(.tcp, "127.0.0.1", unlistened.port), "is a TCP socket that is not listening"),
            (listener.descriptor, .udp, Self.address(.udp, "127.0.0.1", listener.port), "is a listening TCP socket bound to 127.0.0.1:\(listener.port); [webrtc] media"),
            (listener.descriptor, .tcpListener, Self.address(.tcp, "127.0.0.1", listener.port + 1), "needs a listening TCP socket bound there (ListenStream="),
            // Plain HTTP approved for loopback must not be served on every address, nor the reverse.
            (listener.descriptor, .tcpListener, Self.address(.tcp, "0.0.0.0", listener.port), "bound to 127.0.0.1:\(listener.port); [webrtc] listen = \"0.0.0.0:"),
        ]
        for (descriptor, kind, expected, message) in cases {
            let error = #expect(throws: InheritedSocket.Mismatch.self) {
                _ = try InheritedSocket.check(descriptor, name: "x", kind: kind, expected: expected, key: kind == .udp ? "media" : "listen")
            }
            #expect(error?.description.contains(message) == true, "\(String(describing: error))")
        }
        let pipe = UnsafeMutablePointer<Int32>.allocate(capacity: 2)
        defer { pipe.deallocate() }
        Glibc.pipe(pipe)
        defer { close(pipe[0]); close(pipe[1]) }
        #expect(throws: InheritedSocket.Mismatch.self) {
            _ = try InheritedSocket.check(pipe[0], name: "x", kind: .udp, expected: Self.address(.udp, "127.0.0.1", 1), key: "media")
        }
    }

    /// What systemd's SO_REUSEADDR allowed: a second socket on the port, which Linux would give the datagrams.
    @Test func claimingAUDPPortClearsReuseAndFindsASocketAlreadySharingIt() throws {
        let media = Self.socket(SOCK_DGRAM)
        defer { close(media.descriptor) }
        #expect(try InheritedSocket.claimUDPPort(media.descriptor, name: "whip-media"), "/proc/net/udp shows the socket")
        var value: Int32 = 1
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(media.descriptor, SOL_SOCKET, SO_REUSEADDR, &value, &length)
        #expect(value == 0)
        // Now nobody binds beside it, even with SO_REUSEADDR.
        let late = Self.socket(SOCK_DGRAM, port: media.port)
        defer { close(late.descriptor) }
        #expect(late.port == -1)

        let shared = Self.socket(SOCK_DGRAM)
        let squatter = Self.socket(SOCK_DGRAM, port: shared.port)
        defer { close(shared.descriptor); close(squatter.descriptor) }
        #expect(squatter.port == shared.port, "SO_REUSEADDR on both lets a second socket bind the port")
        let error = #expect(throws: InheritedSocket.Mismatch.self) { _ = try InheritedSocket.claimUDPPort(shared.descriptor, name: "whip-media") }
        #expect(error?.description.contains("shares its UDP port with uid \(getuid())") == true, "\(String(describing: error))")
    }

    @Test func procNetUDPRowsAreReadAndSharersFound() {
        let text = """
              sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
             100: 0100007F:1FF5 00000000:0000 07 00000000:00000000 00:00000000 00000000   110        0 5001 2 0000000000000000 0
             101: 00000000:1FF5 00000000:0000 07 00000000:00000000 00:00000000 00000000  1001        0 5002 2 0000000000000000 0
             102: 0200007F:1FF5 00000000:0000 07 00000000:00000000 00:00000000 00000000  1002        0 5003 2 0000000000000000 0
             103: 0100007F:1FF6 00000000:0000 07 00000000:00000000 00:00000000 00000000  1003        0 5004 2 0000000000000000 0
             104: 0000000000000000FFFF00000100007F:1FF5 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000  1004 0 5005 2 0 0
             105: garbage
            """
        let entries = UDPPortSharers.parse(text)
        #expect(entries.count == 5)
        #expect(entries.first == UDPPortSharers.Entry(address: "0100007F", port: 8181, uid: 110, inode: 5001))
        // The same port on the wildcard and on the IPv4-mapped address share it; 127.0.0.2 and another port do not.
        #expect(UDPPortSharers.others(sharingWith: 5001, in: entries)?.map(\.inode) == [5002, 5005])
        #expect(UDPPortSharers.others(sharingWith: 5004, in: entries)?.isEmpty == true)
        #expect(UDPPortSharers.others(sharingWith: 9999, in: entries) == nil, "a socket the tables do not show: not checked")
    }
}
