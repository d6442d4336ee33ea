import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

/// scripts/rtsp-hostile-camera.py, one mode, as its own process: its log says what it saw.
final class HostileCamera {
    let port: Int
    let logPath: String
    private var pid: pid_t = 0

    /// - Parameter user: run as this user (a local attacker), who must be able to read `stream`.
    init(mode: String, stream: String, directory: URL, _ extra: [String] = [], port: Int = freePort(), user: ThrowawayUser? = nil) throws {
        self.port = port
        logPath = directory.appendingPathComponent("hostile-\(mode)-\(port).log").path
        let arguments = [TestEnvironment.repositoryRoot.appendingPathComponent("scripts/rtsp-hostile-camera.py").path,
                         "--port", String(port), "--stream", stream, "--mode", mode] + extra
        pid = try user.map { try spawn("/usr/bin/setpriv", $0.command("/usr/bin/python3", arguments), log: logPath) }
            ?? spawn("/usr/bin/python3", arguments, log: logPath)
        #expect(wait(for: "ready", seconds: 20), "\(log)")
    }

    var url: String { "rtsp://127.0.0.1:\(port)/cam" }
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
    func count(_ line: String) -> Int { log.split(separator: "\n").filter { $0.hasPrefix(line) }.count }

    func wait(for text: String, seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !log.contains(text) && Date() < deadline { usleep(20_000) }
        return log.contains(text)
    }

    /// Killed, its port closed.
    func stop() {
        guard pid > 0 else { return }
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        pid = 0
    }

    deinit { stop() }
}

/// Seconds of CPU (user + system) `pid` has used, from /proc/PID/stat.
func cpuSeconds(_ pid: pid_t) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return 0 }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    // After the command: state is field 3, utime 14 and stime 15 (1-based, proc(5)).
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// RTSP servers and local processes that do not play by the rules (issue "Never fall over, round two"): forged
/// RTP and RTCP on the camera's address, a server aiming our RTCP elsewhere, a password asked for in clear, a
/// reconnect storm, a stream that never decodes, a flood, a server that refuses interleaved TCP, redirects. Each
/// through the real daemon against scripts/rtsp-hostile-camera.py.
@Suite(.serialized) struct RTSPHostileServerTests {
    static let frames = 60

    static func stream(in directory: URL) throws -> URL {
        try GeneratedStreams.encode(codec: "h264", size: "320x240", frames: frames,
                                    encoderParameters: "keyint=30:min-keyint=30:bframes=0:scenecut=0", in: directory, name: "camera.h264")
    }

    static func daemon(_ label: String, source: String, transport: String = "tcp", _ settings: [String: String] = [:],
                       metricsPort: Int) throws -> DaemonProcess {
        try DaemonProcess(label: label, settings: [
            "max_width": "320", "max_height": "240", "slots": String(frames + 20), "rtsp_transport": "\"\(transport)\"",
        ].merging(settings) { $1 }, daemonSettings: ["metrics": "\"127.0.0.1:\(metricsPort)\""], source: source)
    }

    static func metric(_ port: Int, _ daemon: DaemonProcess, _ name: String, _ labels: String = "") throws -> Double {
        let body = try httpGet(port: port, path: "/metrics").body
        return sample(body, name, "stream=\"\(daemon.name)\"" + labels) ?? 0
    }

