import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// Simulcast as a real sender offers it: headless Chromium (scripts/chromium-simulcast.py) sends its fake camera
/// with `sendEncodings` rids h, m and l (full, half and quarter size; `a=simulcast:send h;m;l`, as OBS 32 does). The
/// daemon answers without simulcast (RFC 8853 §5.3), so Chromium sends one stream, its first, at full size; the log
/// and the stream's status say so.
@Suite(.serialized, .enabled(if: chromiumBinary != nil, "needs Debian's chromium (apt-get install chromium)"))
struct ChromiumSimulcastTests {
    @Test func aSimulcastOfferSendsItsFirstLayerAtFullSize() throws {
        let (daemon, whipPort, _) = try WebRTCIngestTests.daemon("simulcast")
        let directory = daemon.directory
        let clip = directory.appendingPathComponent("camera.y4m").path
        try runChecked("ffmpeg", ["-v", "error", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30", "-frames:v", "90",
                                  "-pix_fmt", "yuv420p", clip])
        let tokenPath = directory.appendingPathComponent("token").path
        try (WebRTCIngestTests.token + "\n").write(toFile: tokenPath, atomically: true, encoding: .utf8)
        chmod(tokenPath, 0o600)
        let profile = directory.appendingPathComponent("chromium-profile")
        try FileManager.default.createDirectory(at: profile, withIntermediateDirectories: true)
        let reader = try FrameRingReader(shmName: daemon.shmName)

        let browser = Process()
        browser.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        browser.arguments = [TestEnvironment.repositoryRoot.appendingPathComponent("scripts/chromium-simulcast.py").path,
                             "http://127.0.0.1:\(whipPort)/", "--stream", daemon.name, "--token-file", tokenPath, "--clip", clip,
                             "--profile", profile.path, "--seconds", "6", "--chromium", chromiumBinary ?? "/usr/bin/chromium"]
        let output = directory.appendingPathComponent("browser.out")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        browser.standardInput = FileHandle.nullDevice
        browser.standardOutput = try FileHandle(forWritingTo: output)
        browser.standardError = FileHandle.nullDevice
        try browser.run()
        defer { if browser.isRunning { browser.terminate() } }
        let frames = ChromiumShareTests.collectFrames(60, from: reader, while: browser, timeout: 60)
        // While the session lasts (6 s of sending; 60 frames take 2), the stream's status says what was taken.
        let status = reader.status.sourceStatus
        #expect(ChromiumShareTests.waitForExit(browser, timeout: 60))
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        let lastLine = text.split(separator: "\n").last.map(String.init) ?? ""
        let result = try #require(try? JSONSerialization.jsonObject(with: Data(lastLine.utf8)) as? [String: Any],
                                  "\(text.suffix(2000))\n\(daemon.log.suffix(3000))")

        // Offered with three layers, answered without simulcast: Chromium kept one encoding, the first, and sent it.
        #expect(result["offerSimulcast"] as? Bool == true && result["offerRids"] as? Int == 3, "\(result)")
        #expect(result["answerSimulcast"] as? Bool == false && result["encodings"] as? [String] == ["h"], "\(result)")
        let layers = (result["sent"] as? [String: Any])?["layers"] as? [[String: Any]] ?? []
        let sending = layers.filter { ($0["bytesSent"] as? Int ?? 0) > 0 }
        #expect(sending.count == 1 && sending.first?["rid"] as? String == "h", "\(layers)")
        #expect(result["deleted"] as? Int == 200, "\(result)")
        #expect(daemon.log.contains("simulcast offered (h, m, l): its first stream, h, taken"), "\(daemon.log.suffix(3000))")
        #expect(status.hasPrefix("WebRTC: connected from ") && status.hasSuffix("transport-cc, simulcast: h of 3)"), "\(status)")

        // The ring: the full-size layer, unflagged after the first keyframe.
        try #require(frames.count >= 60, "\(frames.count) frames\n\(daemon.log.suffix(3000))")
        let sizes = Dictionary(grouping: frames) { "\($0.layout.width)x\($0.layout.height)" }.mapValues(\.count)
        #expect(sizes == ["1280x720": frames.count], "\(sizes)")
        let firstKeyframe = try #require(frames.firstIndex { $0.flags.contains(.keyframe) })
        #expect(frames[firstKeyframe...].allSatisfy { !$0.flags.contains(.corrupt) }, "\(frames.map(\.flags.rawValue))")
        #expect(daemon.isRunning)
    }
}
