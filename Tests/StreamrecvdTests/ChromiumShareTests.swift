import FrameFormats
import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// A real browser through the daemon's own share page: Debian's headless Chromium, driven by
/// scripts/chromium-share.py, plays a clip made here as its fake camera, is given the stream and the token and
/// clicked "Share camera", and sends WHIP with its own ICE, DTLS, SRTP and H.264 encoder. The daemon's frames are
/// the clip's pictures at the clip's size, unflagged, each close to one of the clip's frames (PSNR: the browser
/// encodes lossily and loops the clip from wherever it likes); the page shows the daemon's live picture; Stop
/// ends the session by DELETE.
@Suite(.serialized, .enabled(if: chromiumBinary != nil, "needs Debian's chromium (apt-get install chromium)"))
struct ChromiumShareTests {
    static let width = 640
    static let height = 360
    static let fps = 30

    /// A frame as read from the ring: its size and flags, when it was published, and its pixels.
    struct ReceivedFrame {
        var layout: FrameLayout
        var flags: FrameFlags
        var published: UInt64
        var pixels: [UInt8]
    }

    @Test func aCameraSharedFromThePageArrivesAsTheClip() throws {
        // [webrtc] on loopback with HTTPS (a test certificate that Chromium is told to trust, as a person's browser
        // trusts a CA's): the page is a secure context, as it must be on any address but localhost. The script lets
        // Chromium pair loopback candidates.
        let (daemon, whipPort, folder) = try WHIPOverHTTPSTests.daemon("chromium")
        let trusted = try TestCertificate.publicKeySHA256Base64(certificate: folder.appendingPathComponent("server.pem").path)
        let directory = daemon.directory
        let clip = directory.appendingPathComponent("camera.y4m").path
        try runChecked("ffmpeg", ["-v", "error", "-f", "lavfi", "-i", "testsrc2=size=\(Self.width)x\(Self.height):rate=\(Self.fps)",
                                  "-frames:v", "150", "-pix_fmt", "yuv420p", clip])
        let tokenPath = directory.appendingPathComponent("token").path
        try (WebRTCIngestTests.token + "\n").write(toFile: tokenPath, atomically: true, encoding: .utf8)
        chmod(tokenPath, 0o600)
        let screenshot = directory.appendingPathComponent("share-page.png").path
        let proceed = directory.appendingPathComponent("proceed").path
        let profile = directory.appendingPathComponent("chromium-profile")
        try FileManager.default.createDirectory(at: profile, withIntermediateDirectories: true)
        let reader = try FrameRingReader(shmName: daemon.shmName)

        let browser = try Self.startBrowser(url: "https://localhost:\(whipPort)/", stream: daemon.name, token: tokenPath, clip: clip,
                                            screenshot: screenshot, proceed: proceed, profile: profile.path, directory: directory,
                                            trusting: trusted)
        defer { if browser.isRunning { browser.terminate() } }
        // 5 s of video (≥ 60 frames, as asked, and room for the 30 full-size ones below when a loaded machine makes
        // Chromium scale down for a while); the browser keeps sending while the page is checked.
        let frames = Self.collectFrames(150, from: reader, while: browser, timeout: 60)
        _ = FileManager.default.createFile(atPath: proceed, contents: nil)
        let finished = Self.waitForExit(browser, timeout: 60)
        let output = (try? String(contentsOfFile: directory.appendingPathComponent("browser.out").path, encoding: .utf8)) ?? ""
        let browserLog = ((try? String(contentsOfFile: directory.appendingPathComponent("browser.log").path, encoding: .utf8)) ?? "")
            .split(separator: "\n").filter { !$0.contains("dbus") }.suffix(40).joined(separator: "\n")
        let context = "browser: \(output)\n\(browserLog)\ndaemon: \(daemon.log.suffix(3000))"
        #expect(finished && browser.terminationStatus == 0, "\(context)")
        try #require(frames.count >= 60, "\(frames.count) frames\n\(context)")

        // The page: the daemon's picture shown, a screenshot taken, the session stopped by DELETE.
        let lastLine = output.split(separator: "\n").last.map(String.init) ?? ""
        let result = try #require(try? JSONSerialization.jsonObject(with: Data(lastLine.utf8)) as? [String: Any], "\(context)")
        let picture = result["picture"] as? [Int] ?? []
        #expect(picture.count == 2 && picture[0] > 0 && picture[1] > 0, "the live picture: \(picture)")
        #expect(result["stopped"] as? String == "Stopped.", "\(result)")
        let shot = (try? Data(contentsOf: URL(fileURLWithPath: screenshot))) ?? Data()
        #expect(shot.starts(with: [0x89, 0x50, 0x4E, 0x47]) && shot.count > 20_000, "screenshot: \(shot.count) bytes")
        let requests = result["requests"] as? [[String: Any]] ?? []
        let post = requests.first { $0["method"] as? String == "POST" }
        #expect(post?["status"] as? Int == 201, "\(requests)")
        #expect(requests.contains { $0["method"] as? String == "DELETE" && $0["status"] as? Int == 200 }, "\(requests)")
        let deadline = Date().addingTimeInterval(5)
        while !daemon.log.contains("ended: the client ended the session (DELETE)") && Date() < deadline { usleep(50_000) }
        #expect(daemon.log.contains("WebRTC session") && daemon.log.contains("ended: the client ended the session (DELETE)"),
                "\(daemon.log.suffix(3000))")
        #expect(!daemon.log.contains(WebRTCIngestTests.token))

