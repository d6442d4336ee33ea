import Bitstream
import Decoding
import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

func generated(_ codec: String, size: String = "160x96", frames: Int, parameters: String = "") throws -> [UInt8] {
    let directory = try TestEnvironment.temporaryDirectory()
    let url = try GeneratedStreams.encode(codec: codec, size: size, frames: frames, encoderParameters: parameters,
                                          in: directory, name: "s.\(codec)")
    return [UInt8](try Data(contentsOf: url))
}

@Suite(.serialized) struct DaemonBehaviourTests {
    @Test func aSecondSenderIsRefusedAndTheFirstKeepsStreaming() throws {
        let stream = try generated("h264", frames: 20)
        let directory = try TestEnvironment.temporaryDirectory()
        let reference = try ffmpegMD5s(try { let path = directory.appendingPathComponent("r.h264").path
            try Data(stream).write(to: URL(fileURLWithPath: path)); return path }())
        let daemon = try DaemonProcess(label: "refuse", settings: ["max_width": "160", "max_height": "96", "slots": "32"])
        let cat = try CatProcess(stream: daemon.name, frames: 20, directory: directory)
        let first = try Sender(port: daemon.port)
        try first.send(stream[0..<(stream.count / 2)])
        let second = try Sender(port: daemon.port)
        #expect(second.closedByPeer(within: 5), "the second sender must be disconnected: \(daemon.log.suffix(2500))")
        try first.send(stream[(stream.count / 2)...])
        first.close()
        #expect(cat.finish().status == 0)
        #expect(firstDifference(try catMD5s(cat), reference) == nil)
        #expect(daemon.log.contains("second sender refused"))
        #expect(daemon.status?.counters.connections == 1)
    }

    @Test func takeoverPolicyHandsTheStreamToTheNewSender() throws {
        let stream = try generated("h264", frames: 10)
        let daemon = try DaemonProcess(label: "takeover", settings: [
            "max_width": "160", "max_height": "96", "slots": "32", "second_sender": "\"takeover\"",
        ])
        let first = try Sender(port: daemon.port)
        try first.send(stream[0..<100])
        usleep(200_000)
        let second = try Sender(port: daemon.port)
        #expect(first.closedByPeer(within: 5), "the old sender must be disconnected")
        try second.sendPaced(stream, pauseMicroseconds: 0)
        second.close()
        #expect(daemon.waitUntilPublished(10))
        #expect(daemon.log.contains("takes over"))
        #expect(daemon.status?.counters.connections == 2)
    }

    /// A sender that goes quiet is dropped after idle_timeout; the stream drains, stays readable, and the next
    /// sender is accepted without a restart.
    @Test func anIdleSenderIsDisconnectedAndTheNextOneAccepted() throws {
        let stream = try generated("h264", frames: 10)
        let daemon = try DaemonProcess(label: "idle", settings: [
            "max_width": "160", "max_height": "96", "slots": "32", "idle_timeout": "0.5",
        ])
        let quiet = try Sender(port: daemon.port)
        try quiet.send(stream[0..<(stream.count / 2)])
        #expect(quiet.closedByPeer(within: 5))
        #expect(daemon.waitUntilPublished(1), "frames received before the sender went quiet are published")
        #expect(daemon.log.contains("s (idle_timeout)"))
        let published = daemon.status?.counters.framesPublished ?? 0
        let next = try Sender(port: daemon.port)
        try next.sendPaced(stream, pauseMicroseconds: 0)
        next.close()
        #expect(daemon.waitUntilPublished(published + 10))
    }

