import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// A NOTIFY_SOCKET: the datagram socket systemd would listen on, collecting what the daemon says.
final class NotifyListener {
    let path: String
    private let descriptor: Int32

    init(directory: URL) throws {
        path = directory.appendingPathComponent("notify.sock").path
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else { throw HarnessError(description: "bind \(path): \(String(cString: strerror(errno)))") }
    }

    deinit { Glibc.close(descriptor) }

    /// Discards what is already queued.
    func drain() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT)) > 0 {}
    }

    /// Messages received within `seconds` after the last one, until `stop` matches one.
    func receive(until stop: (String) -> Bool, seconds: Double = 20) -> [String] {
        var messages: [String] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            var poll = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard Glibc.poll(&poll, 1, 200) > 0 else { continue }
            let count = recv(descriptor, &buffer, buffer.count, 0)
            guard count > 0 else { continue }
            let message = String(decoding: buffer[0..<count], as: UTF8.self)
            messages.append(message)
            if stop(message) { break }
        }
        return messages
    }
}

/// posix_spawn with standard output and error appended to `log`; returns the pid (the caller reaps it).
func spawn(_ path: String, _ arguments: [String], log: String) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid: pid_t = 0
    let result = posix_spawn(&pid, path, &actions, nil, argv, environ)
    guard result == 0 else { throw HarnessError(description: "posix_spawn \(path): \(String(cString: strerror(result)))") }
    return pid
}

/// `systemd-socket-activate` holding a socket on `port` for `daemon`'s stream (by FileDescriptorName), started with
/// `spawn`: not Foundation's Process, which watches children through an inherited socket that
/// systemd-socket-activate closes before exec'ing the daemon (Foundation then blocks in waitpid on a live process
/// and never reaps another child). Ended with SIGTERM when the value goes.
final class SocketActivator {
    let pid: pid_t

    init(daemon: DaemonProcess, port: Int, datagram: Bool) throws {
        pid = try spawn("/usr/bin/systemd-socket-activate", (datagram ? ["--datagram"] : []) + [
            "-l", "127.0.0.1:\(port)", "--fdname=\(daemon.name)", tool("streamrecvd"), "--config", daemon.configPath,
        ], log: daemon.logPath)
    }

    deinit {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }
}