        // The frames: unflagged, at the clip's size (Chromium may scale a camera down under CPU load or a low
        // bandwidth estimate: any smaller frame must keep the aspect ratio, and 30 must be full size for the
        // comparison below; in a full parallel run Chromium once sent 56 of 90 at 480x270, "sendLimit: bandwidth").
        // Seen in about one session in 17 with a 64-packet reorder window: a packet of Chromium's first keyframes
        // was given up on before its retransmission came (the burst outran the NACK's round trip), and the frames
        // up to the next keyframe came flagged corrupt (correctly: none is published unflagged). The window is 256
        // now; not yet shown to be gone, so still tolerated. Allowed only as a leading run that a keyframe ends, within the first second;
        // every frame after it must be clean.
        let lastCorrupt = frames.lastIndex { $0.flags.contains(.corrupt) }
        let healedAt = lastCorrupt.flatMap { last in frames.indices.first { $0 > last && frames[$0].flags.contains(.keyframe) } }
        if let lastCorrupt { print("*** chromium share: frames up to \(lastCorrupt) flagged corrupt; a keyframe healed the stream at \(healedAt.map(String.init) ?? "none")") }
        #expect(lastCorrupt.map { $0 < 30 && healedAt != nil } ?? true, "flags: \(frames.map(\.flags.rawValue))\n\(daemon.log.suffix(4000))")
        let full = frames.filter { $0.layout.width == Self.width && $0.layout.height == Self.height && !$0.flags.contains(.corrupt) }
        let sizes = Dictionary(grouping: frames) { "\($0.layout.width)x\($0.layout.height)" }.mapValues(\.count)
        try #require(full.count >= 30, "sizes: \(sizes)")
        #expect(frames.allSatisfy { $0.layout.width <= Self.width && abs($0.layout.width * Self.height - $0.layout.height * Self.width) <= 2 * Self.width },
                "sizes: \(sizes)")
        #expect(frames.allSatisfy { $0.layout.format == .nv12 || $0.layout.format == .yuv420p }, "\(frames.first?.layout.format as Any)")

        // The pictures: 30 full-size frames, spread over what arrived, each within 30 dB PSNR of one of the clip's.
        let sampled = stride(from: 0, to: full.count, by: max(1, full.count / 30)).prefix(30).map { full[$0] }
        let received = directory.appendingPathComponent("received.y4m").path
        try Self.writeY4M(sampled, to: received)
        let script = TestEnvironment.repositoryRoot.appendingPathComponent("scripts/psnr-best-match.py").path
        let comparison = try runChecked("/usr/bin/python3", [script, clip, received])
        let scores = try #require(try JSONSerialization.jsonObject(with: comparison.standardOutput) as? [[String: Any]])
        let lumaPSNR = scores.compactMap { $0["psnr_y"] as? Double }
        let wholePSNR = scores.compactMap { $0["psnr"] as? Double }
        #expect(scores.count == 30 && lumaPSNR.count == 30 && wholePSNR.count == 30, "\(comparison.text)")
        #expect(lumaPSNR.allSatisfy { $0 >= 30 } && wholePSNR.allSatisfy { $0 >= 30 }, "\(comparison.text)")

        // For the documentation, not asserted: how long from the page's POST to the first frame in the ring.
        let sent = (post?["sent_ns"] as? Int).map(UInt64.init) ?? 0
        let answered = (post?["answered_ns"] as? Int).map(UInt64.init) ?? 0
        let first = frames[0].published
        let milliseconds = { (from: UInt64) in from == 0 ? "?" : String(format: "%.0f", Double(Int64(bitPattern: first &- from)) / 1e6) }
        print("""
            ChromiumShareTests: \(frames.count) frames read, sizes \(sizes), flags \(Set(frames.map(\.flags.rawValue)).sorted()); \
            PSNR of \(scores.count) sampled frames against their best clip frame: luma min \(lumaPSNR.min() ?? 0) \
            median \(lumaPSNR.sorted()[lumaPSNR.count / 2]) max \(lumaPSNR.max() ?? 0) dB, all planes min \(wholePSNR.min() ?? 0) dB; \
            POST → first frame published \(milliseconds(sent)) ms (201 answered → first frame \(milliseconds(answered)) ms); \
            the page showed \(result["page"] ?? "?")
            """)
        #expect(daemon.isRunning)
    }
}