    @Test func framesLargerThanTheConfiguredMaximumNeverReachTheDecoder() throws {
        let stream = try generated("h264", size: "320x240", frames: 5)
        let daemon = try DaemonProcess(label: "toolarge", settings: ["max_width": "160", "max_height": "96"])
        let sender = try Sender(port: daemon.port)
        try sender.sendPaced(stream, pauseMicroseconds: 0)
        sender.close()
        // The last access unit is closed by the end of the connection: wait for all five, however slow the machine.
        #expect(eventually { (daemon.status?.counters.framesDropped ?? 0) >= 5 && daemon.status?.state == .waiting })
        let status = try #require(daemon.status)
        #expect(status.counters.framesPublished == 0)
        #expect(status.counters.framesDropped == 5)
        #expect(status.counters.framesDecoded == 0)
        #expect(daemon.log.contains("frame of 320x240 refused: larger than max_width × max_height (160x96)"))
        #expect(daemon.isRunning)
    }

    /// Garbage access units (slices naming a PPS that was never sent) after a valid GOP: the policy resets the
    /// decoder after 20 failures, and the next keyframe decodes bit-exact again.
    @Test func garbageAccessUnitsResetTheDecoderAndTheNextKeyframeDecodesBitExact() throws {
        let first = try generated("h264", frames: 10, parameters: "keyint=10:bframes=0")
        let second = try generated("h264", frames: 10, parameters: "keyint=10:bframes=0")
        var garbage: [UInt8] = []
        var generator = SeededGenerator(seed: 3)
        for _ in 0..<25 {
            var slice = BitWriter()
            slice.ue(0)     // first_mb_in_slice
            slice.ue(5)     // P slice
            slice.ue(200)   // pic_parameter_set_id never sent
            for _ in 0..<40 { slice.u(8, UInt64.random(in: 1...255, using: &generator)) }
            slice.trailingBits()
            garbage += [0, 0, 0, 1, 0x41] + escapeRBSP(slice.bytes)
        }
        let directory = try TestEnvironment.temporaryDirectory()
        let reference = try ffmpegMD5s(try { let path = directory.appendingPathComponent("a.h264").path
            try Data(first).write(to: URL(fileURLWithPath: path)); return path }())
            + ffmpegMD5s(try { let path = directory.appendingPathComponent("b.h264").path
            try Data(second).write(to: URL(fileURLWithPath: path)); return path }())
        let daemon = try DaemonProcess(label: "garbage", settings: ["max_width": "160", "max_height": "96", "slots": "32"])
        let cat = try CatProcess(stream: daemon.name, frames: 20, directory: directory)
        try Sender(port: daemon.port).sendPaced(first + garbage + second, pauseMicroseconds: 200)
        #expect(cat.finish().status == 0)
        #expect(firstDifference(try catMD5s(cat), reference) == nil)
        let status = try #require(daemon.status)
        #expect(status.counters.decodeErrors == 20)
        #expect(daemon.log.contains("20 consecutive decode failures: decoder reset, waiting for the next keyframe"))
        #expect(daemon.isRunning)
    }

    @Test func randomBytesAndUndecodableStreamsLeaveTheDaemonRunning() throws {
        let daemon = try DaemonProcess(label: "noise", settings: ["max_width": "160", "max_height": "96", "slots": "8"])
        var generator = SeededGenerator(seed: 11)
        let noise = (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let sender = try Sender(port: daemon.port)
        try sender.send(noise[...])
        sender.close()
        #expect(daemon.waitUntilPublished(0))
        let valid = try generated("h265", frames: 5)
        let next = try Sender(port: daemon.port)
        try next.sendPaced(valid, pauseMicroseconds: 0)
        next.close()
        #expect(daemon.waitUntilPublished(5))
        #expect(daemon.isRunning)
    }

    @Test(.enabled(if: TestEnvironment.hasCorpus, "needs ../shared/corpus"))
    func recreatedOnRealChangesNeverOnIdenticalRepeats() throws {
        for (name, frames, recreations) in [("BA1_Sony_D.jsv", 17, 0), ("Error_I_P.264", 6, 2)] {
            let stream = [UInt8](try Data(contentsOf: TestEnvironment.corpusFile(name)!))
            let daemon = try DaemonProcess(label: "recreate", settings: ["max_width": "640", "max_height": "480", "slots": "8"])
            try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: 2000)
            #expect(daemon.waitUntilPublished(UInt64(frames)), "\(name)")
            #expect(daemon.status?.counters.decoderRecreations == UInt64(recreations), "\(name)")
        }
    }

