import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

private let viewerBinary = TestEnvironment.repositoryRoot.appendingPathComponent(".build/viewer/streamrecv-view").path

/// `streamrecvctl view`: the viewer window on an X server of the test's own (Xvfb, Mesa's llvmpipe for OpenGL),
/// its pixels read back through the X server (x11grab) and compared with FFmpeg's conversion of the same frame.
@Suite(.serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/Xvfb")
                                 && FileManager.default.isExecutableFile(atPath: "/usr/bin/xdotool")
                                 && FileManager.default.isExecutableFile(atPath: viewerBinary),
                             "needs xvfb, xdotool and `make viewer` (make test does both)"))
struct ViewerTests {
    /// A frame format to show: how the clip is encoded, what the daemon publishes, and how FFmpeg turns it into RGB.
    struct Case: CustomStringConvertible, Sendable {
        let published: String
        let codec: String
        let pixelFormat: String
        /// Colour tags written into the stream (-colorspace, -color_range).
        let tags: [String]
        let output: String
        /// FFmpeg's matrix and range for it (nil: RGB planes, no conversion).
        let matrix: String?
        let range: String
        var description: String { published }

        /// libswscale's conversion: bicubic chroma, interpolated for every pixel, accurately rounded.
        func filter(range: String) -> String {
            guard let matrix else { return "null" }
            return "scale=in_color_matrix=\(matrix):in_range=\(range):flags=bicubic+full_chroma_int+accurate_rnd"
        }
    }

    static let cases: [Case] = [
        Case(published: "NV12", codec: "h264", pixelFormat: "yuv420p", tags: ["-colorspace", "bt709", "-color_range", "tv"],
             output: "auto", matrix: "bt709", range: "tv"),
        Case(published: "I420", codec: "h264", pixelFormat: "yuv420p", tags: ["-colorspace", "smpte170m", "-color_range", "pc"],
             output: "native", matrix: "bt601", range: "pc"),
        Case(published: "P010", codec: "h265", pixelFormat: "yuv420p10le", tags: ["-colorspace", "bt2020nc", "-color_range", "tv"],
             output: "auto", matrix: "bt2020", range: "tv"),
        Case(published: "I420_10", codec: "h265", pixelFormat: "yuv420p10le", tags: ["-colorspace", "bt709", "-color_range", "tv"],
             output: "native", matrix: "bt709", range: "tv"),
        Case(published: "I422", codec: "h264", pixelFormat: "yuv422p", tags: ["-colorspace", "bt709", "-color_range", "tv"],
             output: "auto", matrix: "bt709", range: "tv"),
        Case(published: "Y444_12", codec: "h265", pixelFormat: "yuv444p12le", tags: ["-colorspace", "bt709", "-color_range", "pc"],
             output: "auto", matrix: "bt709", range: "pc"),
        Case(published: "GRAY8", codec: "h265", pixelFormat: "gray", tags: ["-color_range", "pc"], output: "auto",
             matrix: "bt709", range: "pc"),
        Case(published: "GRAY10", codec: "h265", pixelFormat: "gray10le", tags: ["-color_range", "tv"], output: "native",
             matrix: "bt709", range: "tv"),
        Case(published: "GBR", codec: "h265", pixelFormat: "gbrp", tags: [], output: "auto", matrix: nil, range: "pc"),
        Case(published: "GBR_10", codec: "h265", pixelFormat: "gbrp10le", tags: [], output: "native", matrix: nil, range: "pc"),
    ]

    static let size = (width: 320, height: 240)