@Suite(.serialized) struct SystemdTests {
    /// READY only once the listener is bound and the ring exists, then STATUS and WATCHDOG while healthy, and
    /// STOPPING when SIGTERM begins the graceful shutdown.
    @Test func notificationsInOrder() throws {
        let daemon = try DaemonProcess(label: "notify", settings: ["max_width": "160", "max_height": "96"], start: false)
        let listener = try NotifyListener(directory: daemon.directory)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool("streamrecvd"))
        process.arguments = ["--config", daemon.configPath]
        process.environment = ProcessInfo.processInfo.environment.merging(
            ["NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": "400000"]) { $1 }
        process.standardError = FileHandle.nullDevice
        try process.run()
        let untilReady = listener.receive { $0.contains("READY=1") }
        #expect(untilReady.last?.contains("READY=1") == true, "\(untilReady)")
        // When READY arrives the ring exists and the listener accepts connections.
        #expect((try? FrameRingReader(shmName: daemon.shmName)) != nil)
        let sender = try Sender(port: daemon.port)
        try sender.sendPaced(try generated("h264", frames: 30), pauseMicroseconds: 30_000)
        let running = listener.receive(until: { $0.contains("streaming h264 160x96") }, seconds: 10)
        #expect(running.contains { $0.contains("WATCHDOG=1") }, "\(running)")
        #expect(running.last?.hasPrefix("STATUS=") == true, "\(running)")
        sender.close()
        process.terminate()
        let stopping = listener.receive { $0.contains("STOPPING=1") }
        process.waitUntilExit()
        #expect(stopping.last == "STOPPING=1")
        #expect(process.terminationStatus == 0)
    }

    /// systemd-socket-activate owns the listening socket: the daemon takes it by FileDescriptorName and never
    /// binds its configured address.
    @Test func socketActivationByFileDescriptorName() throws {
        let daemon = try DaemonProcess(label: "activate", settings: ["max_width": "160", "max_height": "96"], start: false)
        let activationPort = freePort()
        let activator = try SocketActivator(daemon: daemon, port: activationPort, datagram: false)
        defer { withExtendedLifetime(activator) {} }
        // systemd-socket-activate listens first and starts the daemon on the first connection.
        var sender: Sender?
        for _ in 0..<100 where sender == nil {
            sender = try? Sender(port: activationPort)
            if sender == nil { usleep(50_000) }
        }
        try #require(sender).sendPaced(try generated("h264", frames: 10), pauseMicroseconds: 0)
        sender?.close()
        #expect(daemon.waitUntilPublished(10, timeout: 30))
        #expect((try? Sender(port: daemon.port)) == nil, "the configured address must not be bound")
        #expect(daemon.log.contains("inherited socket"), "\(daemon.log.suffix(1500))")
    }

    @Test func unitsVerifyClean() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let units = ["streamrecvd.service", "streamrecvd@.service", "streamrecvd.socket", "streamrecvd-whip.socket", "streamrecvd-whip-media.socket"]
        for unit in units {
            let text = try String(contentsOf: TestEnvironment.repositoryRoot.appendingPathComponent("systemd/\(unit)"), encoding: .utf8)
            try text.replacingOccurrences(of: "/usr/bin/streamrecvd", with: tool("streamrecvd"))
                .write(to: directory.appendingPathComponent(unit), atomically: true, encoding: .utf8)
        }
        let result = try runProcess("systemd-analyze", ["verify", "--man=no"] + units.map { directory.appendingPathComponent($0).path })
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardError.isEmpty, "\(result.standardError)")
        let security = try runProcess("systemd-analyze", ["security", "--offline=true", directory.appendingPathComponent("streamrecvd.service").path])
        #expect(security.text.contains("Overall exposure level for streamrecvd.service: 1.") || security.text.contains("exposure level for streamrecvd.service: 0."),
                "\(security.text.suffix(300))")
    }

    /// A wedged decode thread (a fault-injected 4 s stall) stops the watchdog being fed; it is fed again after.
    @Test func aWedgedDecodeThreadStarvesTheWatchdog() throws {
        let daemon = try DaemonProcess(label: "wedge", settings: ["max_width": "160", "max_height": "96"], start: false)
        let listener = try NotifyListener(directory: daemon.directory)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool("streamrecvd"))
        process.arguments = ["--config", daemon.configPath]
        process.environment = ProcessInfo.processInfo.environment.merging([
            "NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": "400000", "STREAMRECVD_FAULT_STALL_DECODE_SECONDS": "4",
        ]) { $1 }
        _ = FileManager.default.createFile(atPath: daemon.logPath, contents: nil)
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: daemon.logPath))
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        #expect(listener.receive { $0.contains("READY=1") }.last?.contains("READY=1") == true)
        let sender = try Sender(port: daemon.port)
        try sender.send(try generated("h264", frames: 3)[...])
        // Wait for the daemon to notice, then listen for a second well inside the stall: no WATCHDOG=1.
        let deadline = Date().addingTimeInterval(10)
        while !daemon.log.contains("no longer feeding the watchdog") && Date() < deadline { usleep(20_000) }
        #expect(daemon.log.contains("decode thread stuck; no longer feeding the watchdog"))
        listener.drain()  // sent before the stall was noticed
        let during = listener.receive(until: { _ in false }, seconds: 1)
        #expect(!during.contains("WATCHDOG=1"), "\(during)")
        let after = listener.receive(until: { $0 == "WATCHDOG=1" }, seconds: 10)
        #expect(after.last == "WATCHDOG=1", "the watchdog is fed again once the thread recovers")
    }

    /// With stderr connected to the journal (JOURNAL_STREAM names it), every line carries its syslog priority.
    @Test func journalLinesCarryThePriority() throws {
        let daemon = try DaemonProcess(label: "journal", settings: ["max_width": "160", "max_height": "96"], start: false)
        _ = FileManager.default.createFile(atPath: daemon.logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: daemon.logPath))
        var status = stat()
        #expect(fstat(log.fileDescriptor, &status) == 0)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool("streamrecvd"))
        process.arguments = ["--config", daemon.configPath]
        process.environment = ProcessInfo.processInfo.environment.merging(
            ["JOURNAL_STREAM": "\(status.st_dev):\(status.st_ino)"]) { $1 }
        process.standardError = log
        try process.run()
        while (try? FrameRingReader(shmName: daemon.shmName))?.status.state != .waiting { usleep(20_000) }
        process.terminate()
        process.waitUntilExit()
        let lines = daemon.log.split(separator: "\n")
        #expect(!lines.isEmpty && lines.allSatisfy { $0.hasPrefix("<") && $0.dropFirst(2).hasPrefix(">") }, "\(lines.prefix(3))")
        #expect(lines.contains { $0.hasPrefix("<6>listening") })
    }

    /// Socket activation of a UDP stream: systemd-socket-activate hands over a datagram socket.
    @Test func datagramSocketActivation() throws {
        let daemon = try DaemonProcess(label: "activateudp", settings: ["max_width": "160", "max_height": "96", "idle_timeout": "2"],
                                       transport: "udp", start: false)
        let activationPort = freePort()
        let activator = try SocketActivator(daemon: daemon, port: activationPort, datagram: true)
        defer { withExtendedLifetime(activator) {} }
        // In datagram mode the daemon starts with the first datagram; keep sending until it is up.
        let stream = try generated("h264", frames: 10)
        var datagrams: [[UInt8]] = []
        for start in stride(from: 0, to: stream.count, by: 1000) { datagrams.append(Array(stream[start..<min(stream.count, start + 1000)])) }
        let deadline = Date().addingTimeInterval(20)
        while (try? FrameRingReader(shmName: daemon.shmName)) == nil && Date() < deadline {
            sendDatagrams([[0]], port: activationPort, pauseMicroseconds: 50_000)
        }
        // The wake-up datagrams formed a "sender" of their own: wait until the idle timeout has ended it.
        while !daemon.log.contains("sender disconnected") && Date() < deadline { usleep(50_000) }
        sendDatagrams(datagrams, port: activationPort)
        #expect(daemon.waitUntilPublished(10, timeout: 30))
        #expect(daemon.log.contains("inherited socket"))
    }

    @Test func watchRedrawsTheStatusTable() throws {
        let daemon = try DaemonProcess(label: "watch", settings: ["max_width": "160", "max_height": "96"])
        let result = try runChecked(tool("streamrecvctl"), ["watch", daemon.name, "--count", "2", "--interval", "0.1"])
        #expect(result.text.components(separatedBy: "\u{1B}[2J").count == 3)
        #expect(result.text.contains(daemon.name) && result.text.contains("waiting"))
    }
}
