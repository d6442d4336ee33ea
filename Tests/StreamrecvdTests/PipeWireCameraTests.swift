import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

/// `streamrecvctl camera`: a stream as a PipeWire camera, read by pipewiresrc and by a consumer written against
/// libpipewire, in a PipeWire + WirePlumber session the test starts.
@Suite(.serialized) struct PipeWireCameraTests {
    static let readerScript = TestEnvironment.repositoryRoot.appendingPathComponent("scripts/pipewire-camera-reader.py").path

    /// scripts/pipewire-camera-consumer.c, built for this test.
    static func buildConsumer(in directory: URL) throws -> String {
        let binary = directory.appendingPathComponent("pipewire-camera-consumer").path
        let flags = try runChecked("pkg-config", ["--cflags", "--libs", "libpipewire-0.3"]).text
            .split(whereSeparator: \.isWhitespace).map(String.init)
        try runChecked("cc", ["-std=gnu11", "-O2", "-Wall", "-Werror",
                              TestEnvironment.repositoryRoot.appendingPathComponent("scripts/pipewire-camera-consumer.c").path,
                              "-o", binary] + flags + ["-lcrypto"])
        return binary
    }

    /// A daemon whose ring already has `warmUp`'s frames (the camera's node shows once it knows the format), and
    /// `streamrecvctl camera` on it in `session`, offering 320x240 NV12.
    static func daemonAndCamera(label: String, warmUp: String, cameraArguments: [String] = [], session: PipeWireSession,
                                directory: URL) throws -> (DaemonProcess, ChildProcess) {
        let daemon = try DaemonProcess(label: label, settings: ["max_width": "320", "max_height": "240", "slots": "16"])
        try runChecked(tool("streamrecvctl"), ["send", warmUp, "tcp://127.0.0.1:\(daemon.port)", "--rate", "200"])
        let camera = try ChildProcess(tool("streamrecvctl"), ["camera", daemon.name] + cameraArguments,
                                      environment: session.environment, directory: directory, label: "camera")
        #expect(camera.waitFor(timeout: 20) { camera.errors.contains("offering 320x240 NV12") }, "\(camera.errors)")
        return (daemon, camera)
    }

    /// Frames a reader printed, one JSON object per line.
    static func frames(_ output: String) -> [[String: Any]] {
        output.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.filter { $0["md5"] != nil }
    }

