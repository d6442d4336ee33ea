import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

/// `gst-launch-1.0` with the streamrecvsrc plugin this tree built (`make gst-plugin`), as its own process
/// (`ChildProcess`: stoppable as a user stops it), with a registry of its own. `-v -m`: caps, identity's per-buffer
/// lines and bus messages go to `output`.
final class GstLaunch {
    static let pluginFolder = TestEnvironment.repositoryRoot.appendingPathComponent(".build/gstreamer").path
    private let child: ChildProcess

    /// - Parameter environment: added to the plugin path, registry and debug settings (e.g. a PipeWire session's).
    init(_ pipeline: String, directory: URL, environment: [String: String] = [:]) throws {
        guard FileManager.default.fileExists(atPath: Self.pluginFolder + "/libgststreamrecv.so") else {
            throw HarnessError(description: "\(Self.pluginFolder)/libgststreamrecv.so is missing: run make gst-plugin")
        }
        let settings = ["GST_PLUGIN_PATH": Self.pluginFolder,
                        "GST_REGISTRY": directory.appendingPathComponent("registry-\(UUID().uuidString.prefix(8)).bin").path,
                        "GST_DEBUG": "streamrecvsrc:4", "GST_DEBUG_NO_COLOR": "1"]
        child = try ChildProcess("/usr/bin/gst-launch-1.0", ["-v", "-m"] + pipeline.split(separator: " ").map(String.init),
                                 environment: settings.merging(environment) { $1 }, directory: directory, label: "gst")
    }

    var process: Process { child.process }
    var output: String { child.output }
    var errors: String { child.errors }

    /// Waits until the element has attached to its ring (it says so at INFO level), or the process ended.
    func waitUntilAttached(timeout: Double = 20) -> Bool {
        waitFor(timeout: timeout) { self.errors.contains("attached to") }
    }

    func waitFor(timeout: Double, _ condition: () -> Bool) -> Bool { child.waitFor(timeout: timeout, condition) }

    /// Waits for the exit (terminating the process after `timeout`); returns its status.
    func finish(timeout: Double = 30) -> Int32 {
        if !waitFor(timeout: timeout, { !self.process.isRunning }) { child.kill(signal: SIGKILL) }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Offset and flags of each buffer that `identity silent=false` reported, in order.
    var buffers: [(offset: UInt64, flags: String)] {
        output.split(separator: "\n").filter { $0.contains("last-message = chain") }.compactMap { line in
            guard let offset = line.firstRange(of: "offset: "), let flags = line.firstRange(of: "flags: "),
                  let meta = line.firstRange(of: ", meta") else { return nil }
            let number = line[offset.upperBound...].prefix { $0.isNumber }
            return (UInt64(number) ?? 0, String(line[flags.upperBound..<meta.lowerBound]))
        }
    }

    /// The caps the element set, in order.
    var caps: [String] {
        output.split(separator: "\n").filter { $0.contains("GstStreamrecvSrc") && $0.contains("caps = ") }.map(String.init)
    }
}

/// The md5 of each frame of `path` decoded by FFmpeg and converted to NV12 (lossless from 4:2:0: a repacking).
func ffmpegNV12MD5s(_ path: String) throws -> [String] { try ffmpegRawMD5s(path, pixelFormat: "nv12") }

/// The md5 of each frame of `path` decoded by FFmpeg in `pixelFormat` (a repacking of the decoder's format).
func ffmpegRawMD5s(_ path: String, pixelFormat: String) throws -> [String] {
    let result = try runChecked("ffmpeg", ["-v", "error", "-i", path, "-pix_fmt", pixelFormat, "-f", "framemd5", "-"])
    return result.text.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { $0.split(separator: ",").last }
        .map { String($0).trimmingCharacters(in: .whitespaces) }
}

/// The md5 of each NV12 frame of `size` in a raw file.
func rawNV12MD5s(_ path: String, size: String) throws -> [String] {
    try ffmpegMD5s(path, format: "rawvideo", extra: ["-pix_fmt", "nv12", "-video_size", size])
}

func writeClip(_ bytes: [UInt8], _ name: String, in directory: URL) throws -> String {
    let path = directory.appendingPathComponent(name).path
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    return path
}

@Suite(.serialized) struct GStreamerSourceTests {
    /// Every frame, bit-exact, with caps from the slot: H.264 with B-frames (NV12), H.265 (NV12), 10-bit H.265
    /// (P010, GStreamer's P010_10LE).
    @Test(arguments: [("h264", "yuv420p", "nv12", "NV12"), ("h265", "yuv420p", "nv12", "NV12"),
                      ("h265", "yuv420p10le", "p010le", "P010_10LE")])
    func everyFrameReachesGStreamerBitExact(codec: String, source: String, pixelFormat: String, caps format: String) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let clip = try GeneratedStreams.encode(codec: codec, size: "320x240", frames: 40, pixelFormat: source,
                                               encoderParameters: codec == "h264" ? "bframes=2" : "", in: directory,
                                               name: "clip.\(codec)").path
        let reference = try ffmpegRawMD5s(clip, pixelFormat: pixelFormat)
        // More slots than frames: gst-launch printing a line per buffer must not be lapped when the machine is loaded.
        let daemon = try DaemonProcess(label: "gst\(codec)\(pixelFormat)", settings: ["max_width": "320", "max_height": "240", "slots": "48"])
        let raw = directory.appendingPathComponent("out.raw").path
        let gst = try GstLaunch("streamrecvsrc stream=\(daemon.name) num-buffers=40 ! identity silent=false ! filesink location=\(raw)",
                                directory: directory)
        #expect(gst.waitUntilAttached(), "\(gst.errors)")
        try runChecked(tool("streamrecvctl"), ["send", clip, "tcp://127.0.0.1:\(daemon.port)", "--rate", "200"])
        #expect(gst.finish() == 0, "\(gst.errors.suffix(2000))")
        let ours = try ffmpegMD5s(raw, format: "rawvideo", extra: ["-pix_fmt", pixelFormat, "-video_size", "320x240"])
        let difference = firstDifference(ours, reference)
        #expect(difference == nil, "\(difference ?? "")")
        #expect(gst.caps.count == 1, "\(gst.caps)")
        let caps = gst.caps.first ?? ""
        for field in ["format=(string)\(format)", "width=(int)320", "height=(int)240", "pixel-aspect-ratio=(fraction)1/1",
                      "chroma-site=(string)mpeg2", "framerate=(fraction)0/1", "colorimetry="] {
            #expect(caps.contains(field), "\(field) in \(caps)")
        }
        // OFFSET is the frame's sequence number: 1…40 in order; only the first is a discontinuity.
        let buffers = gst.buffers
        #expect(buffers.map(\.offset) == Array(1...40), "\(buffers.map(\.offset))")
        #expect(buffers.filter { $0.flags.contains("discont") }.map(\.offset) == [1])
    }

