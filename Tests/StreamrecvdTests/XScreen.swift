import Foundation
import Glibc
import StreamrecvTestSupport

/// An X server of the test's own (Xvfb, no window manager), with what a test does on it: find a window by its
/// title, read its pixels back (x11grab), press keys (xdotool).
final class XScreen {
    let display: String
    let width: Int
    let height: Int
    private let server: ChildProcess
    private var windowManager: ChildProcess?

    /// `windowManager`: Openbox on it, as a desktop has one (fullscreen is a window manager's to grant).
    init(directory: URL, width: Int = 1280, height: Int = 720, windowManager: Bool = false) throws {
        var number = 300 + Int(getpid() % 400)
        while FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)") || FileManager.default.fileExists(atPath: "/tmp/.X\(number)-lock") {
            number += 1
        }
        display = ":\(number)"
        self.width = width
        self.height = height
        // -noreset: by default the server resets as its last client leaves (one of the test's xdotool calls), and a
        // client connecting just then is cut off: Openbox then exits 1 without a word (its SIGPIPE handler).
        server = try ChildProcess("/usr/bin/Xvfb", [display, "-screen", "0", "\(width)x\(height)x24", "-nolisten", "tcp", "-noreset"],
                                  environment: [:], directory: directory, label: "xvfb")
        // Taking connections, not only bound: the socket's file is there before the server listens on it.
        guard server.waitFor(timeout: 20, { (try? runProcess("/usr/bin/env", ["DISPLAY=:\(number)", "xdotool", "getdisplaygeometry"]).status) == 0 }) else {
            throw HarnessError(description: "Xvfb did not start: \(server.errors)")
        }
        if windowManager {
            let manager = try ChildProcess("/usr/bin/openbox", ["--sm-disable"], environment: environment, directory: directory, label: "openbox")
            self.windowManager = manager
            // Managing once it has claimed the screen (its check window is on the root).
            guard manager.waitFor(timeout: 20, { (try? self.run("xdotool", ["search", "--class", "openbox"]).status) == 0 }) else {
                let exit = manager.process.isRunning ? "still running" : "exit status \(manager.process.terminationStatus)"
                throw HarnessError(description: "openbox did not start (\(exit)): \(manager.errors)")
            }
        }
    }

    deinit {
        windowManager?.kill(signal: SIGKILL)
        server.kill(signal: SIGKILL)
    }

    var environment: [String: String] { ["DISPLAY": display] }

    /// `tool` with DISPLAY set to this screen.
    func run(_ tool: String, _ arguments: [String]) throws -> ProcessResult {
        try runProcess("/usr/bin/env", ["DISPLAY=\(display)", tool] + arguments)
    }

    /// The window whose title is exactly `title`, once it is mapped.
    func window(titled title: String, timeout: Double = 20) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        let pattern = "^" + NSRegularExpression.escapedPattern(for: title) + "$"
        while Date() < deadline {
            if let found = try? run("xdotool", ["search", "--onlyvisible", "--name", pattern]), found.status == 0,
               let id = found.text.split(separator: "\n").first {
                return String(id)
            }
            usleep(100_000)
        }
        return nil
    }

    /// A window's size as the X server has it.
    func size(of window: String) throws -> (width: Int, height: Int) {
        let text = try run("xdotool", ["getwindowgeometry", "--shell", window]).text
        func value(_ key: String) -> Int { text.split(separator: "\n").first { $0.hasPrefix(key + "=") }.flatMap { Int($0.dropFirst(key.count + 1)) } ?? 0 }
        return (value("WIDTH"), value("HEIGHT"))
    }

    /// A window's pixels, RGB, row by row (x11grab).
    func grab(_ window: String) throws -> (width: Int, height: Int, rgb: [UInt8]) {
        let (width, height) = try size(of: window)
        let result = try runChecked("ffmpeg", ["-v", "error", "-f", "x11grab", "-draw_mouse", "0", "-window_id", window, "-i", display,
                                               "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
        return (width, height, [UInt8](result.standardOutput))
    }

    /// A window's pixels once `condition` holds for them, or the last ones read within `timeout`: what a frame or a
    /// key changes reaches the screen a while after the program has drawn it.
    func grab(_ window: String, timeout: Double = 5, until condition: ((width: Int, height: Int, rgb: [UInt8])) -> Bool) throws
        -> (width: Int, height: Int, rgb: [UInt8])
    {
        let deadline = Date().addingTimeInterval(timeout)
        var grabbed = try grab(window)
        while !condition(grabbed) && Date() < deadline {
            usleep(100_000)
            grabbed = try grab(window)
        }
        return grabbed
    }

    func press(_ key: String, in window: String) throws {
        try runChecked("/usr/bin/env", ["DISPLAY=\(display)", "xdotool", "key", "--window", window, key])
    }
}

/// Peak signal-to-noise ratio of two images of 8-bit samples, in dB (infinity when equal).
func psnr(_ a: [UInt8], _ b: [UInt8]) -> Double {
    guard a.count == b.count, !a.isEmpty else { return 0 }
    var sum = 0.0
    for index in a.indices {
        let difference = Double(Int(a[index]) - Int(b[index]))
        sum += difference * difference
    }
    let mean = sum / Double(a.count)
    return mean == 0 ? .infinity : 10 * log10(255 * 255 / mean)
}