    /// Waits until `node` has a link to a consumer.
    static func waitForLink(_ session: PipeWireSession, node: String, timeout: Double = 20) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let links = try? session.run("pw-link", ["-l"]).text, links.contains("\(node):") && links.contains("|->") {
                return true
            }
            usleep(50_000)
        }
        return false
    }

    /// The node is named after the stream and is a Video/Source with the stream's format; pipewiresrc, linked by
    /// WirePlumber, gets every frame of a paced stream in order and bit-exact against FFmpeg.
    @Test func pipewiresrcGetsEveryFrameBitExact() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let session = try PipeWireSession(directory: directory)
        let clip = try GeneratedStreams.encode(codec: "h264", size: "320x240", frames: 60, in: directory, name: "clip.h264").path
        let reference = try ffmpegNV12MD5s(clip)
        // A first pass gives the ring its format: the node shows once the camera knows what it offers.
        let (daemon, camera) = try Self.daemonAndCamera(label: "pwcam", warmUp: clip, session: session, directory: directory)
        let node = "streamrecv-\(daemon.name)"
        var properties: [String: Any]?
        _ = camera.waitFor(timeout: 10) {
            properties = (try? session.nodes())?.first { $0["node.name"] as? String == node }
            return properties != nil
        }
        #expect(properties?["media.class"] as? String == "Video/Source", "\(String(describing: properties))")
        #expect(properties?["node.description"] as? String == "streamrecv \(daemon.name)")

        let reader = try ChildProcess("/usr/bin/python3", [Self.readerScript, node, "--frames", "60", "--seconds", "60"],
                                      environment: session.environment, directory: directory, label: "reader")
        // Linked, settled on the format, buffers made: the camera says so once frames can go.
        #expect(camera.waitFor(timeout: 20) { camera.errors.contains("consumers linked: 320x240") }, "\(reader.errors.suffix(1500))")
        try runChecked(tool("streamrecvctl"), ["send", clip, "tcp://127.0.0.1:\(daemon.port)", "--rate", "30"])
        #expect(reader.waitFor(timeout: 60) { !reader.process.isRunning }, "\(reader.errors.suffix(1500))")
        let frames = Self.frames(reader.output)
        let difference = firstDifference(frames.compactMap { $0["md5"] as? String }, reference)
        #expect(difference == nil, "\(difference ?? "")\n\(camera.errors.suffix(1500))")
        #expect(Set(frames.map { "\($0["format"] ?? "")" }) == ["NV12"])
        #expect(camera.stop() == 0)
        #expect(camera.errors.contains("sent 60 frames"), "\(camera.errors)")
    }

    /// One consumer stays linked to one node while the stream gets smaller, larger again, and the daemon restarts:
    /// each change renegotiates, and every frame comes through bit-exact with its own size.
    @Test func aConsumerFollowsSizeChangesAndADaemonRestart() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let session = try PipeWireSession(directory: directory)
        let consumer = try Self.buildConsumer(in: directory)
        let large = try GeneratedStreams.encode(codec: "h264", size: "320x240", frames: 30, in: directory, name: "large.h264").path
        let small = try GeneratedStreams.encode(codec: "h264", size: "160x96", frames: 30, in: directory, name: "small.h264").path
        let both = directory.appendingPathComponent("both.h264")
        try (try Data(contentsOf: URL(fileURLWithPath: large)) + Data(contentsOf: URL(fileURLWithPath: small))).write(to: both)
        let reference = try ffmpegNV12MD5s(large) + ffmpegNV12MD5s(small) + ffmpegNV12MD5s(large)
        let (daemon, camera) = try Self.daemonAndCamera(label: "pwcamsize", warmUp: large, cameraArguments: ["--rate", "30"],
                                                         session: session, directory: directory)
        let node = "streamrecv-\(daemon.name)"
        let reader = try ChildProcess(consumer, [node, "90", "90"], environment: session.environment,
                                      directory: directory, label: "consumer")
        #expect(camera.waitFor(timeout: 20) { camera.errors.contains("consumers linked: 320x240") }, "\(reader.errors.suffix(1500))")

        try runChecked(tool("streamrecvctl"), ["send", both.path, "tcp://127.0.0.1:\(daemon.port)", "--rate", "30"])
        #expect(reader.waitFor(timeout: 30) { Self.frames(reader.output).count >= 60 }, "\(reader.errors.suffix(1500))")
        #expect(daemon.stop() == 0)
        usleep(300_000)
        #expect(camera.process.isRunning, "the camera waits while the daemon is away")
        try daemon.start()
        try runChecked(tool("streamrecvctl"), ["send", large, "tcp://127.0.0.1:\(daemon.port)", "--rate", "30"])
        #expect(reader.waitFor(timeout: 60) { !reader.process.isRunning }, "\(reader.errors.suffix(1500))")

        let frames = Self.frames(reader.output)
        let difference = firstDifference(frames.compactMap { $0["md5"] as? String }, reference)
        #expect(difference == nil, "\(difference ?? "")\n\(camera.errors.suffix(2000))\n\(reader.errors.suffix(1000))")
        let sizes = frames.map { "\($0["width"] ?? 0)x\($0["height"] ?? 0)" }
        #expect(sizes == Array(repeating: "320x240", count: 30) + Array(repeating: "160x96", count: 30)
                + Array(repeating: "320x240", count: 30), "\(sizes)")
        #expect(frames.allSatisfy { "\($0["rate"] ?? "")" == "30/1" })
        // The header metadata carries the ring's sequence numbers, and marks as discontinuities
        // (SPA_META_HEADER_FLAG_DISCONT) the first frame, the first of the new size (a new decoder) and the first
        // after the restart.
        let flags = frames.map { ($0["flags"] as? Int) ?? 0 }
        #expect(flags.indices.filter { flags[$0] & 1 == 1 } == [0, 30, 60], "\(flags)")
        let sequences = frames.map { ($0["seq"] as? Int) ?? 0 }
        #expect(sequences.count == 90 && zip(sequences[1..<60], sequences[0..<59]).allSatisfy { $0 == $1 + 1 }, "\(sequences)")
        #expect(camera.stop() == 0)
        #expect(camera.errors.contains("sent 90 frames"), "\(camera.errors)")
    }

    /// What a person would write without the camera, `streamrecvsrc ! pipewiresink`, runs too: with the sink's
    /// pool activated by GStreamer's default allocation (which the element never used), pipewiresink died of
    /// SIGSEGV on its first frame. A libpipewire consumer gets the frames bit-exact.
    @Test func streamrecvsrcIntoPipewiresinkRuns() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let session = try PipeWireSession(directory: directory)
        let consumer = try Self.buildConsumer(in: directory)
        let clip = try GeneratedStreams.encode(codec: "h264", size: "320x240", frames: 60, in: directory, name: "clip.h264").path
        let reference = try ffmpegNV12MD5s(clip)
        let daemon = try DaemonProcess(label: "pwsink", settings: ["max_width": "320", "max_height": "240", "slots": "16"])
        try runChecked(tool("streamrecvctl"), ["send", clip, "tcp://127.0.0.1:\(daemon.port)", "--rate", "200"])
        let node = "gst-\(daemon.name)"
        let gst = try GstLaunch("streamrecvsrc stream=\(daemon.name) mode=newest ! pipewiresink mode=provide "
                                + "stream-properties=p,media.class=Video/Source,node.name=\(node)",
                                directory: directory, environment: session.environment)
        #expect(gst.waitFor(timeout: 20) { (try? session.nodes().contains { $0["node.name"] as? String == node }) == true },
                "\(gst.errors.suffix(1500))")
        let reader = try ChildProcess(consumer, [node, "-1", "60"], environment: session.environment,
                                      directory: directory, label: "consumer")
        #expect(Self.waitForLink(session, node: node), "\(reader.errors.suffix(1500))")
        try runChecked(tool("streamrecvctl"), ["send", clip, "tcp://127.0.0.1:\(daemon.port)", "--rate", "30"])
        #expect(reader.waitFor(timeout: 30) { Self.frames(reader.output).count >= 55 }, "\(gst.errors.suffix(1500))")
        usleep(500_000)
        #expect(gst.process.isRunning, "\(gst.errors.suffix(1500))")
        // Newest mode: every frame while pipewiresink keeps up, in order, each one of FFmpeg's.
        let positions = Self.frames(reader.output).compactMap { $0["md5"] as? String }.map { reference.firstIndex(of: $0) }
        #expect(positions.allSatisfy { $0 != nil } && zip(positions, positions.dropFirst()).allSatisfy { $0! < $1! },
                "\(positions)")
        gst.process.interrupt()
        #expect(gst.finish(timeout: 10) == 0, "\(gst.errors.suffix(1500))")
    }

    /// The one-block layout of every format PipeWire has a name for is GStreamer's (22 470 formats and sizes, odd
    /// ones included), and the frame rate read from arrival times is the nearest broadcast rate
    /// (scripts/camera-format-check.c, built here against pipewire/camera-format.c and GStreamer).
    @Test func layoutsAreGStreamersAndRatesAreRead() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let root = TestEnvironment.repositoryRoot
        let binary = directory.appendingPathComponent("camera-format-check").path
        let flags = try runChecked("pkg-config", ["--cflags", "--libs", "libpipewire-0.3", "gstreamer-video-1.0"]).text
            .split(whereSeparator: \.isWhitespace).map(String.init)
        try runChecked("cc", ["-std=gnu11", "-O1", "-Wall", "-Werror",
                              root.appendingPathComponent("scripts/camera-format-check.c").path,
                              root.appendingPathComponent("pipewire/camera-format.c").path,
                              "-I", root.appendingPathComponent("pipewire").path,
                              "-I", root.appendingPathComponent("Sources/CFrameRing/include").path, "-o", binary] + flags)
        let result = try runProcess(binary, [])
        #expect(result.status == 0 && result.text.contains("0 differ from GStreamer's"), "\(result.text)")
    }

    /// PipeWire going away under a running camera ends it with status 1 (its user unit starts it again with PipeWire).
    @Test func whenPipeWireGoesAwayItSaysSoAndExits1() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let session = try PipeWireSession(directory: directory)
        let clip = try GeneratedStreams.encode(codec: "h264", size: "320x240", frames: 10, in: directory, name: "clip.h264").path
        let (_, camera) = try Self.daemonAndCamera(label: "pwgone", warmUp: clip, session: session, directory: directory)
        session.stopPipeWire()
        #expect(camera.waitFor(timeout: 10) { !camera.process.isRunning }, "\(camera.errors)")
        #expect(camera.stop() == 1 && camera.errors.contains("PipeWire closed the connection"), "\(camera.errors)")
    }

    /// Without PipeWire the camera says so and exits 1; a bad option is a usage error (2).
    @Test func withoutPipeWireItSaysSoAndExits() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let alone = try runProcess("/usr/bin/env", ["XDG_RUNTIME_DIR=\(directory.path)", "PIPEWIRE_REMOTE=pipewire-0",
                                                    tool("streamrecvctl"), "camera", "desk"])
        #expect(alone.status == 1 && alone.standardError.contains("cannot reach PipeWire"), "\(alone.standardError)")
        let rate = try runProcess(tool("streamrecvctl"), ["camera", "desk", "--rate", "fast"])
        #expect(rate.status == 2 && rate.standardError.contains("--rate takes N or N/D"), "\(rate.standardError)")
        // A path is no stream name: streamrecvctl refuses it itself, as a usage error (ArgumentParser's 64).
        let name = try runProcess(tool("streamrecvctl"), ["camera", "../etc/passwd"])
        #expect(name.status == 64 && name.standardError.contains("plain name under /dev/shm"), "\(name.status) \(name.standardError)")
    }
}