    /// A larger picture moves the stream to a new ring object: the element follows it and sends new caps first.
    @Test func aLargerPictureSendsNewCapsAndEveryFrame() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let small = try generated("h264", size: "160x96", frames: 10)
        let large = try generated("h264", size: "320x240", frames: 10)
        let reference = try ffmpegNV12MD5s(try writeClip(small, "small.h264", in: directory))
            + ffmpegNV12MD5s(try writeClip(large, "large.h264", in: directory))
        let daemon = try DaemonProcess(label: "gstcaps", settings: ["max_width": "320", "max_height": "240", "slots": "16"])
        let raw = directory.appendingPathComponent("out.nv12").path
        let gst = try GstLaunch("streamrecvsrc stream=\(daemon.name) num-buffers=20 ! identity silent=false ! filesink location=\(raw)",
                                directory: directory)
        #expect(gst.waitUntilAttached(), "\(gst.errors)")
        try Sender(port: daemon.port).sendPaced(small + large, pauseMicroseconds: 2000)
        #expect(gst.finish() == 0, "\(gst.errors.suffix(2000))")
        #expect(gst.caps.count == 2 && gst.caps.first?.contains("width=(int)160") == true
                && gst.caps.last?.contains("width=(int)320") == true, "\(gst.caps)")
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: raw)))
        let smallBytes = 10 * 160 * 96 * 3 / 2
        #expect(bytes.count == smallBytes + 10 * 320 * 240 * 3 / 2)
        let first = try writeClip(Array(bytes[0..<min(smallBytes, bytes.count)]), "a.nv12", in: directory)
        let second = try writeClip(Array(bytes[min(smallBytes, bytes.count)...]), "b.nv12", in: directory)
        let ours = try rawNV12MD5s(first, size: "160x96") + rawNV12MD5s(second, size: "320x240")
        let difference = firstDifference(ours, reference)
        #expect(difference == nil, "\(difference ?? "")")
    }

    /// The daemon stops and starts again: the element waits, then goes on, the first frame after marked DISCONT.
    @Test func itSurvivesADaemonRestart() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let clip = try writeClip(try generated("h264", size: "320x240", frames: 10), "clip.h264", in: directory)
        let reference = try ffmpegNV12MD5s(clip)
        let daemon = try DaemonProcess(label: "gstrestart", settings: ["max_width": "320", "max_height": "240", "slots": "16"])
        let raw = directory.appendingPathComponent("out.nv12").path
        let gst = try GstLaunch("streamrecvsrc stream=\(daemon.name) num-buffers=20 ! identity silent=false ! filesink location=\(raw)",
                                directory: directory)
        #expect(gst.waitUntilAttached(), "\(gst.errors)")
        try runChecked(tool("streamrecvctl"), ["send", clip, "tcp://127.0.0.1:\(daemon.port)", "--rate", "200"])
        #expect(gst.waitFor(timeout: 20) { gst.buffers.count == 10 }, "\(gst.errors.suffix(1500))")
        #expect(daemon.stop() == 0)
        usleep(300_000)
        #expect(gst.process.isRunning, "the element must keep waiting while the daemon is away")
        try daemon.start()
        try runChecked(tool("streamrecvctl"), ["send", clip, "tcp://127.0.0.1:\(daemon.port)", "--rate", "200"])
        #expect(gst.finish() == 0, "\(gst.errors.suffix(2000))\n\(daemon.log.suffix(1500))")
        let difference = firstDifference(try rawNV12MD5s(raw, size: "320x240"), reference + reference)
        #expect(difference == nil, "\(difference ?? "")")
        let buffers = gst.buffers
        #expect(buffers.count == 20 && buffers[10].flags.contains("discont"), "\(buffers)")
    }

    /// A reader slower than the stream in every-frame mode: overwritten frames are reported as a QoS message, and
    /// what it does deliver is bit-exact. In newest mode the same reader gets the newest frame and no QoS.
    @Test func aSlowReaderGetsQoSInEveryFrameModeAndTheNewestFrameInNewestMode() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let clip = try writeClip(try generated("h264", size: "160x96", frames: 30), "clip.h264", in: directory)
        let reference = try ffmpegNV12MD5s(clip)
        let daemon = try DaemonProcess(label: "gstlap", settings: ["max_width": "160", "max_height": "96", "slots": "4"])
        let raw = directory.appendingPathComponent("every.nv12").path
        // 400 ms per buffer downstream; 30 frames arrive within about 100 ms into 4 slots.
        let slow = try GstLaunch("streamrecvsrc stream=\(daemon.name) num-buffers=5 ! identity silent=false sleep-time=400000 ! filesink location=\(raw)",
                                 directory: directory)
        #expect(slow.waitUntilAttached(), "\(slow.errors)")
        try runChecked(tool("streamrecvctl"), ["send", clip, "tcp://127.0.0.1:\(daemon.port)", "--rate", "300"])
        #expect(slow.finish() == 0, "\(slow.errors.suffix(2000))")
        let qos = slow.output.split(separator: "\n").filter { $0.contains("(qos)") }
        #expect(!qos.isEmpty && qos.allSatisfy { $0.contains("dropped=(guint64)") }, "\(slow.output.suffix(2000))")
        let offsets = slow.buffers.map(\.offset)
        #expect(offsets.count == 5 && offsets == offsets.sorted() && offsets.last == 30, "\(offsets)")
        let ours = try rawNV12MD5s(raw, size: "160x96")
        #expect(ours == offsets.map { reference[Int($0) - 1] }, "each delivered frame is the frame its offset names")

        // Newest mode, started after all 30: the newest frame at once.
        let newest = directory.appendingPathComponent("newest.nv12").path
        let latest = try GstLaunch("streamrecvsrc stream=\(daemon.name) mode=newest num-buffers=1 ! identity silent=false ! filesink location=\(newest)",
                                   directory: directory)
        #expect(latest.finish() == 0, "\(latest.errors.suffix(2000))")
        #expect(latest.buffers.map(\.offset) == [30], "\(latest.buffers)")
        #expect(try rawNV12MD5s(newest, size: "160x96") == [reference[29]])
        #expect(!latest.output.contains("(qos)"))
    }

    /// The ring truncated under the element, mid-stream and idle (as OperationsTests does to the other readers):
    /// the SIGBUS is caught inside its copy, it attaches to the ring the daemon re-creates, and every frame it
    /// delivers is the frame its offset names.
    @Test func aTruncatedRingIsFollowedNotACrash() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let stream = try generated("h264", size: "320x240", frames: 50, parameters: "keyint=10")
        let reference = try ffmpegNV12MD5s(try writeClip(stream, "clip.h264", in: directory))
        let daemon = try DaemonProcess(label: "gsttrunc", settings: ["max_width": "320", "max_height": "240", "slots": "16"])
        let path = "/dev/shm/\(daemon.shmName)"
        let raw = directory.appendingPathComponent("out.nv12").path
        let gst = try GstLaunch("streamrecvsrc stream=\(daemon.name) ! identity silent=false ! filesink location=\(raw)",
                                directory: directory)
        #expect(gst.waitUntilAttached(), "\(gst.errors)")
        let sender = try Sender(port: daemon.port)
        let offsets = StreamFacts(stream).accessUnitOffsets + [stream.count]
        try sender.send(stream[..<offsets[0]])
        for index in 0..<(offsets.count - 1) {
            if index == 25 { #expect(truncate(path, 0) == 0) }
            try sender.send(stream[offsets[index]..<offsets[index + 1]])
            usleep(40_000)
        }
        sender.close()
        #expect(daemon.waitUntilPublished(50))
        #expect(truncate(path, 0) == 0)
        try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: 40_000)
        #expect(daemon.waitUntilPublished(100))
        #expect(gst.waitFor(timeout: 20) { gst.buffers.last?.offset == 100 }, "\(gst.errors.suffix(2000))")
        #expect(gst.process.isRunning, "\(gst.output.suffix(1000))")
        gst.process.interrupt()
        #expect(gst.finish(timeout: 10) == 0, "\(gst.output.suffix(1000))")
        let buffers = gst.buffers
        // A truncation takes the frames that were in the shrunk object: some may be missed, none is wrong.
        #expect(buffers.count >= 60, "\(buffers.map(\.offset))")
        let ours = try rawNV12MD5s(raw, size: "320x240")
        #expect(ours.count == buffers.count)
        #expect(ours == buffers.map { reference[Int(($0.offset - 1) % 50)] }, "each frame is the one its offset names")
        #expect(gst.errors.contains("replaced or truncated"), "\(gst.errors.suffix(1500))")
    }

    /// Something that is not a ring under the name: a clear warning, and the element keeps waiting for the daemon.
    @Test func somethingElseUnderTheNameIsAWarningNotACrash() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let name = "streamrecv-gstjunk\(getpid())"
        let descriptor = shm_open("/" + name, O_CREAT | O_RDWR | O_TRUNC, 0o644)
        #expect(descriptor >= 0)
        defer { shm_unlink("/" + name) }
        let junk = [UInt8](repeating: 0x5a, count: 8192)
        _ = junk.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        let gst = try GstLaunch("streamrecvsrc shm=\(name) ! fakesink", directory: directory)
        #expect(gst.waitFor(timeout: 20) { gst.output.contains("is not a streamrecv ring") }, "\(gst.output)\n\(gst.errors)")
        #expect(gst.output.contains("no magic"), "\(gst.output.suffix(1000))")
        usleep(300_000)
        #expect(gst.process.isRunning)
        // Ctrl-C stops the pipeline while the element waits: its wait ends at unlock().
        gst.process.interrupt()
        #expect(gst.finish(timeout: 10) == 0, "\(gst.output.suffix(1000))")
        #expect(gst.output.contains("Freeing pipeline"), "\(gst.output.suffix(1000))")
    }

    /// A local user's forged slots (docs/reliability.md): a picture its planes do not cover (64x16 with one row) is
    /// an error naming why, where the element once passed the frame on with the rest of its buffer left from an
    /// earlier frame or the heap; a pixel aspect ratio no GstFraction holds is left out of the caps, where it once
    /// went out as -1/1.
    @Test(arguments: ["rows", "aspect"])
    func forgedSlotsAreRefusedOrLeftOut(forgery: String) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let name = "streamrecv-gstforged-\(forgery)-\(getpid())"
        try forgeRing(name)
        defer { unlink("/dev/shm/" + name) }
        let gst = try GstLaunch("streamrecvsrc shm=\(name) num-buffers=1 ! fakesink", directory: directory)
        #expect(gst.waitUntilAttached(), "\(gst.errors)")
        try publishForgedFrame(two: name) { _, slot in
            if forgery == "rows" { slot.pointee.plane_height.0 = 1 } else { (slot.pointee.sample_aspect_num, slot.pointee.sample_aspect_den) = (UInt32.max, 1) }
        }
        let status = gst.finish(timeout: 20)
        let said = gst.output + gst.errors
        if forgery == "rows" {
            #expect(status != 0 && said.contains("frame 2: planes that are not the ones its format and size make"), "\(status): \(said.suffix(2000))")
        } else {
            #expect(status == 0 && gst.caps.first?.contains("pixel-aspect-ratio=(fraction)1/1") == true && !said.contains("CRITICAL"),
                    "\(status): \(gst.caps) \(said.suffix(2000))")
        }
    }
}