    /// A clip of `frames` frames of testsrc2 in `c`'s format and colour.
    static func clip(_ c: Case, frames: Int, in directory: URL) throws -> String {
        let path = directory.appendingPathComponent("\(c.published).\(c.codec)").path
        try runChecked("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=\(size.width)x\(size.height):rate=25",
                                  "-frames:v", String(frames), "-pix_fmt", c.pixelFormat] + c.tags
                       + ["-c:v", c.codec == "h264" ? "libx264" : "libx265"]
                       + (c.codec == "h265" ? ["-x265-params", "log-level=error"] : [])
                       + ["-f", c.codec == "h264" ? "h264" : "hevc", path])
        return path
    }

    /// FFmpeg's RGB of the clip's last frame.
    static func referenceRGB(_ clip: String, filter: String) throws -> [UInt8] {
        let rgb = try runChecked("ffmpeg", ["-v", "error", "-i", clip, "-vf", "\(filter),format=rgb24", "-f", "rawvideo", "-"]).standardOutput
        return [UInt8](rgb.suffix(size.width * size.height * 3))
    }

    /// The viewer's frame log: one line per frame shown.
    struct Shown {
        let sequence: UInt64
        let published: UInt64
        let presented: UInt64
        let size: String
    }

    static func shown(_ path: String) -> [Shown] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count >= 5, let sequence = UInt64(fields[0]), let published = UInt64(fields[1]),
                  let presented = UInt64(fields[3]) else { return nil }
            return Shown(sequence: sequence, published: published, presented: presented, size: String(fields[4]))
        }
    }

    /// An X screen, a daemon, and `streamrecvctl view` on its stream writing its frame log, its window found.
    struct Session {
        let directory: URL
        let screen: XScreen
        let daemon: DaemonProcess
        let log: String
        let viewer: ChildProcess
        let window: String

        init(label: String, settings: [String: String] = [:], windowManager: Bool = false) throws {
            directory = try TestEnvironment.temporaryDirectory()
            screen = try XScreen(directory: directory, windowManager: windowManager)
            daemon = try DaemonProcess(label: label, settings: ["slots": "8"].merging(settings) { $1 })
            log = directory.appendingPathComponent("shown.log").path
            viewer = try ChildProcess(tool("streamrecvctl"), ["view", daemon.name, "--frame-log", log],
                                      environment: screen.environment, directory: daemon.directory, label: "view")
            guard let window = screen.window(titled: "streamrecv \(daemon.name)") else {
                throw HarnessError(description: "no window: \(viewer.errors)")
            }
            self.window = window
        }

        /// Sends `clip` and waits until the viewer has shown the ring's newest frame.
        func sendAndWait(_ clip: String) throws -> Bool { try ViewerTests.sendAndWait(clip, to: daemon, viewer: viewer, log: log) }
    }

    /// Sends `clip` and waits until the viewer has shown the ring's newest frame.
    static func sendAndWait(_ clip: String, to daemon: DaemonProcess, viewer: ChildProcess, log: String) throws -> Bool {
        try runChecked(tool("streamrecvctl"), ["send", clip, "tcp://127.0.0.1:\(daemon.port)", "--rate", "100"])
        var latest: UInt64 = 0
        return viewer.waitFor(timeout: 30) {
            latest = daemon.status?.latestSequence ?? 0
            return latest > 0 && shown(log).last?.sequence == latest && daemon.status?.state == .waiting
        }
    }

    /// Every pixel format the daemon publishes, tagged with its colour matrix and range, one after another on two
    /// streams (native and auto output) in the same two windows: each format's last frame on screen, read back
    /// through the X server, is FFmpeg's RGB of it (PSNR ≥ 33 dB, and ≥ 6 dB closer than with the other range).
    @Test(arguments: ["auto", "native"]) func everyFormatIsShownInItsOwnColours(output: String) throws {
        let session = try Session(label: "view\(output)", settings: ["output": "\"\(output)\""])
        let (directory, screen, daemon, log, viewer, window) =
            (session.directory, session.screen, session.daemon, session.log, session.viewer, session.window)
        for c in Self.cases where c.output == output {
            let clip = try Self.clip(c, frames: 10, in: directory)
            #expect(try Self.sendAndWait(clip, to: daemon, viewer: viewer, log: log), "\(c): \(viewer.errors)\n\(daemon.log.suffix(1500))")
            let reference = try Self.referenceRGB(clip, filter: c.filter(range: c.range))
            let grabbed = try screen.grab(window) { psnr($0.rgb, reference) >= 33 }
            #expect(grabbed.width == Self.size.width && grabbed.height == Self.size.height, "\(c): window \(grabbed.width)x\(grabbed.height)")
            let measured = psnr(grabbed.rgb, reference)
            // The same frame converted with the other range: what a viewer that ignored the slot's range would show.
            let wrong = c.matrix == nil ? 0 : psnr(grabbed.rgb, try Self.referenceRGB(clip, filter: c.filter(range: c.range == "tv" ? "pc" : "tv")))
            print("ViewerTests: \(c): PSNR \(String(format: "%.1f", measured)) dB against FFmpeg's RGB, \(String(format: "%.1f", wrong)) dB with the other range")
            #expect(measured >= 33 && measured >= wrong + 6, "\(c): \(measured) dB against FFmpeg's RGB, \(wrong) with the other range\n\(viewer.errors)")
            #expect(viewer.errors.contains("showing 320x240 \(c.published) ("), "\(c): \(viewer.errors)")
        }
        let sequences = Self.shown(log).map(\.sequence)
        #expect(sequences == sequences.sorted() && Set(sequences).count == sequences.count, "never an older frame: \(sequences)")
        viewer.kill(signal: SIGTERM)
        #expect(viewer.waitFor(timeout: 10) { !viewer.process.isRunning })
        #expect(!viewer.process.isRunning && viewer.process.terminationStatus == 0 && viewer.errors.contains("showed"), "\(viewer.errors)")
    }

    /// One viewer through 320x240 → 640x360 in one connection, then the daemon stopped (the window says so and
    /// keeps the last frame) and started again, then 320x240: the window takes each size, shows each part's last
    /// frame in FFmpeg's colours, and never a frame older than one it showed.
    @Test func itFollowsSizeChangesAndADaemonRestart() throws {
        let session = try Session(label: "viewrestart")
        let (directory, screen, daemon, log, viewer, window) =
            (session.directory, session.screen, session.daemon, session.log, session.viewer, session.window)
        let small = Case(published: "NV12", codec: "h264", pixelFormat: "yuv420p", tags: ["-colorspace", "bt709"], output: "auto",
                         matrix: "bt709", range: "tv")
        let smallClip = try Self.clip(small, frames: 10, in: directory)
        let largeClip = directory.appendingPathComponent("large.h264").path
        try runChecked("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25", "-frames:v", "10",
                                  "-pix_fmt", "yuv420p", "-colorspace", "bt709", "-c:v", "libx264", "-f", "h264", largeClip])
        let both = directory.appendingPathComponent("both.h264").path
        try (try Data(contentsOf: URL(fileURLWithPath: smallClip)) + Data(contentsOf: URL(fileURLWithPath: largeClip))).write(to: URL(fileURLWithPath: both))

        #expect(try Self.sendAndWait(both, to: daemon, viewer: viewer, log: log), "\(viewer.errors)\n\(daemon.log.suffix(1500))")
        let largeReference = [UInt8](try runChecked("ffmpeg", ["-v", "error", "-i", largeClip, "-vf", "\(small.filter(range: "tv")),format=rgb24",
                                                                "-f", "rawvideo", "-"]).standardOutput.suffix(640 * 360 * 3))
        var grabbed = try screen.grab(window) { psnr($0.rgb, largeReference) >= 33 }
        #expect(grabbed.width == 640 && grabbed.height == 360, "window \(grabbed.width)x\(grabbed.height)")
        #expect(psnr(grabbed.rgb, largeReference) >= 33, "640x360: \(psnr(grabbed.rgb, largeReference)) dB")
        #expect(Set(Self.shown(log).map(\.size)).isSuperset(of: ["320x240", "640x360"]), "\(Self.shown(log).map(\.size))")

        #expect(daemon.stop() == 0)
        #expect(viewer.waitFor(timeout: 10) { viewer.errors.contains("the daemon stopped the stream") }, "\(viewer.errors)")
        #expect(viewer.process.isRunning)
        try daemon.start()
        #expect(try Self.sendAndWait(smallClip, to: daemon, viewer: viewer, log: log), "\(viewer.errors)\n\(daemon.log.suffix(1500))")
        let smallReference = try Self.referenceRGB(smallClip, filter: small.filter(range: "tv"))
        grabbed = try screen.grab(window) { psnr($0.rgb, smallReference) >= 33 }
        #expect(grabbed.width == 320 && grabbed.height == 240, "window \(grabbed.width)x\(grabbed.height)")
        let measured = psnr(grabbed.rgb, smallReference)
        #expect(measured >= 33, "after the restart: \(measured) dB")
        let sequences = Self.shown(log).map(\.sequence)
        #expect(zip(sequences, sequences.dropFirst()).allSatisfy { $0 < $1 }, "never an older frame: \(sequences)")
        viewer.kill(signal: SIGTERM)
        #expect(viewer.waitFor(timeout: 10) { !viewer.process.isRunning } && !viewer.process.isRunning
                && viewer.process.terminationStatus == 0, "\(viewer.errors)")
    }

    /// A stream that asks to be shown turned a quarter anticlockwise (an H.264 display orientation SEI, inserted by
    /// FFmpeg's h264_metadata): the window is 240x320 and shows FFmpeg's RGB of the frame turned that way (a
    /// quarter turn the wrong way measures 1.3 dB).
    @Test func aTurnedStreamIsShownTurned() throws {
        let session = try Session(label: "viewturn")
        let (directory, screen, daemon, log, viewer, window) =
            (session.directory, session.screen, session.daemon, session.log, session.viewer, session.window)
        let c = Self.cases[0]
        let upright = try Self.clip(c, frames: 10, in: directory)
        let turned = directory.appendingPathComponent("turned.h264").path
        try runChecked("ffmpeg", ["-v", "error", "-y", "-i", upright, "-c", "copy", "-bsf:v",
                                  "h264_metadata=display_orientation=insert:rotate=90", "-f", "h264", turned])
        #expect(try Self.sendAndWait(turned, to: daemon, viewer: viewer, log: log), "\(viewer.errors)\n\(daemon.log.suffix(1500))")
        // FFmpeg's command line turns a picture only by a container's display matrix, not by a raw stream's SEI
        // (ffprobe reads it: rotation=90, anticlockwise): turned here as that says.
        let reference = [UInt8](try runChecked("ffmpeg", ["-v", "error", "-noautorotate", "-i", turned, "-vf",
                                                          "\(c.filter(range: c.range)),transpose=cclock,format=rgb24", "-f", "rawvideo", "-"])
            .standardOutput.suffix(240 * 320 * 3))
        let grabbed = try screen.grab(window) { psnr($0.rgb, reference) >= 33 }
        #expect(grabbed.width == 240 && grabbed.height == 320, "window \(grabbed.width)x\(grabbed.height)")
        let measured = psnr(grabbed.rgb, reference)
        #expect(measured >= 33, "turned: \(measured) dB against FFmpeg's turned RGB")
    }

    /// The overlay toggles with o (its text over the picture), fullscreen with f (the whole screen, the picture
    /// centred at its aspect, black beside it) and back, and q quits with status 0.
    @Test func keysToggleTheOverlayAndFullscreenAndQuit() throws {
        let session = try Session(label: "viewkeys", windowManager: true)
        let (directory, screen, daemon, log, viewer, window) =
            (session.directory, session.screen, session.daemon, session.log, session.viewer, session.window)
        let c = Self.cases[0]
        let clip = try Self.clip(c, frames: 10, in: directory)
        #expect(try Self.sendAndWait(clip, to: daemon, viewer: viewer, log: log), "\(viewer.errors)")
        let reference = try Self.referenceRGB(clip, filter: c.filter(range: c.range))
        #expect(psnr(try screen.grab(window) { psnr($0.rgb, reference) >= 33 }.rgb, reference) >= 33)

        try screen.press("o", in: window)
        let withOverlay = try screen.grab(window) { psnr($0.rgb, reference) < 25 }
        #expect(psnr(withOverlay.rgb, reference) < 25, "the overlay did not show: \(psnr(withOverlay.rgb, reference)) dB")
        try screen.press("o", in: window)
        #expect(psnr(try screen.grab(window) { psnr($0.rgb, reference) >= 33 }.rgb, reference) >= 33, "the overlay did not go")

        try screen.press("f", in: window)
        #expect(viewer.waitFor(timeout: 10) { (try? screen.size(of: window)).map { $0 == (screen.width, screen.height) } ?? false },
                "not fullscreen: \(String(describing: try? screen.size(of: window)))")
        // 320x240 in 1280x720: 960x720 in the middle, 160 columns of black on each side.
        func column(_ x: Int, of image: (width: Int, height: Int, rgb: [UInt8])) -> [UInt8] {
            guard x < image.width else { return [] }
            var samples: [UInt8] = []
            for y in 0..<image.height {
                let start: Int = (y * image.width + x) * 3
                samples += image.rgb[start..<start + 3]
            }
            return samples
        }
        let full = try screen.grab(window) { $0.width == 1280 && column(640, of: $0).contains { $0 > 50 } }
        func column(_ x: Int) -> [UInt8] { column(x, of: full) }
        #expect(full.width == 1280 && column(100).allSatisfy { $0 == 0 } && column(1180).allSatisfy { $0 == 0 }, "bars beside the picture")
        #expect(column(640).contains { $0 > 50 }, "the picture in the middle")
        try screen.press("f", in: window)
        #expect(viewer.waitFor(timeout: 10) { (try? screen.size(of: window)).map { $0 == (320, 240) } ?? false },
                "back from fullscreen: \(String(describing: try? screen.size(of: window)))")

        // xdotool sends q's press and then its release to the window; the viewer quits on the press, so under load
        // the window can be gone before the release (BadWindow, xdotool exits 1). That is q working: judge by the
        // viewer's exit, and say what it was doing only when it did not quit.
        try #require(viewer.process.isRunning, "the viewer quit before q: \(viewer.errors)")
        do {
            try screen.press("q", in: window)
        } catch {
            if !viewer.waitFor(timeout: 10, { !viewer.process.isRunning }) {
                let windows = (try? screen.run("xdotool", ["search", "--name", "."]).text) ?? "?"
                Issue.record("q not delivered: \(error); the viewer still running; windows now: \(windows); its stderr: \(viewer.errors.suffix(2000))")
                return
            }
        }
        #expect(viewer.waitFor(timeout: 10) { !viewer.process.isRunning }, "q did not quit")
        #expect(!viewer.process.isRunning && viewer.process.terminationStatus == 0, "\(viewer.errors)")
    }

    /// Without a display it says so and exits 1; usage mistakes exit 2 and name the mistake.
    @Test func withoutADisplayItSaysSoAndExits1() throws {
        let result = try runProcess("/usr/bin/env", ["DISPLAY=", "WAYLAND_DISPLAY=", tool("streamrecvctl"), "view", "nosuchstream"])
        #expect(result.status == 1 && result.standardError.contains("cannot reach a display"), "\(result.status) \(result.standardError)")
        for (arguments, message) in [([String](), "which stream?"), (["../etc"], "a stream or shm name is"),
                                     (["a", "b"], "one stream at a time"), (["--frobnicate", "a"], "unknown option")] {
            let usage = try runProcess(viewerBinary, arguments)
            #expect(usage.status == 2 && usage.standardError.contains(message), "\(arguments): \(usage.status) \(usage.standardError)")
        }
    }
}
