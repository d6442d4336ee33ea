import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

/// listen = "whip": a real WebRTC peer (GStreamer's webrtcbin, scripts/whip-client.py) posts its offer to the
/// daemon's WHIP endpoint, connects over ICE, DTLS and SRTP on loopback, and sends x264's H.264; every frame the
/// daemon publishes is bit-exact against FFmpeg's decode of the bytes the client sent. Wrong tokens, bad offers and
/// strangers' datagrams are refused and counted, and the daemon stays up.
@Suite(.serialized) struct WebRTCIngestTests {
    static let token = "whip-test-token-0123456789abcdef"

    /// A daemon with one whip stream on loopback; the token file is the daemon's alone.
    static func daemon(_ label: String, settings: [String: String] = [:], metricsPort: Int? = nil, namespace: String? = nil,
                       environment: [String: String] = [:], mediaHost: String = "127.0.0.1") throws -> (DaemonProcess, whipPort: Int, mediaPort: Int) {
        let directory = try TestEnvironment.temporaryDirectory()
        let tokenPath = directory.appendingPathComponent("whip.token").path
        try (token + "\n").write(toFile: tokenPath, atomically: true, encoding: .utf8)
        chmod(tokenPath, 0o600)
        let (whipPort, mediaPort) = (freePort(), freePort())
        let daemon = try DaemonProcess(
            label: label, settings: ["token_file": "\"\(tokenPath)\"", "max_width": "1280", "max_height": "720", "slots": "200"].merging(settings) { $1 },
            daemonSettings: metricsPort.map { ["metrics": "\"127.0.0.1:\($0)\""] } ?? [:], transport: "whip",
            tables: "[webrtc]\nlisten = \"127.0.0.1:\(whipPort)\"\nmedia = \"\(mediaHost.contains(":") ? "[\(mediaHost)]" : mediaHost):\(mediaPort)\"", start: false)
        try daemon.start(environment: environment, namespace: namespace)
        return (daemon, whipPort, mediaPort)
    }

    /// whip-client.py against the daemon; returns its last line and its log.
    static func runClient(url: String, token: String = token, record: String, frames: Int, extra: [String] = [],
                          namespace: String? = nil) throws -> (result: String, log: String) {
        let script = TestEnvironment.repositoryRoot.appendingPathComponent("scripts/whip-client.py").path
        let command = ["/usr/bin/python3", script, url, "--token", token, "--record", record, "--frames", String(frames)] + extra
        let result = try runProcess(namespace == nil ? command[0] : "/usr/sbin/ip",
                                    (namespace.map { ["netns", "exec", $0] + command } ?? command).dropFirst(namespace == nil ? 1 : 0).map { $0 })
        let last = result.text.split(separator: "\n").last.map(String.init) ?? ""
        return (last, result.standardError)
    }

    /// Our frames must be FFmpeg's frames of the recording, in order, from one of its frames on (a frame whose
    /// packets all arrived before the client's first is impossible: the recording starts when the connection does).
    static func contiguousMatch(_ ours: [String], in reference: [String]) -> String? {
        guard let first = ours.first, let start = reference.firstIndex(of: first) else {
            return "our first frame is none of FFmpeg's \(reference.count)"
        }
        let expected = Array(reference[start..<min(reference.count, start + ours.count)])
        return firstDifference(ours, expected).map { "from FFmpeg's frame \(start): \($0)" }
    }

