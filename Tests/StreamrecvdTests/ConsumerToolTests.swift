import Foundation
import FrameFormats
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// An MP4 made by ffmpeg: 320x240, 30 fps, B-frames, keyframe every 15 frames.
func makeMP4(codec: String, frames: Int, in directory: URL) throws -> String {
    let path = directory.appendingPathComponent("clip-\(codec).mp4").path
    let encoder = codec == "h264"
        ? ["-c:v", "libx264", "-bf", "2", "-g", "15"]
        : ["-c:v", "libx265", "-x265-params", "log-level=error:bframes=2:keyint=15", "-tag:v", "hvc1"]
    try runChecked("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30", "-frames:v", String(frames)]
        + encoder + [path])
    return path
}

@Suite(.serialized) struct ConsumerToolTests {
    /// `streamrecvctl send FILE.mp4 URL` through the daemon: what `cat` reads equals `ffmpeg -i FILE.mp4 -f framemd5 -`.
    @Test(arguments: [("h264", "tcp"), ("h265", "rtp"), ("h264", "udp")])
    func sendAnMP4ThroughTheDaemon(codec: String, transport: String) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let mp4 = try makeMP4(codec: codec, frames: 40, in: directory)
        let reference = try ffmpegMD5s(mp4)
        #expect(reference.count == 40)
        let daemon = try DaemonProcess(label: "send\(codec)\(transport)", settings: [
            "max_width": "320", "max_height": "240", "slots": "64", "output": "\"auto\"", "idle_timeout": "3",
            "codec": "\"\(codec)\"",
        ], transport: transport)
        let cat = try CatProcess(stream: daemon.name, frames: 40, segmented: true, directory: directory)
        let sent = try runChecked(tool("streamrecvctl"), ["send", mp4, "\(transport)://127.0.0.1:\(daemon.port)", "--rate", "120"])
        #expect(sent.standardError.contains("sent 40 \(codec) access units"), "\(sent.standardError)")
        let (status, errors) = cat.finish()
        #expect(status == 0, "\(errors)\n\(daemon.log.suffix(2000))")
        let difference = firstDifference(try catMD5s(cat), reference)
        #expect(difference == nil, "\(difference ?? "")")
    }

    /// `send --to-file` writes Annex B that decodes exactly as the MP4 does, parameter sets before every keyframe.
    @Test(arguments: ["h264", "h265"])
    func sendToFileWritesAnnexB(codec: String) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let mp4 = try makeMP4(codec: codec, frames: 40, in: directory)
        let annexB = directory.appendingPathComponent("out.\(codec)").path
        try runChecked(tool("streamrecvctl"), ["send", mp4, "--to-file", annexB])
        #expect(try ffmpegMD5s(annexB) == (try ffmpegMD5s(mp4)))
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: annexB)))
        #expect(bytes.starts(with: [0, 0, 0, 1]) || bytes.starts(with: [0, 0, 1]))
        let inspected = try runChecked(tool("streamrecvctl"), ["inspect", annexB, "--json"]).text.split(separator: "\n")
        let keyframes = inspected.filter { $0.contains("\"type\":\"au\"") && $0.contains("\"keyframe\":true") }
        #expect(keyframes.count == 3, "keyframes at 0, 15 and 30")
        // Every keyframe after the first repeats the parameter sets: 2 (SPS, PPS) or 3 (VPS, SPS, PPS) each.
        let summary = try #require(inspected.first { $0.contains("\"type\":\"summary\"") })
        #expect(summary.contains("\"parameter_set_repeats\":\(codec == "h264" ? 4 : 6)"), "\(summary)")
        let missing = try runProcess(tool("streamrecvctl"), ["send", directory.appendingPathComponent("nope.mp4").path, "--to-file", annexB])
        #expect(missing.status == 1 && missing.standardError.contains("cannot open"))
    }

    /// `snapshot` writes the newest frame as a PNG; its pixels equal FFmpeg's conversion of that frame.
    @Test func snapshotMatchesFFmpegsConversion() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let stream = try generated("h264", size: "320x240", frames: 10)
        let source = directory.appendingPathComponent("s.h264")
        try Data(stream).write(to: source)
        let daemon = try DaemonProcess(label: "snapshot", settings: ["max_width": "320", "max_height": "240"])
        try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: 0)
        #expect(daemon.waitUntilPublished(10))
        let ours = directory.appendingPathComponent("ours.png").path
        try runChecked(tool("streamrecvctl"), ["snapshot", daemon.name, ours])
        let theirs = directory.appendingPathComponent("theirs.png").path
        try runChecked("ffmpeg", ["-v", "error", "-i", source.path, "-vf", "select=eq(n\\,9)", "-frames:v", "1", theirs])
        func rgb(_ path: String) throws -> [UInt8] {
            [UInt8](try runChecked("ffmpeg", ["-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]).standardOutput)
        }
        let (a, b) = (try rgb(ours), try rgb(theirs))
        #expect(a.count == 320 * 240 * 3 && a.count == b.count)
        let largest = zip(a, b).map { abs(Int($0) - Int($1)) }.max() ?? 255
        #expect(largest <= 1, "largest channel difference \(largest) (tolerance 1)")
    }

    /// `wait`: 2 on timeout (no ring, or no frame yet), 0 once a frame is there.
    @Test func waitReportsTheStreamsFirstFrame() throws {
        #expect(try runProcess(tool("streamrecvctl"), ["wait", "no-such-stream-\(getpid())", "--timeout", "0.3"]).status == 2)
        let daemon = try DaemonProcess(label: "wait", settings: ["max_width": "160", "max_height": "96"])
        #expect(try runProcess(tool("streamrecvctl"), ["wait", daemon.name, "--timeout", "0.3"]).status == 2)
        let waiter = Process()
        waiter.executableURL = URL(fileURLWithPath: tool("streamrecvctl"))
        waiter.arguments = ["wait", daemon.name, "--timeout", "30"]
        waiter.standardOutput = FileHandle.nullDevice
        try waiter.run()
        usleep(300_000)
        #expect(waiter.isRunning, "still waiting: no frame yet")
        try Sender(port: daemon.port).sendPaced(try generated("h264", frames: 3), pauseMicroseconds: 0)
        waiter.waitUntilExit()
        #expect(waiter.terminationStatus == 0)
        #expect(try runProcess(tool("streamrecvctl"), ["wait", daemon.name, "--timeout", "1"]).status == 0)
        #expect(try runProcess(tool("streamrecvctl"), ["wait", daemon.name, "--new", "--timeout", "0.3"]).status == 2)
    }
}

/// The C example and the Python reader, each a real process reading the daemon's ring: the frames they write
/// (packed planes of the native yuv420p output) equal FFmpeg's decode, md5 for md5.
@Suite(.serialized) struct ConsumerExampleTests {
    /// Starts `reader` with standard output into `output` and waits until it says (on stderr) that it attached.
    func startReader(_ executable: String, _ arguments: [String], output: String, marker: String,
                     environment: [String: String] = [:]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        let errors = output + ".stderr"
        _ = FileManager.default.createFile(atPath: errors, contents: nil)
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errors))
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: errors, encoding: .utf8), text.contains(marker) { return process }
            if !process.isRunning { break }
            usleep(20_000)
        }
        throw HarnessError(description: "\(executable) did not attach: \((try? String(contentsOfFile: errors, encoding: .utf8)) ?? "")")
    }

    func expectReaderBitExact(label: String, reader: (DaemonProcess, URL) throws -> Process) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let stream = try generated("h264", size: "320x240", frames: 30, parameters: "bframes=2")
        let reference = try referenceMD5s(stream, facts: StreamFacts(stream), directory: directory)
        let daemon = try DaemonProcess(label: label, settings: [
            "max_width": "320", "max_height": "240", "slots": "40", "output": "\"native\"",
        ])
        let output = directory.appendingPathComponent("frames.yuv")
        let process = try reader(daemon, output)
        try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: 2000)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\((try? String(contentsOfFile: output.path + ".stderr", encoding: .utf8)) ?? "")")
        let ours = try ffmpegMD5s(output.path, format: "rawvideo", extra: ["-pix_fmt", "yuv420p", "-video_size", "320x240"])
        let difference = firstDifference(ours, reference)
        #expect(difference == nil, "\(label): \(difference ?? "")")
    }

    @Test func theCExampleReadsBitExact() throws {
        let binary = try TestEnvironment.temporaryDirectory().appendingPathComponent("consumer").path
        let root = TestEnvironment.repositoryRoot
        try runChecked("cc", ["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2",
                              "-I", root.appendingPathComponent("Sources/CFrameRing/include").path,
                              root.appendingPathComponent("docs/examples/consumer.c").path, "-o", binary])
        try expectReaderBitExact(label: "cexample") { daemon, output in
            try startReader(binary, [daemon.name, "30"], output: output.path, marker: "attached")
        }
    }

    /// `consumer --hash` borrows every frame where it lies and hashes its planes there: its hashes are those of
    /// FFmpeg's frames of the stream (yuv420p, as `output = "native"` publishes them), every one, in order.
    @Test func theCExampleBorrowsEveryFrameInPlace() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let binary = directory.appendingPathComponent("consumer").path
        let root = TestEnvironment.repositoryRoot
        try runChecked("cc", ["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2",
                              "-I", root.appendingPathComponent("Sources/CFrameRing/include").path,
                              root.appendingPathComponent("docs/examples/consumer.c").path, "-o", binary])
        let stream = try generated("h264", size: "320x240", frames: 30, parameters: "bframes=2")
        let source = directory.appendingPathComponent("source.h264")
        try Data(stream).write(to: source)
        let decoded = [UInt8](try runChecked("ffmpeg", ["-v", "error", "-i", source.path, "-pix_fmt", "yuv420p", "-f", "rawvideo", "-"]).standardOutput)
        let frameBytes = 320 * 240 * 3 / 2
        #expect(decoded.count == 30 * frameBytes)
        let expected = stride(from: 0, to: decoded.count, by: frameBytes).enumerated().map { index, start in
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in decoded[start..<(start + frameBytes)] { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
            return "\(index + 1) " + String(hash, radix: 16).leftPadded(to: 16)
        }
        let daemon = try DaemonProcess(label: "chash", settings: [
            "max_width": "320", "max_height": "240", "slots": "40", "output": "\"native\"",
        ])
        let output = directory.appendingPathComponent("hashes.txt")
        let process = try startReader(binary, ["--hash", daemon.name, "30"], output: output.path, marker: "attached")
        try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: 2000)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\((try? String(contentsOfFile: output.path + ".stderr", encoding: .utf8)) ?? "")")
        let ours = try String(contentsOf: output, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(ours == expected, "\(firstDifference(ours, expected) ?? "")")
    }

    /// docs/examples/opencv_consumer.py with Debian's OpenCV: every frame as a BGR array, against libswscale's
    /// conversion of FFmpeg's decode of the same stream (`ffmpeg -pix_fmt bgr24`): cv2.cvtColor rounds otherwise,
    /// by 3 steps at most and under 1 on average.
    @Test func theOpenCVExampleGivesEveryFrameAsBGR() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let stream = try generated("h264", size: "320x240", frames: 30, parameters: "bframes=2")
        let source = directory.appendingPathComponent("source.h264")
        try Data(stream).write(to: source)
        let reference = [UInt8](try runChecked("ffmpeg", ["-v", "error", "-i", source.path, "-pix_fmt", "bgr24", "-f", "rawvideo", "-"]).standardOutput)
        let daemon = try DaemonProcess(label: "opencv", settings: ["max_width": "320", "max_height": "240", "slots": "40"])
        let output = directory.appendingPathComponent("frames.bgr")
        let example = TestEnvironment.repositoryRoot.appendingPathComponent("docs/examples/opencv_consumer.py").path
        let process = try startReader("/usr/bin/python3", [example, daemon.name, "--frames", "30", "--timeout", "60"],
                                      output: output.path, marker: "attached",
                                      environment: ["PYTHONPATH": TestEnvironment.repositoryRoot.appendingPathComponent("python").path])
        try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: 2000)
        process.waitUntilExit()
        let said = (try? String(contentsOfFile: output.path + ".stderr", encoding: .utf8)) ?? ""
        #expect(process.terminationStatus == 0, "\(said)")
        #expect(said.contains("OpenCV 4.") && said.contains("frame 30: 320x240"), "\(said)")
        let ours = [UInt8](try Data(contentsOf: output))
        #expect(ours.count == reference.count && reference.count == 30 * 320 * 240 * 3, "\(ours.count) of \(reference.count) bytes")
        guard ours.count == reference.count else { return }
        var largest = 0
        var total = 0
        for index in ours.indices {
            let difference = abs(Int(ours[index]) - Int(reference[index]))
            largest = max(largest, difference)
            total += difference
        }
        #expect(largest <= 3 && Double(total) / Double(ours.count) < 1, "largest \(largest), mean \(Double(total) / Double(ours.count))")
    }

    @Test func thePythonReaderReadsBitExact() throws {
        let script = pythonReader
        try expectReaderBitExact(label: "python") { daemon, output in
            try startReader("/usr/bin/python3", [script, daemon.name, "--frames", "30"], output: output.path, marker: "attached")
        }
    }

    /// Consumers often start before the daemon (socket activation starts it at the first connection): `cat`, the
    /// Python reader, the C example and `FrameStream` all started before the daemon wait for its ring, then read
    /// every frame bit-exact. A ring that never comes is a timeout (exit status 2), not a usage error.
    @Test func everyConsumerWaitsForARingThatIsNotThereYet() async throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let stream = try generated("h264", size: "320x240", frames: 10, parameters: "bframes=2")
        let reference = try referenceMD5s(stream, facts: StreamFacts(stream), directory: directory)
        let daemon = try DaemonProcess(label: "late", settings: [
            "max_width": "320", "max_height": "240", "slots": "40", "output": "\"native\"",
        ], start: false)
        let root = TestEnvironment.repositoryRoot
        let binary = directory.appendingPathComponent("consumer").path
        try runChecked("cc", ["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2",
                              "-I", root.appendingPathComponent("Sources/CFrameRing/include").path,
                              root.appendingPathComponent("docs/examples/consumer.c").path, "-o", binary])
        // (label, executable, arguments, what it says once attached)
        let readers: [(String, String, [String], String)] = [
            ("cat", tool("streamrecvctl"), ["cat", daemon.name, "--frames", "10", "--format", "raw", "--timeout", "60"], "reading"),
            ("python", "/usr/bin/python3", [pythonReader, daemon.name, "--frames", "10", "--timeout", "60"], "attached"),
            // 60 s as for the others: the readers attach long before the test sends (seconds on a loaded CI machine).
            ("c", binary, [daemon.name, "10", "60"], "attached"),
        ]
        var processes: [(String, Process, URL)] = []
        for (label, executable, arguments, _) in readers {
            let output = directory.appendingPathComponent("\(label).yuv")
            processes.append((label, try startReader(executable, arguments, output: output.path, marker: "waiting for"), output))
        }
        let name = daemon.name
        let swiftAttached = ManagedFlag()
        let swift = Task {
            let stream = try await FrameStream.waitingForRing(stream: name, timeout: .seconds(60), ringTimeout: .seconds(60))
            var frames = stream.makeAsyncIterator()
            swiftAttached.set()
            var pixels: [[UInt8]] = []
            while pixels.count < 10, let frame = try await frames.next() {
                pixels.append(PlanarConversion.planar(frame.pixels, layout: frame.info.layout))
            }
            return pixels
        }
        try await Task.sleep(for: .milliseconds(300))
        try daemon.start()
        // Each reader starts with the next frame published: the frames are sent once all of them are attached.
        let deadline = ContinuousClock.now + .seconds(30)
        for ((label, _, output), marker) in zip(processes, readers.map(\.3)) {
            while !((try? String(contentsOfFile: output.path + ".stderr", encoding: .utf8))?.contains(marker) ?? false) {
                guard ContinuousClock.now < deadline else { throw HarnessError(description: "\(label) did not attach") }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        while !swiftAttached.isSet {
            guard ContinuousClock.now < deadline else { throw HarnessError(description: "FrameStream did not attach") }
            try await Task.sleep(for: .milliseconds(20))
        }
        try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: 2000)
        for (label, process, output) in processes {
            process.waitUntilExit()
            let errors = (try? String(contentsOfFile: output.path + ".stderr", encoding: .utf8)) ?? ""
            #expect(process.terminationStatus == 0, "\(label): \(errors)")
            let ours = try ffmpegMD5s(output.path, format: "rawvideo", extra: ["-pix_fmt", "yuv420p", "-video_size", "320x240"])
            #expect(firstDifference(ours, reference) == nil, "\(label): \(firstDifference(ours, reference) ?? "")")
        }
        let swiftFrames = try await swift.value
        let file = directory.appendingPathComponent("s.h264")
        try Data(stream).write(to: file)
        #expect(swiftFrames == (try referenceFrames(file.path, frameBytes: 320 * 240 * 3 / 2)), "FrameStream")

        let absent = try runProcess(tool("streamrecvctl"), ["cat", "absent-\(getpid())", "--timeout", "0.3"])
        #expect(absent.status == 2 && absent.standardError.contains("did not appear within 0.3 s"), "\(absent.standardError)")
        let python = try runProcess("/usr/bin/python3", [pythonReader, "absent-\(getpid())", "--timeout", "0.3"])
        #expect(python.status == 2, "\(python.standardError)")
    }
}

