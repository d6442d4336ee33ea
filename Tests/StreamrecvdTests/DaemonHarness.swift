import Bitstream
import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport

/// A free TCP port on loopback (bound once by the kernel's choice, then released).
func freePort() -> Int {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(descriptor, pointer, length)
            return getsockname(descriptor, pointer, &length)
        }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Polls `condition` every 20 ms until it holds or `seconds` pass; whether it held. State is waited for, never a
/// fixed time: a log line, a counter, what a loaded machine may take a while to get to.
func eventually(within seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while try !condition() {
        if Date() >= deadline { return false }
        usleep(20_000)
    }
    return true
}

func tool(_ name: String) -> String { TestEnvironment.productsDirectory.appendingPathComponent(name).path }

struct HarnessError: Error, CustomStringConvertible {
    var description: String
}

/// One `streamrecvd` process with a one-stream configuration written for the test.
final class DaemonProcess {
    let name: String
    let port: Int
    let directory: URL
    let configPath: String
    let logPath: String
    private var process: Process?

    var shmName: String { "streamrecv-\(name)" }

    /// - Parameters:
    ///   - settings: extra `key = value` lines for the `[[stream]]` table.
    ///   - daemonSettings: extra `key = value` lines for the `[daemon]` table.
    ///   - source: an rtsp:// URL the stream pulls from, instead of listening.
    ///   - tables: more tables (e.g. `[webrtc]`), written between `[daemon]` and the stream.
    init(label: String, settings: [String: String] = [:], daemonSettings: [String: String] = [:], transport: String = "tcp",
         source: String? = nil, tables: String = "", start: Bool = true) throws {
        let tag = String(label.unicodeScalars.filter { ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) }.prefix(10))
        name = "t\(getpid() % 100_000)-\(tag)-\(UInt16.random(in: 0...UInt16.max))"
        port = freePort()
        directory = try TestEnvironment.temporaryDirectory()
        configPath = directory.appendingPathComponent("streamrecvd.toml").path
        logPath = directory.appendingPathComponent("streamrecvd.log").path
        var lines = ["[daemon]", "log_level = \"debug\""]
        for (key, value) in daemonSettings.sorted(by: { $0.key < $1.key }) { lines.append("\(key) = \(value)") }
        if !tables.isEmpty { lines += ["", tables] }
        let listen = transport == "whip" ? "listen = \"whip\"" : "listen = \"\(transport)://127.0.0.1:\(port)\""
        lines += ["", "[[stream]]", "name = \"\(name)\"", source.map { "source = \"\($0)\"" } ?? listen,
                  "hwaccel = \(settings["hwaccel"] ?? "\"none\"")"]
        for (key, value) in settings.sorted(by: { $0.key < $1.key }) where key != "hwaccel" { lines.append("\(key) = \(value)") }
        try lines.joined(separator: "\n").write(toFile: configPath, atomically: true, encoding: .utf8)
        if start { try self.start() }
    }

    deinit {
        if let process, process.isRunning {
            process.interrupt()
            process.waitUntilExit()
        }
        shm_unlink("/" + shmName)
    }

    /// - Parameters:
    ///   - environment: added to the test's own environment (e.g. NOTIFY_SOCKET).
    ///   - limit: a resource limit for the daemon, as prlimit(1) takes it (`--nofile=64`); prlimit execs the daemon.
    ///   - namespace: a network namespace to run in (`ip netns exec` execs the daemon: the PID is the daemon's).
    func start(environment: [String: String] = [:], limit: String? = nil, namespace: String? = nil) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: namespace != nil ? "/usr/sbin/ip" : limit == nil ? tool("streamrecvd") : "/usr/bin/prlimit")
        process.arguments = (namespace.map { ["netns", "exec", $0, tool("streamrecvd")] } ?? limit.map { [$0, tool("streamrecvd")] } ?? [])
            + ["--config", configPath]
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        log.seekToEndOfFile()
        process.standardOutput = log
        process.standardError = log
        try process.run()
        self.process = process
        // Ready once the ring exists and says the listener is bound.
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if !process.isRunning { throw HarnessError(description: "streamrecvd exited: \(self.log)") }
            // A pulling stream may already be streaming when first seen.
            if let reader = try? FrameRingReader(shmName: shmName), reader.status.state == .waiting || reader.status.state == .streaming,
               reader.status.writerPID == UInt32(process.processIdentifier) {
                return
            }
            usleep(20_000)
        }
        throw HarnessError(description: "streamrecvd did not become ready: \(self.log)")
    }

    /// SIGTERM, then the exit status.
    @discardableResult
    func stop() -> Int32 {
        guard let process else { return -1 }
        process.terminate()
        process.waitUntilExit()
        self.process = nil
        return process.terminationStatus
    }

    var isRunning: Bool { process?.isRunning ?? false }

    var pid: pid_t? { process?.processIdentifier }

    /// Sends `signal` (e.g. SIGHUP) to the daemon.
    func send(signal: Int32) {
        if let process { kill(process.processIdentifier, signal) }
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    var status: RingStatus? { try? FrameRingReader(shmName: shmName).status }

    /// Waits until the stream has published `frames` frames and is back to waiting for a sender.
    func waitUntilPublished(_ frames: UInt64, timeout: TimeInterval = 60) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let status, status.counters.framesPublished >= frames, status.state == .waiting { return true }
            usleep(20_000)
        }
        return false
    }
}

