import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

/// The share page on the WHIP port: the page and the stream list are public and self-contained; a stream's live
/// picture needs its token, says there is none before a sender, and afterwards is a PNG of the frame the daemon
/// decoded (FFmpeg decodes it, at the size the sender sent), encoded once and served again while the frame stays.
@Suite(.serialized) struct SharePageTests {
    @Test func thePageAndTheStreamListNeedNoTokenAndNothingFromElsewhere() throws {
        let (daemon, whipPort, _) = try WebRTCIngestTests.daemon("sharepage")
        for path in ["/", "/share", "/?from=bookmark"] {
            let page = try shareRequest(port: whipPort, path: path)
            #expect(page.status == 200, "\(path): \(page.status) \(page.text)")
            #expect(page.header("Content-Type") == "text/html; charset=utf-8")
            #expect(page.header("Content-Security-Policy")?.hasPrefix(
                "default-src 'self'; script-src 'unsafe-inline' 'self'; style-src 'unsafe-inline'; img-src 'self' blob:") == true)
            #expect(page.header("X-Content-Type-Options") == "nosniff")
            let html = page.text
            #expect(html.contains("<script>") && html.contains("fetch('/streams.json'"), "\(html.prefix(500))")
            for needed in ["getDisplayMedia", "getUserMedia", "setCodecPreferences", "video/h264", "'application/sdp'",
                           "method: 'DELETE'", "/frame.png", "sessionStorage", "X-Frame-"] {
                #expect(html.contains(needed), "the page lacks \(needed)")
            }
            // Nothing from elsewhere: no absolute URL, no protocol-relative one, no external script or style.
            #expect(!html.contains("http://") && !html.contains("https://"))
            #expect(!html.contains("\"//") && !html.contains("'//") && !html.contains("<link") && !html.contains("<script src"))
        }
        let head = try shareRequest(port: whipPort, method: "HEAD", path: "/")
        #expect(head.status == 200 && head.body.isEmpty && Int(head.header("Content-Length") ?? "") ?? 0 > 1000)

        let list = try shareRequest(port: whipPort, path: "/streams.json")
        #expect(list.status == 200 && list.header("Content-Type") == "application/json")
        // Each stream: its name, its WHIP path, and what the page asks the browser's encoder for (no max_bitrate: 20 Mbit/s).
        let streams = try JSONSerialization.jsonObject(with: Data(list.body)) as? [[String: Any]]
        #expect(streams?.count == 1 && streams?[0]["name"] as? String == daemon.name, "\(list.text)")
        #expect(streams?[0]["whip"] as? String == "/whip/\(daemon.name)" && streams?[0]["maxBitrate"] as? Int == 20_000_000, "\(list.text)")

        // Other GETs are not ours: unknown paths stay 404, and a WHIP resource still answers as WHIP does.
        #expect(try shareRequest(port: whipPort, path: "/index.html").status == 404)
        #expect(try shareRequest(port: whipPort, path: "/whip/\(daemon.name)/frame.gif").status != 200)
        let whip = try shareRequest(port: whipPort, path: "/whip/\(daemon.name)", headers: ["Authorization": "Bearer \(WebRTCIngestTests.token)"])
        #expect(whip.status == 405, "\(whip.status) \(whip.text)")
        #expect(daemon.isRunning)
    }

    @Test func theLivePictureNeedsTheTokenAndIsTheFrameTheDaemonDecoded() throws {
        let metricsPort = freePort()
        let (daemon, whipPort, _) = try WebRTCIngestTests.daemon("shareframe", metricsPort: metricsPort)
        let path = "/whip/\(daemon.name)/frame.png"
        let token = ["Authorization": "Bearer \(WebRTCIngestTests.token)"]

        let anonymous = try shareRequest(port: whipPort, path: path)
        #expect(anonymous.status == 401 && anonymous.header("WWW-Authenticate") != nil, "\(anonymous.status) \(anonymous.text)")
        #expect(try shareRequest(port: whipPort, path: path, headers: ["Authorization": "Bearer not-the-token-000000"]).status == 401)
        #expect(try shareRequest(port: whipPort, path: "/whip/nosuchstream/frame.png", headers: token).status == 404)
        let early = try shareRequest(port: whipPort, path: path, headers: token)
        #expect(early.status == 404 && early.text.contains("no decoded frame yet"), "\(early.status) \(early.text)")

        let record = daemon.directory.appendingPathComponent("sent.h264").path
        let client = try WebRTCIngestTests.runClient(url: "http://127.0.0.1:\(whipPort)/whip/\(daemon.name)", record: record,
                                                     frames: 30, extra: ["--size", "320x240"])
        #expect(client.result == "sent 30 frames", "\(client.log)\n\(daemon.log.suffix(3000))")

        let frame = try shareRequest(port: whipPort, path: path + "?t=1", headers: token)
        #expect(frame.status == 200, "\(frame.status) \(frame.text.prefix(300))\n\(daemon.log.suffix(2000))")
        #expect(frame.header("Content-Type") == "image/png")
        #expect(frame.header("X-Frame-Width") == "320" && frame.header("X-Frame-Height") == "240")
        #expect(UInt64(frame.header("X-Frame-Sequence") ?? "") ?? 0 > 0)
        #expect(frame.header("X-Frame-Flags").map { !$0.isEmpty } == true)
        #expect(Int(frame.header("X-Frame-Age-Ms") ?? "") != nil)
        let file = daemon.directory.appendingPathComponent("frame.png")
        try Data(frame.body).write(to: file)
        let probe = try runChecked("ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0", file.path])
        #expect(probe.text.trimmingCharacters(in: .whitespacesAndNewlines) == "png,320,240", "\(probe.text)")
        // Decodable through to the last pixel, not only a valid header.
        #expect(try runProcess("ffmpeg", ["-v", "error", "-xerror", "-i", file.path, "-f", "null", "-"]).status == 0)

        // The sender is gone, the frame stays: the same bytes again, from the cache, to many at once.
        let answers = ConcurrentAnswers()
        DispatchQueue.concurrentPerform(iterations: 8) { index in
            let again = try? shareRequest(port: whipPort, path: path + "?t=\(index + 2)", headers: token)
            answers.add(again?.status == 200 && again?.body == frame.body && again?.header("X-Frame-Sequence") == frame.header("X-Frame-Sequence"))
        }
        #expect(answers.all == Array(repeating: true, count: 8))

        let metrics = try httpGet(port: metricsPort, path: "/metrics").body
        #expect(sample(metrics, "streamrecvd_webrtc_requests_refused_total", "reason=\"token\"") == 2, "\(metrics)")
        #expect(!daemon.log.contains(WebRTCIngestTests.token) && !daemon.log.contains("not-the-token"))
        #expect(daemon.isRunning)
    }
}