extension ChromiumShareTests {
    static func startBrowser(url: String, stream: String, token: String, clip: String, screenshot: String, proceed: String,
                             profile: String, directory: URL, trusting publicKey: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [TestEnvironment.repositoryRoot.appendingPathComponent("scripts/chromium-share.py").path, url,
                             "--stream", stream, "--token-file", token, "--clip", clip, "--screenshot", screenshot,
                             "--proceed-file", proceed, "--profile", profile, "--chromium", chromiumBinary ?? "/usr/bin/chromium",
                             "--trust-spki", publicKey]
        for name in ["browser.out", "browser.log"] {
            _ = FileManager.default.createFile(atPath: directory.appendingPathComponent(name).path, contents: nil)
        }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: directory.appendingPathComponent("browser.out"))
        process.standardError = try FileHandle(forWritingTo: directory.appendingPathComponent("browser.log"))
        try process.run()
        return process
    }

    /// Up to `count` frames from the ring as they are published, while the browser runs, for at most `timeout` s.
    static func collectFrames(_ count: Int, from reader: FrameRingReader, while browser: Process, timeout: TimeInterval) -> [ReceivedFrame] {
        var frames: [ReceivedFrame] = []
        var pixels: [UInt8] = []
        var previous: UInt64 = 0
        let deadline = Date().addingTimeInterval(timeout)
        while frames.count < count && browser.isRunning && Date() < deadline {
            guard case .frame(let info) = reader.next(after: previous, into: &pixels, timeoutNanoseconds: 250_000_000) else { continue }
            frames.append(ReceivedFrame(layout: info.layout, flags: info.flags, published: info.timePublished, pixels: pixels))
            previous = info.sequence
        }
        return frames
    }

    static func waitForExit(_ process: Process, timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(50_000) }
        return !process.isRunning
    }

    /// Full-size 8-bit 4:2:0 frames as one y4m file (NV12 made planar).
    static func writeY4M(_ frames: [ReceivedFrame], to path: String) throws {
        var data = Data("YUV4MPEG2 W\(width) H\(height) F\(fps):1 Ip A1:1 C420jpeg\n".utf8)
        for frame in frames {
            data.append(Data("FRAME\n".utf8))
            data.append(contentsOf: PlanarConversion.planar(frame.pixels, layout: frame.layout))
        }
        try data.write(to: URL(fileURLWithPath: path))
    }
}

/// Debian's Chromium, or nil with a loud warning: the suite is then skipped, not failed.
let chromiumBinary: String? = {
    let path = "/usr/bin/chromium"
    guard FileManager.default.isExecutableFile(atPath: path) else {
        FileHandle.standardError.write(Data("""
            \n*** WARNING: \(path) not found: ChromiumShareTests (the share page in a real browser) is SKIPPED.
            *** apt-get install chromium (make test installs it).\n\n
            """.utf8))
        return nil
    }
    return path
}()