/// `streamrecvctl cat` running as its own process, writing y4m into files.
final class CatProcess {
    let process = Process()
    let output: String
    private let errorPipe = Pipe()

    init(stream: String, frames: Int, timeout: Double = 20, segmented: Bool = false, directory: URL, extra: [String] = []) throws {
        output = directory.appendingPathComponent(segmented ? "seg%d.y4m" : "out.y4m").path
        process.executableURL = URL(fileURLWithPath: tool("streamrecvctl"))
        process.arguments = ["cat", stream, "--frames", String(frames), "--timeout", String(timeout), "--output", output] + extra
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errorPipe
        try process.run()
        // It prints one line once attached; only then may frames be sent.
        var seen = Data()
        while !String(decoding: seen, as: UTF8.self).contains("reading") {
            let chunk = errorPipe.fileHandleForReading.availableData
            if chunk.isEmpty { throw HarnessError(description: "cat exited: \(String(decoding: seen, as: UTF8.self))") }
            seen += chunk
        }
    }

    /// Waits for the exit; returns the status and what it said on stderr.
    func finish() -> (status: Int32, errors: String) {
        let rest = errorPipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: rest, as: UTF8.self))
    }

    func segments() -> [String] {
        if !output.contains("%d") { return [output] }
        var paths: [String] = []
        while case let path = output.replacingOccurrences(of: "%d", with: String(paths.count)),
              FileManager.default.fileExists(atPath: path) {
            paths.append(path)
        }
        return paths
    }
}

/// A TCP sender on loopback, as a real encoder would be: one connection, bytes in order.
final class Sender {
    let descriptor: Int32