/// Results gathered from concurrent requests.
private final class ConcurrentAnswers: @unchecked Sendable {
    private let lock = NSLock()
    private var answers: [Bool] = []
    func add(_ answer: Bool) { lock.withLock { answers.append(answer) } }
    var all: [Bool] { lock.withLock { answers } }
}

/// An HTTP answer with its body as bytes (a PNG is not text).
struct ShareResponse {
    var status: Int
    var headers: [(name: String, value: String)]
    var body: [UInt8]
    var text: String { String(decoding: body, as: UTF8.self) }

    func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name.lowercased() }?.value }
}

/// One HTTP/1.1 request on a fresh connection, read until the daemon closes it.
func shareRequest(port: Int, method: String = "GET", path: String, headers: [String: String] = [:]) throws -> ShareResponse {
    var request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    for (name, value) in headers { request += "\(name): \(value)\r\n" }
    let response = try httpExchange(port: port, request + "\r\n", waitMilliseconds: 10_000)
    let separator: [UInt8] = Array("\r\n\r\n".utf8)
    guard let end = (0..<max(0, response.count - 3)).first(where: { Array(response[$0..<$0 + 4]) == separator }) else {
        return ShareResponse(status: 0, headers: [], body: response)
    }
    let lines = String(decoding: response[..<end], as: UTF8.self).components(separatedBy: "\r\n")
    let status = lines.first.flatMap { $0.split(separator: " ").dropFirst().first.flatMap { Int($0) } } ?? 0
    let fields = lines.dropFirst().compactMap { line -> (name: String, value: String)? in
        guard let colon = line.firstIndex(of: ":") else { return nil }
        return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
    }
    return ShareResponse(status: status, headers: fields, body: Array(response[(end + 4)...]))
}