    /// Items 1-3: an attacker on 127.0.0.1 (another user, who reads our port pair from /proc/net/udp) sends its own
    /// frames to our RTP port and a BYE naming the camera's SSRC to our RTCP port; from the camera's own ports come
    /// frames with another SSRC and a BYE for another SSRC; the camera's SETUP answer aims our RTCP at 127.0.0.2. Every frame published is the camera's, bit-exact; the session ends only at
    /// the camera's own BYE; the receiver reports reach the camera, none 127.0.0.2; each refusal is counted and said.
    @Test func forgedMediaAndRTCPFromTheCameraAddressAreRefused() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let stream = try Self.stream(in: directory)
        let forged = directory.appendingPathComponent("forged.h264").path
        try runChecked("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "smptebars=size=320x240:rate=25", "-frames:v", String(Self.frames),
                                  "-pix_fmt", "yuv420p", "-c:v", "libx264", "-x264-params", "keyint=30:min-keyint=30:bframes=0:scenecut=0", forged])
        let camera = try HostileCamera(mode: "forge", stream: stream.path, directory: directory, ["--forge", forged, "--source", "127.0.0.2"])
        let metrics = freePort()
        let daemon = try Self.daemon("rtspforge", source: camera.url, transport: "udp", metricsPort: metrics)
        // The attacker: another user, who finds the client's port pair in /proc/net/udp.
        #expect(camera.wait(for: "playing 1", seconds: 20), "\(camera.log)\n\(daemon.log.suffix(2000))")
        let port = try #require(camera.log.split(separator: "\n").first { $0.hasPrefix("client-port ") }?.split(separator: " ").last)
        let attacker = try ThrowawayUser()
        let forgedCopy = "/tmp/\(attacker.name)-forged.h264"
        try FileManager.default.copyItem(atPath: forged, toPath: forgedCopy)
        defer { try? FileManager.default.removeItem(atPath: forgedCopy) }
        chmod(forgedCopy, 0o644)
        let attack = try attacker.run("/usr/bin/python3", [
            TestEnvironment.repositoryRoot.appendingPathComponent("scripts/rtsp-udp-attacker.py").path,
            "--port", String(port), "--forge", forgedCopy,
        ])
        #expect(attack.status == 0 && attack.text.contains("found"), "\(attack.text)")
        #expect(camera.wait(for: "done", seconds: 30), "\(camera.log)\n\(daemon.log.suffix(2000))")
        let reference = try referenceFrames(stream.path, frameBytes: 320 * 240 * 3 / 2)
        let frames = readFrames(daemon.shmName, count: Self.frames)
        #expect(frames.count == Self.frames, "\(frames.count) frames: the session ended early?\n\(daemon.log.suffix(2000))")
        let foreign = frames.filter { frame in
            let index = Int(frame.pts / 3600)
            return index < 0 || index >= reference.count || frame.pixels != reference[index] || frame.flags.contains(.corrupt)
        }
        #expect(foreign.isEmpty, "\(foreign.count) of \(frames.count) frames are not the camera's")
        let deadline = Date().addingTimeInterval(10)
        while !daemon.log.contains("the server ended the stream (RTCP BYE)") && Date() < deadline { usleep(50_000) }
        let log = daemon.log
        #expect(log.contains("RTSP session ended: the server ended the stream (RTCP BYE)"), "\(log.suffix(2000))")
        #expect(try Self.metric(metrics, daemon, "streamrecvd_rtsp_failures_total", ",reason=\"ended\"") == 1)
        #expect(try Self.metric(metrics, daemon, "streamrecvd_refused_total", ",reason=\"not_allowed\"") >= 3)
        for line in ["not the server's RTP port, ignored", "with SSRC 4556494d, not the session's, ignored",
                     "not the server's RTCP port, ignored", "RTCP BYE for another source than the session's, ignored",
                     "the server names another media source (source=127.0.0.2); ignored"] {
            #expect(log.contains(line), "\(line)\n\(log.suffix(3000))")
        }
        #expect(camera.count("rtcp-rr") >= 1 && camera.count("diverted-rtcp") == 0, "\(camera.log)")
        #expect(daemon.isRunning)
    }

    /// Item 4: a server that asks for Basic (a local user on a stopped Digest camera's port), or offers Digest
    /// SHA-256 next to Basic, never gets the password; with rtsp_auth = "basic" a Basic-only camera does, but not one
    /// that spoke Digest before. Said in the log, STATUS (the ring's source status) and the failure counter.
    @Test func basicAuthenticationIsNeverADowngrade() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let stream = try Self.stream(in: directory)
        let password = "hostile-secret-\(UInt32.random(in: 0...UInt32.max))"
        struct Case {
            var mode: String
            var auth: String?
            var refusal: String?
        }
        let cases = [
            Case(mode: "auth-basic", auth: nil, refusal: "the server asks for Basic authentication, which would send the password in clear; set rtsp_auth = \"basic\" to allow it"),
            Case(mode: "auth-sha256", auth: "basic", refusal: "the server offers Digest with SHA-256, which this client does not speak, and Basic"),
            Case(mode: "auth-downgrade", auth: "basic", refusal: "the server asks for Basic authentication but asked for Digest before"),
            Case(mode: "auth-basic", auth: "basic", refusal: nil),
        ]
        for test in cases {
            let camera = try HostileCamera(mode: test.mode, stream: stream.path, directory: directory)
            let metrics = freePort()
            let source = camera.url.replacingOccurrences(of: "rtsp://", with: "rtsp://viewer:\(password)@")
            let daemon = try Self.daemon("rtspauth", source: source, test.auth.map { ["rtsp_auth": "\"\($0)\""] } ?? [:], metricsPort: metrics)
            if let refusal = test.refusal {
                // The ring's source status holds 128 bytes: its beginning.
                let shown = "rtsp authentication refused: \(refusal)".prefix(100)
                let deadline = Date().addingTimeInterval(20)
                while !(daemon.status?.sourceStatus.contains(shown) ?? false) && Date() < deadline { usleep(20_000) }
                #expect(daemon.status?.sourceStatus.contains(shown) == true, "\(daemon.log.suffix(2000))")
                #expect(daemon.log.contains("authentication refused: \(refusal)"))
                #expect(try Self.metric(metrics, daemon, "streamrecvd_rtsp_failures_total", ",reason=\"insecure_auth\"") >= 1)
                #expect(camera.count("auth basic") == 0, "\(test.mode): the password went out in clear")
                if test.mode == "auth-downgrade" { #expect(camera.count("auth digest") >= 1 && camera.count("playing") == 1, "\(camera.log)") }
            } else {
                #expect(camera.wait(for: "playing", seconds: 20) && camera.count("auth basic") >= 1, "\(camera.log)\n\(daemon.log.suffix(2000))")
            }
            #expect(!daemon.log.contains(password) && !(daemon.status?.sourceStatus.contains(password) ?? false))
            #expect(daemon.isRunning)
            #expect(daemon.stop() == 0)
        }
    }

    /// Item 4, as the issue tells it: a Digest camera stops, a local user (a throwaway user) binds its port and
    /// answers 401 with Basic. Even with rtsp_auth = "basic", the client that saw the camera speak Digest sends nothing.
    @Test func aLocalUserOnAStoppedDigestCamerasPortGetsNoPassword() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let stream = try Self.stream(in: directory)
        let camera = try HostileCamera(mode: "auth-digest", stream: stream.path, directory: directory)
        let metrics = freePort()
        let password = "downgrade-secret-\(UInt32.random(in: 0...UInt32.max))"
        let daemon = try Self.daemon("rtspimpost", source: camera.url.replacingOccurrences(of: "rtsp://", with: "rtsp://viewer:\(password)@"),
                                     ["rtsp_auth": "\"basic\""], metricsPort: metrics)
        #expect(camera.wait(for: "playing 1", seconds: 20) && camera.count("auth digest") >= 1, "\(camera.log)")
        camera.stop()
        let user = try ThrowawayUser()
        let copy = "/tmp/\(user.name)-camera.h264"
        try FileManager.default.copyItem(atPath: stream.path, toPath: copy)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        chmod(copy, 0o644)
        let impostor = try HostileCamera(mode: "auth-basic", stream: copy, directory: directory, port: camera.port, user: user)
        let line = "authentication refused: the server asks for Basic authentication but asked for Digest before"
        let deadline = Date().addingTimeInterval(20)
        while !daemon.log.contains(line) && Date() < deadline { usleep(50_000) }
        #expect(daemon.log.contains(line), "\(impostor.log)\n\(daemon.log.suffix(2000))")
        #expect(impostor.count("401") >= 1 && impostor.count("auth basic") == 0, "\(impostor.log)")
        #expect(try Self.metric(metrics, daemon, "streamrecvd_rtsp_failures_total", ",reason=\"insecure_auth\"") >= 1)
        #expect(!daemon.log.contains(password) && daemon.isRunning)
    }

    /// Item 5: a server that sends one keyframe and closes, again and again: the backoff does not start over at each
    /// session (a session that did not last), "playing" and "ended" are said once, the rest at debug level.
    @Test func aServerThatPlaysAFrameAndClosesIsNotStormed() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let camera = try HostileCamera(mode: "one-frame", stream: try Self.stream(in: directory).path, directory: directory)
        let metrics = freePort()
        let daemon = try Self.daemon("rtspstorm", source: camera.url, metricsPort: metrics)
        #expect(camera.wait(for: "playing 1", seconds: 20))
        usleep(8_000_000)
        // Backoff 0.1, 0.2, 0.4, 0.8, then 1 s: about ten sessions in 8 s; without it (reset at each session) 50 or more.
        let sessions = camera.count("playing")
        #expect(sessions >= 2 && sessions <= 15, "\(sessions) sessions in 8 s")
        let lines = daemon.log.split(separator: "\n")
        let playing = lines.filter { $0.contains(" info ") && $0.contains("RTSP session playing") }
        let ended = lines.filter { $0.contains(" warning ") && $0.contains("RTSP session ended") }
        #expect(playing.count == 1 && ended.count == 1, "\(playing)\n\(ended)")
        #expect(try Self.metric(metrics, daemon, "streamrecvd_rtsp_failures_total", ",reason=\"closed\"") >= Double(sessions - 1))
        #expect(daemon.isRunning)
    }

    /// Item 6: slices that never decode (no parameter sets in the SDP or the stream) are not progress: the session
    /// ends after idle_timeout with the reason in the log, the ring's source status and the failure counter.
    @Test func aSessionThatNeverDecodesEnds() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let camera = try HostileCamera(mode: "no-params", stream: try Self.stream(in: directory).path, directory: directory)
        let metrics = freePort()
        let daemon = try Self.daemon("rtspundec", source: camera.url, ["idle_timeout": "2"], metricsPort: metrics)
        let line = "nothing decodable for"
        let deadline = Date().addingTimeInterval(20)
        while !daemon.log.contains(line) && Date() < deadline { usleep(50_000) }
        #expect(daemon.log.contains("RTSP session ended: \(line)"), "\(daemon.log.suffix(2000))")
        while !(daemon.status?.sourceStatus.contains(line) ?? false) && Date() < deadline { usleep(20_000) }
        #expect(daemon.status?.sourceStatus.contains(line) == true)
        #expect(try Self.metric(metrics, daemon, "streamrecvd_rtsp_failures_total", ",reason=\"undecodable\"") >= 1)
        #expect(daemon.status?.counters.framesPublished == 0)
        #expect(daemon.isRunning)
    }
}