    /// - Parameter source: the local address to connect from (any 127.x.y.z is loopback: another "host").
    init(port: Int, from source: String? = nil) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else { throw HarnessError(description: "bind \(source): \(String(cString: strerror(errno)))") }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        // On a throw the descriptor is closed by deinit (every stored property is set by then).
        guard result == 0 else { throw HarnessError(description: "connect failed: \(String(cString: strerror(errno)))") }
    }

    deinit { Glibc.close(descriptor) }

    func send(_ bytes: ArraySlice<UInt8>) throws {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw HarnessError(description: "send failed: \(String(cString: strerror(errno)))") }
            offset += written
        }
    }

    /// Sends access unit by access unit with a pause between them, like a live encoder (and so that a ring
    /// smaller than the stream is never lapped by the test's own reader).
    func sendPaced(_ stream: [UInt8], pauseMicroseconds: UInt32) throws {
        let offsets = StreamFacts(stream).accessUnitOffsets + [stream.count]
        if offsets.first.map({ $0 > 0 }) ?? false { try send(stream[0..<offsets[0]]) }
        for index in 0..<(offsets.count - 1) {
            try send(stream[offsets[index]..<offsets[index + 1]])
            if pauseMicroseconds > 0 { usleep(pauseMicroseconds) }
        }
    }

    /// True once the daemon has closed the connection (read returns 0 or an error).
    func closedByPeer(within seconds: Double) -> Bool {
        var poll = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard Glibc.poll(&poll, 1, Int32(seconds * 1000)) > 0 else { return false }
        var byte: UInt8 = 0
        return recv(descriptor, &byte, 1, 0) <= 0
    }

    func close() { shutdown(descriptor, Int32(SHUT_RDWR)) }
}

/// What the Bitstream module says about a stream: access-unit offsets, the largest picture, where the format
/// changes (the points where FFmpeg's reference must be decoded segment by segment).
struct StreamFacts {
    var accessUnitOffsets: [Int] = []
    var maxWidth = 16
    var maxHeight = 16
    /// Offsets of access units that start a new output format (size, bit depth or chroma format).
    var segmentStarts: [Int] = [0]

    init(_ stream: [UInt8]) {
        let units = accessUnits(of: stream)
        var last: (Int, Int, Int, ChromaFormat)?
        for unit in units {
            accessUnitOffsets.append(Int(unit.streamOffset))
            guard let format = unit.format, unit.hasPicture else { continue }
            maxWidth = max(maxWidth, format.codedWidth)
            maxHeight = max(maxHeight, format.codedHeight)
            let key = (format.width, format.height, format.bitDepthLuma, format.chromaFormat)
            if let previous = last, previous != key, unit.isKeyframe {
                segmentStarts.append(Int(unit.streamOffset))
            }
            if last == nil || unit.isKeyframe { last = key }
        }
    }
}

/// The md5 of each frame FFmpeg decodes from `path` (`ffmpeg -i path -f framemd5 -`), in order.
/// - Parameter extra: input options after `-f FORMAT` (e.g. `-pix_fmt`, `-video_size` for raw video).
func ffmpegMD5s(_ path: String, format: String? = nil, extra: [String] = []) throws -> [String] {
    var arguments = ["-v", "error"]
    if let format { arguments += ["-f", format] + extra }
    arguments += ["-i", path, "-f", "framemd5", "-"]
    let result = try runProcess("ffmpeg", arguments)
    return result.text.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap {
        $0.split(separator: ",").last.map { String($0).trimmingCharacters(in: .whitespaces) }
    }
}

/// FFmpeg's reference for a stream, decoded segment by segment at each format change (the CLI would rescale
/// later segments to the first size).
func referenceMD5s(_ stream: [UInt8], facts: StreamFacts, directory: URL) throws -> [String] {
    var md5s: [String] = []
    let bounds = facts.segmentStarts + [stream.count]
    for index in 0..<(bounds.count - 1) {
        let path = directory.appendingPathComponent("reference-\(index).bin").path
        try Data(stream[bounds[index]..<bounds[index + 1]]).write(to: URL(fileURLWithPath: path))
        md5s += try ffmpegMD5s(path)
    }
    return md5s
}

/// Nil when equal; otherwise where the two md5 lists first differ (short enough for a test failure message).
func firstDifference(_ ours: [String], _ reference: [String]) -> String? {
    if ours == reference { return nil }
    let index = zip(ours, reference).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(ours.count, reference.count)
    return "\(ours.count) frames vs FFmpeg's \(reference.count); first difference at frame \(index)"
}

/// The md5 of each frame in the y4m files `cat` wrote.
func catMD5s(_ cat: CatProcess) throws -> [String] {
    try cat.segments().flatMap { try ffmpegMD5s($0, format: "yuv4mpegpipe") }
}
