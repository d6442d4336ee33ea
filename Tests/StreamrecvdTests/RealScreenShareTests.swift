import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

/// A real desktop shared as a person shares it (scripts/real-screen-share.py): an X screen (Xvfb, 1920x1080) with a
/// document of 7 pt text and a moving picture, Debian's Chromium not headless on it, the share page typed into and
/// clicked through the X server, the whole screen picked, and the ring read by the Python reader while x11grab
/// records the same screen. What a person sharing a desktop needs, checked:
/// - every frame at the screen's size, none flagged;
/// - the first frame in the ring soon after the click, and no frozen start after it (no long gap);
/// - the document as sharp as Chromium encoded it (luma PSNR against x11grab);
/// - Chromium follows its own estimate: the daemon answers transport-cc and tells it where to start. (The
///   build before answered REMB only, which held Chromium at exactly 2 Mbit/s; without the start rate, transport-cc
///   alone let a 1080p screen start at 0.3 Mbit/s, 1 to 15 frames a second for 20 s.)
@Suite(.serialized, .enabled(if: chromiumBinary != nil && FileManager.default.isExecutableFile(atPath: "/usr/bin/Xvfb")
                                   && FileManager.default.isExecutableFile(atPath: "/usr/bin/xdotool"),
                              "needs chromium, xvfb and xdotool (make test installs them)"))
