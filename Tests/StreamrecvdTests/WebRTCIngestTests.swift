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
    static func daemon(_ label: String, settings: [String: String] = [:], metricsPort: Int? = nil) throws -> (DaemonProcess, whipPort: Int, mediaPort: Int) {
        let directory = try TestEnvironment.temporaryDirectory()
        let tokenPath = directory.appendingPathComponent("whip.token").path
        try (token + "\n").write(toFile: tokenPath, atomically: true, encoding: .utf8)
        chmod(tokenPath, 0o600)
        let (whipPort, mediaPort) = (freePort(), freePort())
        let daemon = try DaemonProcess(
            label: label, settings: ["token_file": "\"\(tokenPath)\"", "max_width": "1280", "max_height": "720", "slots": "200"].merging(settings) { $1 },
            daemonSettings: metricsPort.map { ["metrics": "\"127.0.0.1:\($0)\""] } ?? [:], transport: "whip",
            tables: "[webrtc]\nlisten = \"127.0.0.1:\(whipPort)\"\nmedia = \"127.0.0.1:\(mediaPort)\"")
        return (daemon, whipPort, mediaPort)
    }

    /// whip-client.py against the daemon; returns its last line and its log.
    static func runClient(url: String, token: String = token, record: String, frames: Int, extra: [String] = []) throws -> (result: String, log: String) {
        let script = TestEnvironment.repositoryRoot.appendingPathComponent("scripts/whip-client.py").path
        let result = try runProcess("/usr/bin/python3", [script, url, "--token", token, "--record", record, "--frames", String(frames)] + extra)
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

    @Test func aWebRTCBinClientIsBitExact() throws {
        let metricsPort = freePort()
        let (daemon, whipPort, _) = try Self.daemon("whipexact", metricsPort: metricsPort)
        let directory = daemon.directory
        let record = directory.appendingPathComponent("sent.h264").path
        let frames = 90
        let cat = try CatProcess(stream: daemon.name, frames: frames - 10, timeout: 30, directory: directory)
        let client = try Self.runClient(url: "http://127.0.0.1:\(whipPort)/whip/\(daemon.name)", record: record, frames: frames)
        #expect(client.result == "sent \(frames) frames", "\(client.log)\n\(daemon.log.suffix(3000))")
        let (status, errors) = cat.finish()
        #expect(status == 0, "cat exited \(status): \(errors)\n\(daemon.log.suffix(3000))")
        let reference = try ffmpegMD5s(record)
        let ours = try catMD5s(cat)
        let mismatch = Self.contiguousMatch(ours, in: reference)
        #expect(mismatch == nil, "\(mismatch ?? "")\n\(daemon.log.suffix(3000))")
        // The first frame published is the recording's first: nothing was lost at the start.
        #expect(ours.first == reference.first, "\(daemon.log.suffix(2000))")
        let log = daemon.log
        #expect(log.contains("connected for stream \(daemon.name)"), "\(log.suffix(2000))")
        #expect(log.contains("ended: the client ended the session (DELETE)"), "\(log.suffix(2000))")
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        #expect(body.contains("streamrecvd_webrtc_sessions_started_total 1"), "\(body)")
        #expect(body.contains("streamrecvd_webrtc_sessions_ended_total{reason=\"deleted\"} 1"), "\(body)")
        #expect(!log.contains(Self.token))
        #expect(daemon.isRunning)
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

/// One HTTP/1.1 request on a fresh connection; the status, the header block and the body.
func httpRequest(port: Int, method: String, path: String, headers: [String: String], body: String) throws -> (status: Int, headers: String, body: String) {
    let connection = try Sender(port: port)
    var request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: \(body.utf8.count)\r\n"
    for (name, value) in headers { request += "\(name): \(value)\r\n" }
    request += "\r\n" + body
    try connection.send(Array(request.utf8)[...])
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        var poll = pollfd(fd: connection.descriptor, events: Int16(POLLIN), revents: 0)
        guard Glibc.poll(&poll, 1, 5000) > 0 else { break }
        let count = recv(connection.descriptor, &buffer, buffer.count, 0)
        guard count > 0 else { break }
        response += buffer[0..<count]
    }
    let text = String(decoding: response, as: UTF8.self)
    let parts = text.components(separatedBy: "\r\n\r\n")
    let status = Int(parts.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
    return (status, parts.first ?? "", parts.dropFirst().joined(separator: "\r\n\r\n"))
}
