import Foundation
import Glibc
import StreamrecvTestSupport

/// A process of the test's own, its output in files; started with an empty signal mask (through python3: the test
/// runner's threads block signals, and a child inherits that), so that SIGTERM and SIGINT stop it as they stop it
/// for a user.
final class ChildProcess {
    let process = Process()
    private let outputPath: String
    private let errorPath: String

    init(_ executable: String, _ arguments: [String], environment: [String: String], directory: URL, label: String) throws {
        let tag = "\(label)-\(UUID().uuidString.prefix(6))"
        outputPath = directory.appendingPathComponent("\(tag).out").path
        errorPath = directory.appendingPathComponent("\(tag).err").path
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); "
                             + "os.execv(sys.argv[1], sys.argv[1:])", executable] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errorPath))
        try process.run()
    }

    deinit { kill(signal: SIGKILL) }

    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }
    var errors: String { (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "" }

    func kill(signal: Int32) {
        if process.isRunning {
            Glibc.kill(process.processIdentifier, signal)
            if signal == SIGKILL { process.waitUntilExit() }
        }
    }

    func waitFor(timeout: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition() { return true }
            if !process.isRunning { return condition() }
            usleep(20_000)
        }
        return condition()
    }

    /// Sends `signal` and waits for the exit (SIGKILL after `timeout`); the exit status.
    func stop(signal: Int32 = SIGTERM, timeout: Double = 10) -> Int32 {
        kill(signal: signal)
        if !waitFor(timeout: timeout, { !process.isRunning }) { kill(signal: SIGKILL) }
        process.waitUntilExit()
        return process.terminationStatus
    }
}

/// A desktop's media session of the test's own: a D-Bus session bus (WirePlumber wants one), PipeWire and
/// WirePlumber, all in a runtime directory of their own, as a user's login starts them.
final class PipeWireSession {
    let runtimeDirectory: URL
    private var children: [ChildProcess] = []

    var environment: [String: String] {
        // PIPEWIRE_RUNTIME_DIR goes before XDG_RUNTIME_DIR for PipeWire: set too, so that no PipeWire of the
        // machine's own is reached instead.
        ["XDG_RUNTIME_DIR": runtimeDirectory.path, "PIPEWIRE_RUNTIME_DIR": runtimeDirectory.path,
         "DBUS_SESSION_BUS_ADDRESS": "unix:path=\(runtimeDirectory.path)/bus",
         "PIPEWIRE_REMOTE": "pipewire-0", "DISPLAY": "", "WAYLAND_DISPLAY": ""]
    }

    init(directory: URL) throws {
        runtimeDirectory = directory.appendingPathComponent("runtime")
        try FileManager.default.createDirectory(at: runtimeDirectory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        children.append(try ChildProcess("/usr/bin/dbus-daemon", ["--session", "--nofork", "--nopidfile",
                                                                  "--address=unix:path=\(runtimeDirectory.path)/bus"],
                                         environment: environment, directory: directory, label: "dbus"))
        guard waitForPath("\(runtimeDirectory.path)/bus") else { throw HarnessError(description: "dbus-daemon did not start") }
        children.append(try ChildProcess("/usr/bin/pipewire", [], environment: environment, directory: directory, label: "pipewire"))
        guard waitForPath("\(runtimeDirectory.path)/pipewire-0") else {
            throw HarnessError(description: "pipewire did not start: \(children.last!.errors.suffix(1500))")
        }
        children.append(try ChildProcess("/usr/bin/wireplumber", [], environment: environment, directory: directory, label: "wireplumber"))
        // WirePlumber is ready once it is a client of PipeWire's and has made its default-nodes metadata.
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let text = try? run("pw-cli", ["ls", "Metadata"]).text, text.contains("default") { return }
            usleep(50_000)
        }
        throw HarnessError(description: "wireplumber did not start: \(children.last!.errors.suffix(1500))")
    }

    deinit { for child in children.reversed() { _ = child.stop(signal: SIGKILL) } }

    /// PipeWire goes away (as when a user's session ends), WirePlumber and the bus stay.
    func stopPipeWire() { _ = children[1].stop(signal: SIGKILL) }

    /// A PipeWire tool (pw-cli, pw-dump) in this session.
    func run(_ tool: String, _ arguments: [String]) throws -> ProcessResult {
        try runProcess("/usr/bin/env", environment.map { "\($0.key)=\($0.value)" } + [tool] + arguments)
    }

    /// The properties of each node PipeWire has now (from pw-dump).
    func nodes() throws -> [[String: Any]] {
        let dump = try run("pw-dump", []).standardOutput
        let objects = (try JSONSerialization.jsonObject(with: dump) as? [[String: Any]]) ?? []
        return objects.filter { ($0["type"] as? String) == "PipeWire:Interface:Node" }
            .compactMap { ($0["info"] as? [String: Any])?["props"] as? [String: Any] }
    }

    private func waitForPath(_ path: String) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if FileManager.default.fileExists(atPath: path) { return true }
            usleep(20_000)
        }
        return false
    }
}
