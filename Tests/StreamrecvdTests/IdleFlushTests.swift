import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// The idle flush (shared/DESIGN.md "Latency"): over tcp://, a frame is published once its bytes are in and the
/// transport went quiet, without waiting for the next frame's first bytes; a sender that pauses inside a NAL unit
/// is caught once (counted, logged, frames flagged) and the interval backs off.
@Suite(.serialized) struct IdleFlushTests {
    /// No B-frames (no reordering), one IDR every 25 frames.
    private static let parameters = "bframes=0:keyint=25:min-keyint=25:scenecut=0"

    private func publishedFrames(_ daemon: DaemonProcess) -> UInt64 { daemon.status?.counters.framesPublished ?? 0 }

    private func waitForPublished(_ daemon: DaemonProcess, _ count: UInt64, seconds: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if publishedFrames(daemon) >= count { return true }
            usleep(2_000)
        }
        return false
    }

    @Test func eachFrameIsPublishedBeforeTheNextOneIsSent() throws {
        let stream = try generated("h264", frames: 25, parameters: Self.parameters)
        let directory = try TestEnvironment.temporaryDirectory()
        let reference = try referenceMD5s(stream, facts: StreamFacts(stream), directory: directory)
        let metricsPort = freePort()
        let daemon = try DaemonProcess(label: "idleflush", settings: ["max_width": "160", "max_height": "96", "slots": "32"],
                                       daemonSettings: ["metrics": "\"127.0.0.1:\(metricsPort)\""])
        let cat = try CatProcess(stream: daemon.name, frames: 25, directory: directory)
        let offsets = StreamFacts(stream).accessUnitOffsets + [stream.count]
        let sender = try Sender(port: daemon.port)
        for index in 0..<(offsets.count - 1) {
            try sender.send(stream[offsets[index]..<offsets[index + 1]])
            // Nothing of frame index + 1 has been sent: only the idle flush can close this access unit.
            #expect(waitForPublished(daemon, UInt64(index + 1)), "frame \(index) not published: \(daemon.log.suffix(1500))")
        }
        sender.close()
        #expect(cat.finish().status == 0)
        #expect(firstDifference(try catMD5s(cat), reference) == nil)
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        let labels = "stream=\"\(daemon.name)\""
        #expect((sample(body, "streamrecvd_idle_flushes_total", labels) ?? 0) >= 25, "\(body)")
        #expect(sample(body, "streamrecvd_stream_defects_total", "\(labels),kind=\"premature_idle_flush\"") == 0)
    }

    @Test func withIdleFlushOffAFrameWaitsForTheNextOnesFirstBytes() throws {
        let stream = try generated("h264", frames: 5, parameters: Self.parameters)
        let daemon = try DaemonProcess(label: "noflush", settings: [
            "max_width": "160", "max_height": "96", "slots": "32", "idle_flush": "\"off\"",
        ])
        let offsets = StreamFacts(stream).accessUnitOffsets + [stream.count]
        let sender = try Sender(port: daemon.port)
        try sender.send(stream[offsets[0]..<offsets[1]])
        usleep(300_000)
        #expect(publishedFrames(daemon) == 0, "the first frame must wait for the second one's start code")
        // The first bytes of the next frame close it (the next access unit's first NAL unit need not be whole).
        try sender.send(stream[offsets[1]..<(offsets[1] + 8)])
        #expect(waitForPublished(daemon, 1))
        try sender.send(stream[(offsets[1] + 8)...])
        sender.close()
        #expect(daemon.waitUntilPublished(5))
    }

    /// A pause of 200 ms inside a NAL unit, after a few frames have taught the daemon that this sender's frames
    /// arrive whole: the flush is premature. It is counted and logged, the frames until the next keyframe are
    /// flagged corrupt, the next GOP is bit-exact, and the interval has backed off so that a second pause (20 ms)
    /// is waited out.
    @Test func aPauseInsideANALUnitIsCaughtOnceAndTheIntervalBacksOff() throws {
        let stream = try generated("h264", frames: 50, parameters: Self.parameters)
        let directory = try TestEnvironment.temporaryDirectory()
        let reference = try referenceMD5s(stream, facts: StreamFacts(stream), directory: directory)
        let metricsPort = freePort()
        let daemon = try DaemonProcess(label: "premature", settings: ["max_width": "160", "max_height": "96", "slots": "64"],
                                       daemonSettings: ["metrics": "\"127.0.0.1:\(metricsPort)\""])
        let cat = try CatProcess(stream: daemon.name, frames: 50, directory: directory)
        let offsets = StreamFacts(stream).accessUnitOffsets + [stream.count]
        /// A cut inside access unit `index` right after a non-zero byte (a unit that looks complete).
        func cut(inside index: Int) -> Int {
            var cut = (offsets[index] + offsets[index + 1]) / 2
            while stream[cut - 1] == 0 { cut -= 1 }
            return cut
        }
        let sender = try Sender(port: daemon.port)
        for index in 0..<(offsets.count - 1) {
            if index == 10 || index == 30 {
                let middle = cut(inside: index)
                try sender.send(stream[offsets[index]..<middle])
                usleep(index == 10 ? 200_000 : 20_000)
                try sender.send(stream[middle..<offsets[index + 1]])
            } else {
                try sender.send(stream[offsets[index]..<offsets[index + 1]])
            }
            usleep(5_000)
        }
        sender.close()
        #expect(cat.finish().status == 0)
        let ours = try catMD5s(cat)
        #expect(ours.count == 50, "the damaged frame is still published: \(daemon.log.suffix(2000))")
        #expect(ours.suffix(25) == reference.suffix(25), "the GOP after the next keyframe is bit-exact")
        #expect(ours.prefix(10) == reference.prefix(10))
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        let labels = "stream=\"\(daemon.name)\""
        #expect(sample(body, "streamrecvd_stream_defects_total", "\(labels),kind=\"premature_idle_flush\"") == 1,
                "\(daemon.log.split(separator: "\n").filter { $0.contains("warning") || $0.contains("premature") })")
        #expect(sample(body, "streamrecvd_idle_flush_interval_seconds", labels) == 0.05, "backed off to the maximum")
        // Frames 11...24 refer to the damaged frame 10: flagged until the keyframe at 25.
        #expect((sample(body, "streamrecvd_frames_corrupt_total", labels) ?? 0) >= 14)
        #expect(daemon.log.contains("inside a NAL unit after an idle flush"), "\(daemon.log.split(separator: "\n").filter { $0.contains("warning") })")
    }
}