    /// `cat` ended well and its frames are FFmpeg's of `reference` (a file), in order, from its first frame when
    /// `fromFirst` (nothing lost at the start). Returns FFmpeg's frames.
    @discardableResult
    static func expectBitExact(_ cat: CatProcess, against reference: String, daemon: DaemonProcess, fromFirst: Bool) throws -> [String] {
        let (status, errors) = cat.finish()
        #expect(status == 0, "cat exited \(status): \(errors)\n\(daemon.log.suffix(3000))")
        let expected = try ffmpegMD5s(reference)
        let ours = try catMD5s(cat)
        let mismatch = contiguousMatch(ours, in: expected)
        #expect(mismatch == nil, "\(mismatch ?? "")\n\(daemon.log.suffix(3000))")
        if fromFirst { #expect(ours.first == expected.first, "a late first frame\n\(daemon.log.suffix(2000))") }
        return expected
    }

    /// One session started and ended by the client's DELETE, in the log and the metrics; the token in no log line;
    /// the daemon still runs.
    static func expectEndedByDelete(_ daemon: DaemonProcess, metricsPort: Int) throws {
        let log = daemon.log
        #expect(log.contains("connected for stream \(daemon.name)"), "\(log.suffix(2000))")
        #expect(log.contains("ended: the client ended the session (DELETE)"), "\(log.suffix(2000))")
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        #expect(unlabelled(body, "streamrecvd_webrtc_sessions_started_total") == 1, "\(body)")
        #expect(body.contains("streamrecvd_webrtc_sessions_ended_total{reason=\"deleted\"} 1"), "\(body)")
        #expect(!log.contains(token))
        #expect(daemon.isRunning)
    }

    @Test func aWebRTCBinClientIsBitExact() throws {
        let metricsPort = freePort()
        let (daemon, whipPort, _) = try Self.daemon("whipexact", metricsPort: metricsPort)
        let directory = daemon.directory
        let record = directory.appendingPathComponent("sent.h264").path
        let frames = 90
        let cat = try CatProcess(stream: daemon.name, frames: frames - 10, timeout: 30, directory: directory)
        let client = try Self.runClient(url: "http://127.0.0.1:\(whipPort)/whip/\(daemon.name)", record: record, frames: frames)
        #expect(client.result == "sent \(frames) frames", "\(client.log)\n\(daemon.log.suffix(3000))")
        // The first frame published is the recording's first: nothing was lost at the start.
        try Self.expectBitExact(cat, against: record, daemon: daemon, fromFirst: true)
        try Self.expectEndedByDelete(daemon, metricsPort: metricsPort)
    }

    /// A wrong or missing token is 401 and counted; a garbage offer is 400; an offer with no H.264 is 415 with a
    /// reason; an unknown stream is 404; OPTIONS answers CORS; the daemon stays up and a good client still gets in.
    @Test func badRequestsAreRefusedAndCounted() throws {
        let metricsPort = freePort()
        let (daemon, whipPort, _) = try Self.daemon("whipbad", metricsPort: metricsPort)
        let path = "/whip/\(daemon.name)"
        let vp8Offer = """
            v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0\r\n\
            m=video 9 UDP/TLS/RTP/SAVPF 96\r\nc=IN IP4 0.0.0.0\r\na=mid:0\r\na=sendonly\r\na=rtcp-mux\r\n\
            a=ice-ufrag:abcd\r\na=ice-pwd:abcdefghijklmnopqrstuvwx\r\na=setup:actpass\r\n\
            a=fingerprint:sha-256 \((0..<32).map { _ in "AB" }.joined(separator: ":"))\r\na=rtpmap:96 VP8/90000\r\n
            """
        let cases: [(String, String, [String: String], String, Int)] = [
            ("no token", "POST", ["Content-Type": "application/sdp"], vp8Offer, 401),
            ("wrong token", "POST", ["Content-Type": "application/sdp", "Authorization": "Bearer not-the-token-000000"], vp8Offer, 401),
            ("garbage", "POST", ["Content-Type": "application/sdp", "Authorization": "Bearer \(Self.token)"], "hello\r\n", 400),
            ("no H.264", "POST", ["Content-Type": "application/sdp", "Authorization": "Bearer \(Self.token)"], vp8Offer, 415),
            ("not SDP", "POST", ["Content-Type": "text/plain", "Authorization": "Bearer \(Self.token)"], vp8Offer, 415),
            ("trickle", "PATCH", ["Authorization": "Bearer \(Self.token)"], "", 405),
            ("preflight", "OPTIONS", [:], "", 204),
        ]
        for (what, method, headers, body, expected) in cases {
            let target = method == "PATCH" ? path + "/nosuchsession" : path
            let response = try httpRequest(port: whipPort, method: method, path: target, headers: headers, body: body)
            #expect(response.status == expected, "\(what): \(response.status) \(response.body)")
            if what == "no H.264" { #expect(response.body.contains("VP8"), "\(response.body)") }
            if what == "preflight" { #expect(response.headers.lowercased().contains("access-control-allow-origin: *")) }
        }
        let unknown = try httpRequest(port: whipPort, method: "POST", path: "/whip/nosuchstream",
                                      headers: ["Content-Type": "application/sdp", "Authorization": "Bearer \(Self.token)"], body: vp8Offer)
        #expect(unknown.status == 404)
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        #expect(sample(body, "streamrecvd_webrtc_requests_refused_total", "reason=\"token\"") == 2, "\(body)")
        #expect(daemon.log.contains("missing or wrong bearer token"))
        #expect(!daemon.log.contains("not-the-token"))
        // A real client still gets in.
        let record = daemon.directory.appendingPathComponent("sent.h264").path
        let cat = try CatProcess(stream: daemon.name, frames: 20, timeout: 30, directory: daemon.directory)
        let client = try Self.runClient(url: "http://127.0.0.1:\(whipPort)\(path)", record: record, frames: 40)
        #expect(client.result == "sent 40 frames", "\(client.log)\n\(daemon.log.suffix(3000))")
        #expect(cat.finish().status == 0, "\(daemon.log.suffix(3000))")
        #expect(daemon.isRunning)
    }
}

extension WebRTCIngestTests {
    /// whip-client.py in the background.
    static func startClient(url: String, record: String, frames: Int, extra: [String] = [], log: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [TestEnvironment.repositoryRoot.appendingPathComponent("scripts/whip-client.py").path, url,
                             "--token", token, "--record", record, "--frames", String(frames)] + extra
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        return process
    }

    /// While a session streams, strangers send the media port STUN with unknown usernames, STUN in a session's
    /// name without its password, DTLS records, forged SRTP (RTP headers, random payload and tag) and RTCP: all
    /// dropped and counted; the session's frames stay bit-exact.
    @Test func strangersDatagramsChangeNothing() throws {
        let metricsPort = freePort()
        let (daemon, whipPort, mediaPort) = try Self.daemon("whipflood", metricsPort: metricsPort)
        let record = daemon.directory.appendingPathComponent("sent.h264").path
        let cat = try CatProcess(stream: daemon.name, frames: 100, timeout: 30, directory: daemon.directory)
        let client = try Self.startClient(url: "http://127.0.0.1:\(whipPort)/whip/\(daemon.name)", record: record, frames: 120,
                                          log: daemon.directory.appendingPathComponent("client.log").path)
        let deadline = Date().addingTimeInterval(20)
        while (daemon.status?.counters.framesPublished ?? 0) < 10 && Date() < deadline { usleep(20_000) }
        let flood = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(flood) }
        var target = sockaddr_in()
        target.sin_family = sa_family_t(AF_INET)
        target.sin_addr.s_addr = inet_addr("127.0.0.1")
        target.sin_port = in_port_t(UInt16(mediaPort).bigEndian)
        var generator = SystemRandomNumberGenerator()
        for index in 0..<3000 {
            var datagram: [UInt8]
            switch index % 5 {
            case 0: // a STUN binding request with a username no session has
                datagram = [0, 1, 0, 12, 0x21, 0x12, 0xa4, 0x42] + (0..<12).map { _ in UInt8.random(in: 0...255, using: &generator) }
                    + [0, 6, 0, 8] + Array("nobody:x".utf8)
            case 1: datagram = [22, 254, 253] + (0..<60).map { _ in UInt8.random(in: 0...255, using: &generator) }  // DTLS
            case 2: datagram = [0x80, 96] + (0..<200).map { _ in UInt8.random(in: 0...255, using: &generator) }  // SRTP
            case 3: datagram = [0x80, 200] + (0..<40).map { _ in UInt8.random(in: 0...255, using: &generator) }  // SRTCP
            default: datagram = (0..<Int.random(in: 0...300, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            }
            _ = withUnsafePointer(to: &target) { address in
                address.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(flood, datagram, datagram.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            if index % 100 == 0 { usleep(2000) }
        }
        client.waitUntilExit()
        #expect(client.terminationStatus == 0, "\((try? String(contentsOfFile: daemon.directory.appendingPathComponent("client.log").path, encoding: .utf8)) ?? "")")
        try Self.expectBitExact(cat, against: record, daemon: daemon, fromFirst: false)
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        // 600 unknown-username checks, 600 DTLS records from an address with no session, and the random bytes
        // that are none of STUN, DTLS or RTP; 1200 SRTP/SRTCP that fail authentication (or have no session).
        #expect((unlabelled(body, "streamrecvd_webrtc_stun_rejected_total") ?? 0) >= 1200, "\(body)")
        #expect((unlabelled(body, "streamrecvd_webrtc_srtp_rejected_total") ?? 0) >= 1200, "\(body)")
        #expect(daemon.isRunning)
    }

    /// A client that vanishes mid-stream (killed: no DELETE, no DTLS close): the next client is let in once the
    /// vanished one has delivered no video for a moment (second_sender = refuse lets a stale sender be taken over),
    /// and its frames are bit-exact; a client that posts while a session delivers video is refused (409).
    /// The daemon's STATUS= line says whether a whip stream waits for a client (and where it posts), and why the
    /// last session ended; a session's frames show as streaming.
    @Test func theStatusLineSaysWhetherAClientIsThere() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let notify = try NotifyListener(directory: directory)
        let (daemon, whipPort, _) = try Self.daemon("whipstatus", environment: ["NOTIFY_SOCKET": notify.path])
        let url = "http://127.0.0.1:\(whipPort)/whip/\(daemon.name)"
        let waiting = notify.receive(until: { $0.contains("STATUS=") && $0.contains("waiting for a WHIP client at \(url)") }).joined(separator: "\n")
        // The stream's own state word is "starting" or "waiting" by then (seen both, under load); the source says why.
        #expect(["starting", "waiting"].contains { waiting.contains("\(daemon.name): \($0) (WebRTC: waiting for a WHIP client at \(url))") },
                "\(waiting)")
        let client = try Self.runClient(url: url, record: daemon.directory.appendingPathComponent("sent.h264").path, frames: 60)
        #expect(client.result == "sent 60 frames", "\(client.log)")
        let ended = notify.receive(until: { $0.contains("STATUS=") && $0.contains("the last session ended: deleted") }).joined(separator: "\n")
        #expect(ended.contains("\(daemon.name): streaming 640x360"), "\(ended)")
        #expect(ended.contains("\(daemon.name): waiting (WebRTC: waiting for a WHIP client (the last session ended: deleted))"), "\(ended)")
        #expect(daemon.isRunning)
    }

    @Test func aVanishedClientIsTakenOverAndALiveOneIsNot() throws {
        let (daemon, whipPort, _) = try Self.daemon("whipvanish")
        let url = "http://127.0.0.1:\(whipPort)/whip/\(daemon.name)"
        let first = try Self.startClient(url: url, record: daemon.directory.appendingPathComponent("first.h264").path, frames: 600,
                                         log: daemon.directory.appendingPathComponent("first.log").path)
        let deadline = Date().addingTimeInterval(20)
        while (daemon.status?.counters.framesPublished ?? 0) < 15 && Date() < deadline { usleep(20_000) }
        // While it delivers video, a second client is refused.
        let refused = try Self.runClient(url: url, record: daemon.directory.appendingPathComponent("refused.h264").path, frames: 10,
                                         extra: ["--timeout", "10"])
        #expect(refused.result.contains("HTTP 409"), "\(refused.result) \(refused.log)")
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        let record = daemon.directory.appendingPathComponent("second.h264").path
        let cat = try CatProcess(stream: daemon.name, frames: 40, timeout: 30, directory: daemon.directory)
        // Posted at once: refused while the vanished one is not yet stale, then let in (the client retries).
        var second = try Self.runClient(url: url, record: record, frames: 60)
        let retryUntil = Date().addingTimeInterval(15)
        while second.result.contains("HTTP 409") && Date() < retryUntil {
            usleep(500_000)
            second = try Self.runClient(url: url, record: record, frames: 60)
        }
        #expect(second.result == "sent 60 frames", "\(second.result) \(second.log)\n\(daemon.log.suffix(3000))")
        #expect(cat.finish().status == 0, "\(daemon.log.suffix(3000))")
        // The vanished session's last frames (held for reordering until it ended) may come first: each must be
        // one the first client sent; then the second client's, in order.
        let reference = try ffmpegMD5s(record)
        let ours = try catMD5s(cat)
        let start = ours.firstIndex { reference.contains($0) } ?? ours.count
        let firstClient = Set(try ffmpegMD5s(daemon.directory.appendingPathComponent("first.h264").path))
        #expect(ours[..<start].allSatisfy(firstClient.contains), "a frame from neither client")
        let mismatch = Self.contiguousMatch(Array(ours[start...]), in: reference)
        #expect(start < ours.count && mismatch == nil, "\(mismatch ?? "none of the second client's frames")")
        #expect(daemon.log.contains("ended: a new session takes over"), "\(daemon.log.suffix(3000))")
        #expect(daemon.isRunning)
    }
}

/// Loss: the client's media goes through a relay that drops 2 % of datagrams each way and delays the rest by
/// 10 ms (scripts/lossy-udp-relay.py: this machine's kernel has no netem). The daemon asks for what is missing
/// (NACK), webrtcbin resends it over RTX, and every frame is still bit-exact.
@Suite(.serialized) struct WebRTCLossTests {
    @Test func nackRepairsLossBitExactly() throws {
        let metricsPort = freePort()
        let (daemon, whipPort, mediaPort) = try WebRTCIngestTests.daemon("whiploss", metricsPort: metricsPort)
        let relayPort = freePort()
        let relay = Process()
        relay.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        relay.arguments = [TestEnvironment.repositoryRoot.appendingPathComponent("scripts/lossy-udp-relay.py").path,
                           "--listen", "127.0.0.1:\(relayPort)", "--to", "127.0.0.1:\(mediaPort)", "--loss", "0.02", "--delay-ms", "10"]
        let relayOutput = Pipe()
        relay.standardOutput = relayOutput
        try relay.run()
        defer { if relay.isRunning { relay.terminate() } }
        _ = relayOutput.fileHandleForReading.availableData  // "ready"
        let record = daemon.directory.appendingPathComponent("sent.h264").path
        let cat = try CatProcess(stream: daemon.name, frames: 120, timeout: 40, directory: daemon.directory)
        let client = try WebRTCIngestTests.runClient(url: "http://127.0.0.1:\(whipPort)/whip/\(daemon.name)", record: record, frames: 150,
                                                     extra: ["--timeout", "60", "--media-via", String(relayPort)])
        #expect(client.result == "sent 150 frames", "\(client.log)\n\(daemon.log.suffix(3000))")
        let (status, errors) = cat.finish()
        #expect(status == 0, "cat: \(errors)\n\(daemon.log.suffix(3000))")
        relay.terminate()
        relay.waitUntilExit()
        let counts = String(decoding: relayOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let dropped = counts.split(separator: " ").last.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 0
        #expect(dropped >= 5, "the relay dropped too little to test anything: \(counts)")
        let mismatch = WebRTCIngestTests.contiguousMatch(try catMD5s(cat), in: try ffmpegMD5s(record))
        #expect(mismatch == nil, "\(mismatch ?? "") (relay: \(counts))\n\(daemon.log.suffix(3000))")
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        #expect((unlabelled(body, "streamrecvd_webrtc_nacks_sent_total") ?? 0) > 0, "\(body)")
        #expect((unlabelled(body, "streamrecvd_webrtc_retransmissions_recovered_total") ?? 0) > 0, "\(body)")
        #expect(daemon.isRunning)
    }
}

/// The value of an unlabelled sample `name` in a Prometheus text exposition.
func unlabelled(_ exposition: String, _ name: String) -> Double? {
    exposition.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.dropFirst(name.count + 1)) }
}

/// One HTTP/1.1 request on a fresh connection; the status, the header block and the body.
func httpRequest(port: Int, method: String, path: String, headers: [String: String], body: String) throws -> (status: Int, headers: String, body: String) {
    var request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: \(body.utf8.count)\r\n"
    for (name, value) in headers { request += "\(name): \(value)\r\n" }
    let text = String(decoding: try httpExchange(port: port, request + "\r\n" + body, waitMilliseconds: 5000), as: UTF8.self)
    let parts = text.components(separatedBy: "\r\n\r\n")
    let status = Int(parts.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
    return (status, parts.first ?? "", parts.dropFirst().joined(separator: "\r\n\r\n"))
}

/// Sends `request` on a fresh connection and returns every byte answered until the daemon closes it (or is
/// silent for `waitMilliseconds`).
func httpExchange(port: Int, _ request: String, waitMilliseconds: Int32) throws -> [UInt8] {
    let connection = try Sender(port: port)
    try connection.send(Array(request.utf8)[...])
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        var poll = pollfd(fd: connection.descriptor, events: Int16(POLLIN), revents: 0)
        guard Glibc.poll(&poll, 1, waitMilliseconds) > 0 else { break }
        let count = recv(connection.descriptor, &buffer, buffer.count, 0)
        guard count > 0 else { break }
        response += buffer[0..<count]
    }
    return response
}