/// The Swift library consumers use: `FrameStream` as an async sequence, and zero-copy access with `withFrame`.
@Suite(.serialized) struct SwiftReaderTests {
    @Test func frameStreamReadsBitExactAndZeroCopyAccessAgrees() async throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let stream = try generated("h264", size: "320x240", frames: 30, parameters: "bframes=2")
        let file = directory.appendingPathComponent("s.h264")
        try Data(stream).write(to: file)
        let reference = try referenceFrames(file.path, frameBytes: 320 * 240 * 3 / 2)
        let daemon = try DaemonProcess(label: "swiftreader", settings: [
            "max_width": "320", "max_height": "240", "slots": "40", "output": "\"native\"",
        ])
        let frames = try FrameStream(stream: daemon.name, timeout: .seconds(20))
        let port = daemon.port
        let sender = Thread { try? Sender(port: port).sendPaced(stream, pauseMicroseconds: 2000) }
        sender.start()
        var received: [FrameStream.Frame] = []
        for try await frame in frames {
            received.append(frame)
            if received.count == 30 { break }
        }
        #expect(received.map { PlanarConversion.planar($0.pixels, layout: $0.info.layout) } == reference)
        #expect(received.allSatisfy { $0.lappedBefore == 0 })
        let last = try #require(received.last).info.sequence
        let outcome = frames.reader.withFrame(sequence: last) { info, bytes in
            PlanarConversion.planar(Array(bytes), layout: info.layout)
        }
        guard case .frame(_, let pixels) = outcome else {
            Issue.record("withFrame: \(outcome)")
            return
        }
        #expect(pixels == reference.last)
        guard case .notYetPublished = frames.reader.withFrame(sequence: last + 1, { _, _ in () }) else {
            Issue.record("a frame after the last one cannot be there")
            return
        }
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
