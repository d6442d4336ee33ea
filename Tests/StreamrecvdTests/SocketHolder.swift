import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport

/// What systemd does for streamrecvd-whip.socket and streamrecvd-whip-media.socket, in a small Python parent: it
/// binds the sockets as systemd binds them (SO_REUSEADDR on both, the TCP one listening) and keeps them while it
/// starts the daemon with LISTEN_FDS/LISTEN_FDNAMES/LISTEN_PID, stops it (SIGTERM) and starts it again after a
/// RestartSec-like pause at each SIGUSR1. systemd-socket-activate cannot: it execs the daemon, so its sockets end
/// with the first daemon. Each socket is "NAME=tcp:PORT" or "NAME=udp:PORT" on 127.0.0.1, or "NAME=udp:HOST:PORT"
/// (an IPv4 host); none: the daemon binds.
final class SocketHolder {
    static let script = #"""
        import fcntl, os, signal, socket, sys, time
        signal.pthread_sigmask(signal.SIG_SETMASK, [])  # spawned from a test thread that blocks nearly all of them
        daemon, config, log, status_path, wait_first = sys.argv[1:6]
        names, sockets = [], []
        for spec in sys.argv[6:]:
            name, rest = spec.split("=")
            kind, _, address = rest.partition(":")
            host, _, port = address.rpartition(":")
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # systemd's socket_address_listen() does
            s.bind((host or "127.0.0.1", int(port)))
            if kind == "tcp":
                s.listen(128)
            names.append(name)
            sockets.append(s)
        status = open(status_path, "a", buffering=1)
        flags = {"restart": wait_first == "no", "stop": False}
        signal.signal(signal.SIGUSR1, lambda *_: flags.update(restart=True))
        signal.signal(signal.SIGTERM, lambda *_: flags.update(stop=True))
        status.write("holding\n")

        def start():
            pid = os.fork()
            if pid == 0:
                try:
                    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                    os.dup2(out, 1)
                    os.dup2(out, 2)
                    # Above every descriptor in use first, so that placing them at 3, 4, … overwrites none of them.
                    high = [fcntl.fcntl(s.fileno(), fcntl.F_DUPFD_CLOEXEC, 100) for s in sockets]
                    for index, descriptor in enumerate(high):
                        os.dup2(descriptor, 3 + index)  # inheritable
                    environment = dict(os.environ)
                    if sockets:
                        environment.update(LISTEN_FDS=str(len(sockets)), LISTEN_FDNAMES=":".join(names), LISTEN_PID=str(os.getpid()))
                    os.execve(daemon, [daemon, "--config", config], environment)
                finally:
                    os._exit(127)
            status.write(f"started {pid}\n")
            return pid

        child = None
        while not flags["stop"]:
            if flags["restart"]:
                flags["restart"] = False
                if child is not None:
                    os.kill(child, signal.SIGTERM)
                    status.write(f"exited {child} {os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])}\n")
                    time.sleep(0.2)  # RestartSec=: the gap a squatter has when nothing holds the ports
                child = start()
            elif child is not None:
                done, code = os.waitpid(child, os.WNOHANG)
                if done:
                    status.write(f"exited {child} {os.waitstatus_to_exitcode(code)}\n")
                    child = None
            time.sleep(0.01)
        if child is not None:
            os.kill(child, signal.SIGTERM)
            status.write(f"exited {child} {os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])}\n")
        """#

    let pid: pid_t
    let daemon: DaemonProcess
    private let statusPath: String

    /// - Parameter waitForFirstStart: the daemon starts at the first `restart()`, not at once.
    init(daemon: DaemonProcess, sockets: [String], waitForFirstStart: Bool = false) throws {
        self.daemon = daemon
        statusPath = daemon.directory.appendingPathComponent("holder.status").path
        _ = FileManager.default.createFile(atPath: statusPath, contents: nil)
        pid = try spawn("/usr/bin/python3", ["-c", Self.script, tool("streamrecvd"), daemon.configPath, daemon.logPath, statusPath,
                                             waitForFirstStart ? "yes" : "no"] + sockets, log: daemon.logPath)
    }

    deinit { endProcess(pid) }

    /// Stops the daemon and starts it again (or starts it the first time), holding the sockets throughout.
    func restart() { kill(pid, SIGUSR1) }

    /// "holding", "started PID", "exited PID CODE", in order.
    var events: [String] {
        ((try? String(contentsOfFile: statusPath, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// Waits until `count` daemons have been started and the last one serves (its ring says so); its PID.
    func waitUntilServing(started count: Int, timeout: TimeInterval = 40) -> pid_t? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let started = events.filter { $0.hasPrefix("started ") }
            if started.count >= count, let pid = pid_t(started[count - 1].dropFirst(8)) {
                if events.contains(where: { $0.hasPrefix("exited \(pid) ") }) { return nil }
                if let status = daemon.status, status.writerPID == UInt32(pid), status.state == .waiting || status.state == .streaming {
                    return pid
                }
            }
            usleep(20_000)
        }
        return nil
    }

    /// Waits for the daemon `pid` to end on its own; its exit code.
    func exitCode(of pid: pid_t, timeout: TimeInterval = 40) -> Int? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let line = events.first(where: { $0.hasPrefix("exited \(pid) ") }) { return Int(line.split(separator: " ")[2]) }
            usleep(20_000)
        }
        return nil
    }
}

/// A local user (a throwaway account) trying, every millisecond, to bind 127.0.0.1's `tcp` and `udp` ports with
/// SO_REUSEADDR (a TCP one then listens): what the issue's squatter did between stop and start. Reports on SIGTERM.
final class PortSquatter {
    static let script = #"""
        import signal, socket, sys, time
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        tcp, udp = int(sys.argv[1]), int(sys.argv[2])
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        attempts, held = 0, {}
        try:
            while True:
                for kind, port in (("tcp", tcp), ("udp", udp)):
                    if kind in held:
                        continue
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    try:
                        s.bind(("127.0.0.1", port))
                        if kind == "tcp":
                            s.listen(8)
                        held[kind] = s
                        print("bound", kind, flush=True)
                    except OSError:
                        s.close()
                attempts += 1
                if attempts == 1:
                    print("polling", flush=True)
                time.sleep(0.001)
        finally:
            print("attempts", attempts, "bound", " ".join(sorted(held)) or "none", flush=True)
        """#

    let pid: pid_t
    let logPath: String

    init(user: ThrowawayUser, tcp: Int, udp: Int, directory: URL) throws {
        logPath = directory.appendingPathComponent("squatter.log").path
        pid = try spawn("/usr/bin/setpriv", user.command("/usr/bin/python3", ["-c", Self.script, String(tcp), String(udp)]), log: logPath)
        let deadline = Date().addingTimeInterval(10)
        while !output.contains("polling") && Date() < deadline { usleep(10_000) }
    }

    var output: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Ends the loop; its last line ("attempts N bound tcp udp" or "… bound none").
    func finish() -> String {
        if !finished {
            endProcess(pid)
            finished = true
        }
        return output.split(separator: "\n").last.map(String.init) ?? ""
    }

    private var finished = false

    deinit { _ = finish() }
}

/// SIGTERM, then SIGKILL if `pid` has not ended within 10 s (a failing test must not hang); reaps it.
func endProcess(_ pid: pid_t) {
    kill(pid, SIGTERM)
    var status: Int32 = 0
    for _ in 0..<1000 {
        if waitpid(pid, &status, WNOHANG) != 0 { return }
        usleep(10_000)
    }
    kill(pid, SIGKILL)
    waitpid(pid, &status, 0)
}