struct RealScreenShareTests {
    @Test func aDesktopSharedFromThePageArrivesWholeSharpAndAtOnce() throws {
        let (daemon, whipPort, _) = try WebRTCIngestTests.daemon(
            "realscreen", settings: ["max_width": "1920", "max_height": "1080", "slots": "8", "hwaccel": "\"none\""])
        let tokenPath = daemon.directory.appendingPathComponent("share.token").path
        try (WebRTCIngestTests.token + "\n").write(toFile: tokenPath, atomically: true, encoding: .utf8)
        chmod(tokenPath, 0o600)
        let work = daemon.directory.appendingPathComponent("screen")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        let script = TestEnvironment.repositoryRoot.appendingPathComponent("scripts/real-screen-share.py").path
        let run = try runProcess("/usr/bin/python3", [script, "http://127.0.0.1:\(whipPort)/", "--stream", daemon.name,
                                                      "--token-file", tokenPath, "--shm-name", daemon.shmName,
                                                      "--work", work.path, "--seconds", "15", "--clock"])
        let logs = ["chromium.log", "xvfb.log", "ffplay.log"].map { name in
            "\(name): " + ((try? String(contentsOfFile: work.appendingPathComponent(name).path, encoding: .utf8)) ?? "")
                .split(separator: "\n").filter { !$0.contains("dbus") }.suffix(15).joined(separator: "\n")
        }.joined(separator: "\n")
        let context = "\(run.text.suffix(2000))\n\(logs)\ndaemon: \(daemon.log.suffix(3000))"
        let lastLine = run.text.split(separator: "\n").last.map(String.init) ?? ""
        let result = try #require(try? JSONSerialization.jsonObject(with: Data(lastLine.utf8)) as? [String: Any], "\(context)")
        try #require(result["failed"] == nil && (result["frames"] as? Int ?? 0) > 0, "\(context)")

        #expect(result["sizes"] as? [String] == ["1920x1080"], "\(result["sizes"] ?? "none")")
        // Whole frames: none flagged past the start. At the start, a loaded machine (a full parallel run, four
        // browsers on 2 cores) once lost a fragment of the first keyframe while the 24 MiB ring was being made; the
        // daemon asked for a keyframe (PLI) and flagged the 15 frames until it came, as it must. Alone: none.
        #expect(result["corrupt_after_start"] as? Int == 0 && result["corrupt"] as? Int ?? .max <= 60, "\(result["corrupt"] ?? "?") flagged\n\(context)")
        // The click to the first frame readable: the goal is 1.0 s (0.35 to 0.8 s measured with a release build on
        // 2 cores, 0.7 s with the debug build in a full run, 2.67 s once in a full run beside four browsers); 3 s here,
        // for a debug build on a loaded machine: a guard against seconds lost, as the gaps below are.
        let clicked = try #require(result["clicked_ns"] as? Int), first = try #require(result["first_frame_ns"] as? Int)
        let clickToFrame = Double(first - clicked) / 1e6
        #expect(clickToFrame < 3000, "click → first frame \(clickToFrame) ms")
        // No frozen start: the build before had gaps of 2.3 to 2.6 s in the first seconds (a second without a
        // frame); this one 0.08 to 0.33 s alone, 0.8 s once beside an attack on the same 2 cores, and 1.57 s once in
        // a full parallel run where this test took 209 s instead of 26 (the click → first frame then 1.66 s).
        let perSecond = result["frames_per_second"] as? [Int] ?? []
        let gap = result["longest_gap_ms"] as? Double ?? .infinity
        #expect(perSecond.count >= 12 && gap < 2000, "longest gap \(gap) ms; frames per second: \(perSecond)")
        // The document: luma PSNR against the screen as x11grab saw it. Chromium's keyframes of it are coarse (31.7
        // to 32.9 dB) and its later frames refine them, to 38.4 dB in most shares; but that refinement can stall:
        // once in CI at 33.8 dB for the whole share. (A keyframe the daemon asked for 3 s in, to restart a stalled
        // refinement, was tried: the refinement after it stalled at 35.5 dB in 1 of 5 runs, so it was left out.)
        // That is the encoder's: the daemon decodes what it is sent bit-exactly (EndToEndTests), and even the build
        // that held Chromium at 2 Mbit/s measured 38.2 dB here (docs/benchmarks.md). What the daemon could do wrong
        // lies far below: the document scaled down to 1600 to 1280 pixels wide and back is 19 to 21 dB.
        let document = (result["psnr_y_document"] as? [Double] ?? []).sorted()
        let history = result["history"] as? [[String: Any]] ?? []
        let encoder = history.map { "\($0["qp"] ?? "-")/\($0["limit"] ?? "-")/\($0["keyFrames"] ?? "-")" }
        try #require(document.count >= 6, "\(result["grabbed"] ?? 0) frames grabbed; \(document)")
        #expect(document[document.count / 2] >= 33, "document PSNR-Y: \(result["psnr_y_document"] ?? []); each second, Chromium's mean QP/quality limitation/keyframes: \(encoder)")
        // What Chromium allowed itself (its getStats' availableOutgoingBitrate, once a second): its own delay-based
        // estimate, moving, not pinned where REMB held it (exactly 2.0 Mbit/s for the whole share, the build before).
        // Alone on the machine 4 to 6 Mbit/s from 5 s on; in a full parallel run, beside three other browsers on the
        // same 2 cores, 1.0 to 2.0 (queues grow, and the estimator backs off as it should): not a fixed floor here.
        let allowed = history.compactMap { $0["allowedKbps"] as? Int }
        try #require(allowed.count >= 10, "\(history)")
        #expect(Set(allowed).count >= 2 && allowed.contains { $0 != 2000 }, "allowed kbit/s: \(allowed)")
        // The clock drawn on the screen (scripts/screen-clock.c), read back from the frames: no frame shows an older
        // screen than the frame before it, none was published before its picture was drawn.
        let glass = (result["glass_ms"] as? [Double] ?? []).sorted()
        let frameCount = result["frames"] as? Int ?? 0
        #expect(Double(glass.count) >= 0.8 * Double(frameCount), "the clock read from \(glass.count) of \(frameCount) frames")
        #expect(glass.allSatisfy { $0 > 0 && $0 < 60_000 }, "drawn → readable (ms): \(glass.prefix(3)) … \(glass.suffix(3))")
        #expect(result["clock_backwards"] as? Int == 0, "frames showing an older screen than the one before: \(result["clock_backwards"] ?? "none")")
        print("RealScreenShareTests: drawn → readable p50 \(glass.isEmpty ? 0 : glass[glass.count / 2]) ms of \(glass.count) frames")
        print("""
            RealScreenShareTests: \(result["frames"] ?? 0) frames, click → first frame \(Int(clickToFrame)) ms, frames per second \(perSecond), \
            longest gap \(Int(gap)) ms, document PSNR-Y median \(document[document.count / 2]) dB, \
            screen PSNR-Y \((result["psnr_y_screen"] as? [Double] ?? []).sorted().map { Int($0) }), \
            allowed kbit/s \(history.map { $0["allowedKbps"] as? Int ?? 0 }), sent kbit/s \(history.map { $0["sentKbps"] as? Int ?? 0 }), \
            mean QP/quality limitation/keyframes \(encoder)
            """)
        #expect(daemon.isRunning)
    }
}
