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
        // Not Foundation's Process: it watches children through an inherited socket, which systemd-socket-activate
        // closes before exec'ing the daemon; Foundation then blocks in waitpid on a live process and never reaps
        // another child.
        let activator = try spawn("/usr/bin/systemd-socket-activate", [
            "-l", "127.0.0.1:\(activationPort)", "--fdname=\(daemon.name)", tool("streamrecvd"), "--config", daemon.configPath,
        ], log: daemon.logPath)
        defer {
            kill(activator, SIGTERM)
            var status: Int32 = 0
            waitpid(activator, &status, 0)
        }
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
        let units = ["streamrecvd.service", "streamrecvd@.service", "streamrecvd.socket"]
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
}
