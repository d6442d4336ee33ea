import Bitstream
import Foundation
import Glibc
import MediaSecurity
import StreamrecvTestSupport
import Testing

/// Issue 33, item 5: `media` on a wildcard. Answers name the machine's interface addresses (no `announce`), every
/// reply leaves from the address its check came to (else ICE takes it for no reply), a libnice client on this
/// machine connects without being told an address, and a remote host (a network namespace) shares over HTTPS.
@Suite(.serialized) struct WebRTCWildcardMediaTests {
    /// The answer's ICE credentials and host candidates ("ADDRESS PORT").
    static func answer(_ sdp: String) -> (ufrag: String, password: String, candidates: [String]) {
        let lines = sdp.split(whereSeparator: \.isNewline).map(String.init)
        let value = { (prefix: String) in lines.first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) } ?? "" }
        let candidates = lines.filter { $0.hasPrefix("a=candidate:") }.map { line in
            let fields = line.split(separator: " ")
            return "\(fields[4]) \(fields[5])"
        }
        return (value("a=ice-ufrag:"), value("a=ice-pwd:"), candidates)
    }

    /// A UDP socket on 127.0.0.1 sending to `address`:`port` (IPv4), and the address the reply came from.
    static func exchange(_ datagram: [UInt8], on descriptor: Int32, to address: String, port: Int) -> (reply: [UInt8], from: String)? {
        var target = sockaddr_in()
        target.sin_family = sa_family_t(AF_INET)
        target.sin_port = in_port_t(port).bigEndian
        inet_pton(AF_INET, address, &target.sin_addr)
        let sent = withUnsafePointer(to: &target) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(descriptor, datagram, datagram.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard sent == datagram.count else { return nil }
        var buffer = [UInt8](repeating: 0, count: 1500)
        var source = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let count = withUnsafeMutablePointer(to: &source) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(descriptor, &buffer, buffer.count, 0, $0, &length) }
        }
        guard count > 0 else { return nil }
        var text = [CChar](repeating: 0, count: 64)
        inet_ntop(AF_INET, &source.sin_addr, &text, socklen_t(text.count))
        let host = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return (Array(buffer[0..<count]), "\(host):\(Int(in_port_t(bigEndian: source.sin_port)))")
    }

    /// A UDP socket on 127.0.0.1 (a free port) that waits 3 s at most for a reply; its port.
    static func loopbackClient() -> (descriptor: Int32, port: Int) {
        let client = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var timeout = timeval(tv_sec: 3, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var own = sockaddr_in()
        own.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, "127.0.0.1", &own.sin_addr)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &own) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(client, $0, length) == 0 ? getsockname(client, $0, &length) : -1 }
        }
        return (client, Int(in_port_t(bigEndian: own.sin_port)))
    }

    /// An ICE check of the session the answer `local` describes, as the client whose ufrag is `ufrag` sends it; its
    /// transaction ID is `transaction` twelve times.
    static func check(_ local: (ufrag: String, password: String, candidates: [String]), ufrag: String, transaction: UInt8,
                      nominating: Bool) -> [UInt8] {
        STUNMessage.bindingRequest(
            transactionID: Array(repeating: transaction, count: 12), username: "\(local.ufrag):\(ufrag)", priority: 1_000_000,
            role: .controlling(tiebreaker: 42), useCandidate: nominating, integrityKey: Array(local.password.utf8),
            hmacSHA1: HMACSHA1.authenticate(key:data:))
    }

    /// Checks of the session the answer opened (its ufrag `ufrag`), sent from one socket on 127.0.0.1 to each of
    /// `addresses`: where each reply came from ("nowhere" for none).
    static func probe(answer sdp: String, ufrag: String, mediaPort: Int, addresses: [String]) throws -> [String] {
        let local = answer(sdp)
        let (client, _) = Self.loopbackClient()
        defer { close(client) }
        return addresses.enumerated().map { index, address in
            let request = check(local, ufrag: ufrag, transaction: UInt8(index), nominating: false)
            return exchange(request, on: client, to: address, port: mediaPort)?.from ?? "nowhere"
        }
    }

    /// 127.0.0.2 and 127.0.0.3 are this machine's, but the kernel's own choice of source towards 127.0.0.1 is
    /// 127.0.0.1: a reply from there would be, to an ICE agent, no reply to its check of 127.0.0.2.
    @Test(arguments: ["0.0.0.0", "::"])
    func checksAreAnsweredFromTheAddressTheyReached(wildcard: String) throws {
        let network = try TestNetwork(hosts: 1) // an address beside loopback, on any machine
        let metricsPort = freePort()
        let (daemon, whipPort, mediaPort) = try WebRTCIngestTests.daemon("wild\(wildcard == "::" ? 6 : 4)", metricsPort: metricsPort, mediaHost: wildcard)
        #expect(daemon.log.contains("answers name the interfaces' addresses"), "\(daemon.log.suffix(2000))")
        let response = try httpRequest(port: whipPort, method: "POST", path: "/whip/\(daemon.name)",
                                       headers: ["Content-Type": "application/sdp", "Authorization": "Bearer \(WebRTCIngestTests.token)"],
                                       body: WebRTCHostileTests.offer(ufrag: "probe1234"))
        #expect(response.status == 201, "\(response.body)\n\(daemon.log.suffix(2000))")
        let local = Self.answer(response.body)
        // The interfaces' addresses, with the media port; loopback only where the machine has nothing else.
        #expect(local.candidates.contains("\(network.localAddress) \(mediaPort)"), "\(local.candidates)")
        #expect(!local.candidates.contains { $0.hasPrefix("127.") || $0.hasPrefix("::1 ") || $0.hasPrefix("0.0.0.0") }, "\(local.candidates)")
        // IPv4 only on 0.0.0.0; on :: every global IPv6 address of the machine too.
        let globalIPv6 = try runProcess("ip", ["-o", "-6", "addr", "show", "scope", "global", "up"]).text.split(separator: "\n").compactMap { line in
            line.split(separator: " ").firstIndex(of: "inet6").map { String(line.split(separator: " ")[$0 + 1].split(separator: "/")[0]) }
        }
        if wildcard == "::" {
            #expect(globalIPv6.prefix(8).allSatisfy { local.candidates.contains("\($0) \(mediaPort)") }, "\(globalIPv6) in \(local.candidates)")
        } else {
            #expect(!local.candidates.contains { $0.contains(":") }, "\(local.candidates)")
        }

        let (client, _) = Self.loopbackClient()
        defer { close(client) }
        for (index, address) in ["127.0.0.2", "127.0.0.3", network.localAddress, "127.0.0.1"].enumerated() {
            let request = Self.check(local, ufrag: "probe1234", transaction: UInt8(index), nominating: index == 1)
            let reply = Self.exchange(request, on: client, to: address, port: mediaPort)
            #expect(reply?.from == "\(address):\(mediaPort)", "a check of \(address) was answered from \(reply?.from ?? "nowhere")\n\(daemon.log.suffix(2000))")
            let message = reply.flatMap { try? STUNMessage.parse($0.reply) }
            #expect(message?.messageClass == .successResponse && message?.transactionID == request[8..<20].map { $0 })
        }
        #expect(daemon.isRunning)
        withExtendedLifetime(network) {}
    }

    /// The red team's attack: an eavesdropper replays one of the client's nominating checks, unchanged, to another
    /// of our addresses. It is answered (from there) but moves nothing: the DTLS handshake that follows on the
    /// nominated pair is answered from the nominated address, where the client's connected socket reads it.
    @Test func aReplayedCheckToAnotherAddressDoesNotMoveTheReplies() throws {
        let (daemon, whipPort, mediaPort) = try WebRTCIngestTests.daemon("wildreplay", mediaHost: "0.0.0.0")
        let response = try httpRequest(port: whipPort, method: "POST", path: "/whip/\(daemon.name)",
                                       headers: ["Content-Type": "application/sdp", "Authorization": "Bearer \(WebRTCIngestTests.token)"],
                                       body: WebRTCHostileTests.offer(ufrag: "replay123"))
        try #require(response.status == 201, "\(response.body)")
        let local = Self.answer(response.body)
        let (client, clientPort) = Self.loopbackClient()
        let nominating = Self.check(local, ufrag: "replay123", transaction: 7, nominating: true)
        #expect(Self.exchange(nominating, on: client, to: "127.0.0.2", port: mediaPort)?.from == "127.0.0.2:\(mediaPort)")
        // The replay: the same bytes from the same address, to 127.0.0.3.
        #expect(Self.exchange(nominating, on: client, to: "127.0.0.3", port: mediaPort)?.from == "127.0.0.3:\(mediaPort)")
        close(client)
        // The client's DTLS on the nominated pair, from the same address and port: OpenSSL's connected socket reads
        // only datagrams from 127.0.0.2 (the handshake then fails on our fake fingerprint, which does not matter).
        // SIGKILL: the test runner blocks SIGTERM, and its children inherit the mask.
        let handshake = try runProcess("timeout", ["-s", "KILL", "8", "openssl", "s_client", "-dtls1_2", "-bind", "127.0.0.1:\(clientPort)",
                                                   "-connect", "127.0.0.2:\(mediaPort)", "-timeout"], input: Data())
        let output = handshake.text + handshake.standardError
        let readBytes = output.split(separator: "\n").first { $0.contains("SSL handshake has read") } ?? "none"
        #expect(!readBytes.contains("has read 0 bytes") && readBytes != "none", "\(output.suffix(1500))\n\(daemon.log.suffix(2000))")
        #expect(daemon.isRunning)
    }

    /// libnice gathers no loopback candidate and pairs none with a loopback remote: with a wildcard `media` the
    /// daemon names the interfaces' addresses, and webrtcbin on this machine connects on its own.
    @Test func aWebRTCBinClientOnThisMachineConnectsWithoutNamingAnAddress() throws {
        let network = try TestNetwork(hosts: 1)
        let metricsPort = freePort()
        let (daemon, whipPort, _) = try WebRTCIngestTests.daemon("wildnice", metricsPort: metricsPort, mediaHost: "0.0.0.0")
        let record = daemon.directory.appendingPathComponent("sent.h264").path
        let frames = 60
        let cat = try CatProcess(stream: daemon.name, frames: frames - 10, timeout: 40, directory: daemon.directory)
        let client = try WebRTCIngestTests.runClient(url: "http://127.0.0.1:\(whipPort)/whip/\(daemon.name)", record: record, frames: frames,
                                                     extra: ["--local-address", ""])
        #expect(client.result == "sent \(frames) frames", "\(client.log.suffix(3000))\n\(daemon.log.suffix(3000))")
        try WebRTCIngestTests.expectBitExact(cat, against: record, daemon: daemon, fromFirst: false)
        let connected = daemon.log.split(separator: "\n").first { $0.contains("connected for stream") } ?? ""
        #expect(!connected.contains("127.0.0.1") && !connected.contains("::1"), "\(connected)")
        withExtendedLifetime(network) {}
    }

    /// Another host (a network namespace behind a veth pair) shares to the daemon over HTTPS, naming it by its
    /// address on that link; the daemon's media socket is a wildcard and nothing names the address for it.
    @Test func aRemoteHostSharesOverHTTPSToAWildcardMediaSocket() throws {
        let network = try TestNetwork(hosts: 1)
        let folder = try TestEnvironment.temporaryDirectory()
        let (certificate, key) = try TestCertificate.make(in: folder, commonName: "receiver",
                                                          alternativeNames: ["DNS:localhost", "IP:\(network.localAddress)"])
        let tokenPath = folder.appendingPathComponent("whip.token").path
        try (WebRTCIngestTests.token + "\n").write(toFile: tokenPath, atomically: true, encoding: .utf8)
        chmod(tokenPath, 0o600)
        let (whipPort, mediaPort, metricsPort) = (freePort(), freePort(), freePort())
        let daemon = try DaemonProcess(
            label: "wildremote", settings: ["token_file": "\"\(tokenPath)\"", "max_width": "1280", "max_height": "720", "slots": "200"],
            daemonSettings: ["metrics": "\"127.0.0.1:\(metricsPort)\""], transport: "whip",
            tables: "[webrtc]\nlisten = \"0.0.0.0:\(whipPort)\"\nmedia = \"0.0.0.0:\(mediaPort)\"\ncertificate = \"\(certificate)\"\nkey = \"\(key)\"")
        let record = folder.appendingPathComponent("sent.h264").path
        let frames = 60
        let cat = try CatProcess(stream: daemon.name, frames: frames - 10, timeout: 40, directory: daemon.directory)
        let script = TestEnvironment.repositoryRoot.appendingPathComponent("scripts/whip-client.py").path
        let result = try runProcess("/usr/sbin/ip", [
            "netns", "exec", network.name, "/usr/bin/env", "SSL_CERT_FILE=\(certificate)", "/usr/bin/python3", script,
            "https://\(network.localAddress):\(whipPort)/whip/\(daemon.name)", "--token", WebRTCIngestTests.token,
            "--record", record, "--frames", String(frames), "--local-address", "",
        ])
        let last = result.text.split(separator: "\n").last.map(String.init) ?? ""
        #expect(last == "sent \(frames) frames", "\(result.standardError.suffix(3000))\n\(daemon.log.suffix(3000))")
        try WebRTCIngestTests.expectBitExact(cat, against: record, daemon: daemon, fromFirst: false)
        let remote = network.hostAddresses[0]
        let connected = daemon.log.split(separator: "\n").first { $0.contains("connected for stream") } ?? ""
        #expect(connected.contains(remote), "\(connected)")
        // The session had a socket of its own, bound to the address the client reached.
        #expect(!daemon.log.contains("sessions share the media socket"), "\(daemon.log.suffix(2000))")
        try WebRTCIngestTests.expectEndedByDelete(daemon, metricsPort: metricsPort)
    }
}