    /// `hwaccel = "auto"` falls back to software here, saying why; a named hwaccel that cannot be opened stops the
    /// daemon at start with an error that names the device.
    @Test func hardwareSelectionAtStart() throws {
        guard (try? HardwareSelection.select(.auto, codec: .h264, probe: FFmpegHardwareProbe()))?.device == nil else { return }
        let automatic = try DaemonProcess(label: "hwauto", settings: ["hwaccel": "\"auto\"", "max_width": "160", "max_height": "96"])
        try Sender(port: automatic.port).sendPaced(try generated("h264", frames: 3), pauseMicroseconds: 0)
        #expect(automatic.waitUntilPublished(3))
        #expect(automatic.log.contains("software decoding (hwaccel = auto); vaapi: "))

        let strict = try DaemonProcess(label: "hwvaapi", settings: ["hwaccel": "\"vaapi\""], start: false)
        let result = try runProcess(tool("streamrecvd"), ["--config", strict.configPath])
        #expect(result.status == 1)
        #expect(result.standardError.contains("hwaccel vaapi unavailable on /dev/dri/renderD128"))

        // --check-config opens the device as the daemon would: a named one that does not open fails the check, with
        // the line of hwaccel; auto says which path it takes.
        for accelerator in ["cuda", "vaapi"] {
            let named = try DaemonProcess(label: "hwcheck\(accelerator)", settings: ["hwaccel": "\"\(accelerator)\""], start: false)
            let check = try runProcess(tool("streamrecvd"), ["--check-config", named.configPath])
            #expect(check.status == 1, "\(check.text)")
            #expect(check.standardError.contains("streamrecvd.toml:7: stream \(named.name): h264: hwaccel \(accelerator) unavailable on "),
                    "\(check.standardError)")
        }
        let check = try runChecked(tool("streamrecvd"), ["--check-config", automatic.configPath])
        #expect(check.text.contains("stream \(automatic.name): h265: software decoding (hwaccel = auto); vaapi: "), "\(check.text)")
    }

    @Test func checkConfigReportsTheLine() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let bad = directory.appendingPathComponent("bad.toml").path
        try "[[stream]]\nname = \"a\"\nlisten = \"tcp://127.0.0.1:5000\"\nslotz = 4\n".write(toFile: bad, atomically: true, encoding: .utf8)
        let failed = try runProcess(tool("streamrecvd"), ["--check-config", bad])
        #expect(failed.status == 1)
        #expect(failed.standardError.contains("bad.toml:4: unknown key 'slotz'"))
        let good = try runChecked(tool("streamrecvd"), ["--check-config", TestEnvironment.repositoryRoot.appendingPathComponent("etc/streamrecvd/streamrecvd.toml").path])
        #expect(good.text.contains("ok, 1 stream(s): desk on tcp://127.0.0.1:5000"))
    }

    @Test func aSecondDaemonOnTheSameRingRefusesToStart() throws {
        let daemon = try DaemonProcess(label: "twice", settings: ["max_width": "160", "max_height": "96"])
        let result = try runProcess(tool("streamrecvd"), ["--config", daemon.configPath])
        #expect(result.status == 1)
        #expect(result.standardError.contains("another streamrecvd is writing this ring"))
        #expect(daemon.isRunning)
    }

    @Test func sigtermDrainsAndMarksTheRingStopped() throws {
        let daemon = try DaemonProcess(label: "sigterm", settings: ["max_width": "160", "max_height": "96", "slots": "16"])
        let sender = try Sender(port: daemon.port)
        let stream = try generated("h264", frames: 8, parameters: "bframes=3")
        try sender.sendPaced(stream, pauseMicroseconds: 0)
        // Every byte taken in before SIGTERM (what the socket still holds then is rightly not waited for).
        #expect(eventually { daemon.status?.counters.bytesReceived == UInt64(stream.count) })
        #expect(daemon.stop() == 0)
        let status = try FrameRingReader(shmName: daemon.shmName).status
        #expect(status.state == .stopped)
        #expect(status.counters.framesPublished == 8, "frames held for reordering are drained at shutdown")
    }

    /// Someone truncates the ring under the daemon: it must not die of SIGBUS but re-create the object.
    @Test func aTruncatedRingIsRecreatedNotFaultedOn() throws {
        let daemon = try DaemonProcess(label: "truncate", settings: ["max_width": "160", "max_height": "96", "slots": "8"])
        let descriptor = shm_open("/" + daemon.shmName, O_RDWR, 0)
        #expect(descriptor >= 0)
        ftruncate(descriptor, 4096)
        close(descriptor)
        let sender = try Sender(port: daemon.port)
        try sender.sendPaced(try generated("h264", frames: 5), pauseMicroseconds: 0)
        sender.close()
        #expect(daemon.waitUntilPublished(5))
        #expect(daemon.isRunning)
        #expect(daemon.log.contains("was truncated by another process; re-created it"))
    }

    /// y4m on standard output cannot change size: `cat` ends it with status 3 and says why; `--format raw` writes
    /// the published layout (NV12) exactly as FFmpeg's own conversion does; `status --json` reports the counters;
    /// the ring has the configured mode.
    @Test func catAndStatusContracts() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let first = try generated("h264", size: "160x96", frames: 4)
        let second = try generated("h264", size: "320x240", frames: 4)
        let daemon = try DaemonProcess(label: "catstatus", settings: [
            "max_width": "320", "max_height": "240", "slots": "16", "shm_mode": "\"0600\"",
        ])
        var status = stat()
        #expect(stat("/dev/shm/" + daemon.shmName, &status) == 0 && status.st_mode & 0o777 == 0o600)

        let toStdout = Process()
        toStdout.executableURL = URL(fileURLWithPath: tool("streamrecvctl"))
        toStdout.arguments = ["cat", daemon.name, "--frames", "8", "--timeout", "20"]
        let output = Pipe()
        let errors = Pipe()
        toStdout.standardOutput = output
        toStdout.standardError = errors
        try toStdout.run()
        var seen = Data()
        while !String(decoding: seen, as: UTF8.self).contains("reading") { seen += errors.fileHandleForReading.availableData }
        let raw = try CatProcess(stream: daemon.name, frames: 4, directory: directory, extra: ["--format", "raw"])
        try Sender(port: daemon.port).sendPaced(first + second, pauseMicroseconds: 1000)
        _ = output.fileHandleForReading.readDataToEndOfFile()
        toStdout.waitUntilExit()
        #expect(toStdout.terminationStatus == 3, "\(daemon.log.suffix(3000))")
        #expect(String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .contains("format changed to 320x240 nv12 at frame 5; y4m on standard output ends here"))

        #expect(raw.finish().status == 0)
        let path = directory.appendingPathComponent("first.h264").path
        try Data(first).write(to: URL(fileURLWithPath: path))
        let nv12 = try runChecked("ffmpeg", ["-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "nv12", "-"]).standardOutput
        #expect(try Data(contentsOf: URL(fileURLWithPath: raw.output)) == nv12)

        #expect(daemon.waitUntilPublished(8))
        let json = try runChecked(tool("streamrecvctl"), ["status", daemon.name, "--json"]).text
        let record = try JSONSerialization.jsonObject(with: Data(json.utf8)) as! [String: Any]
        #expect(record["stream"] as? String == daemon.name && record["state"] as? String == "waiting")
        #expect(record["frames_published"] as? Int == 8 && record["codec"] as? String == "h264")
        #expect(record["decoder_recreations"] as? Int == 1)
        let table = try runChecked(tool("streamrecvctl"), ["status", daemon.name]).text
        #expect(table.contains(daemon.name) && table.contains("waiting"))
    }
}
