import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// A reload replaces a changed stream's pipeline, whose counters start again from zero while the old instance's are
/// still remembered (for the STATUS line's frame rate): nothing may subtract one from the other.
@Suite(.serialized) struct ReloadCounterTests {
    /// A sender that reconnects at once after a reload changed its stream: the new instance streams within the
    /// second, with fewer frames than the old one had. The daemon used to trap there (UInt64 underflow in the
    /// STATUS line) and take every stream with it.
    @Test func aStreamThatStreamsAgainRightAfterAReloadKeepsTheDaemonUp() throws {
        let daemon = try DaemonProcess(label: "reloadcount", settings: ["max_width": "320", "max_height": "240", "slots": "8"],
                                       start: false)
        let notify = try NotifyListener(directory: daemon.directory)
        try daemon.start(environment: ["NOTIFY_SOCKET": notify.path])
        _ = notify.receive { $0.contains("READY=1") }
        let stream = try generated("h264", size: "320x240", frames: 120, parameters: "keyint=10")
        try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: 1000)
        #expect(daemon.waitUntilPublished(120))
        // The STATUS line has seen the old instance's count (it is computed once a second).
        _ = notify.receive(until: { $0.contains("STATUS=") }, seconds: 3)
        let short = try generated("h264", size: "320x240", frames: 40, parameters: "keyint=10")
        for round in 0..<2 {
            let text = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
            try text.replacingOccurrences(of: "slots = \(8 + round)", with: "slots = \(9 + round)")
                .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
            let before = daemon.status?.counters.framesPublished ?? 0
            notify.drain()
            daemon.send(signal: SIGHUP)
            // Connect as soon as the new instance listens, and stream for over a second (40 frames, 40 ms apart); a
            // connection the old instance took and closed while stopping is tried again, as a live sender would.
            let deadline = Date().addingTimeInterval(20)
            var streamed = false
            while !streamed && Date() < deadline {
                guard let sender = try? Sender(port: daemon.port) else {
                    usleep(5_000)
                    continue
                }
                streamed = (try? sender.sendPaced(short, pauseMicroseconds: 40_000)) != nil
                sender.close()
            }
            #expect(streamed, "the changed stream never took a sender again: \(daemon.log.suffix(2000))")
            // The ring's counters continue across the reload (a new ring takes them over).
            #expect(daemon.waitUntilPublished(before + 40), "round \(round): \(daemon.log.suffix(2000))")
            let lines = notify.receive(until: { $0.contains("STATUS=") && $0.contains("fps") }, seconds: 3)
            #expect(daemon.isRunning, "round \(round): the daemon died after the reload: \(daemon.log.suffix(2000))")
            #expect(lines.contains { $0.contains("\(daemon.name): ") }, "\(lines)")
        }
        #expect(daemon.log.contains("reloaded"), "\(daemon.log.suffix(2000))")
        #expect(daemon.stop() == 0)
    }

    /// The same through an RTSP stream, which reconnects by itself right after the reload: certain to stream again
    /// within the second.
    @Test func anRTSPStreamReloadedKeepsTheDaemonUp() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let clip = try RTSPPullTests.clip(codec: "h264", in: directory)
        let camera = try RTSPCamera(clip: try RTSPPullTests.repeated(clip, times: 20, in: directory), codec: "h264", directory: directory)
        let daemon = try RTSPPullTests.daemon("reloadrtsp", source: camera.url, ["idle_timeout": "10"])
        var published: UInt64 { daemon.status?.counters.framesPublished ?? 0 }
        let deadline = Date().addingTimeInterval(60)
        while published < 60 && Date() < deadline { usleep(20_000) }
        #expect(published >= 60, "\(daemon.log.suffix(2000))")
        for round in 0..<2 {
            let text = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
            try text.replacingOccurrences(of: "idle_timeout = \(10 + round)", with: "idle_timeout = \(11 + round)")
                .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
            let before = published
            daemon.send(signal: SIGHUP)
            // Two STATUS computations (once a second) after the new session plays.
            while published < before + 50 && Date() < deadline { usleep(20_000) }
            usleep(2_100_000)
            #expect(daemon.isRunning, "round \(round): the daemon died after the reload: \(daemon.log.suffix(2000))")
            #expect(published >= before + 50, "round \(round): \(daemon.log.suffix(2000))")
        }
    }
}
