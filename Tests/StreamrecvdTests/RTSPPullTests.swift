import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

/// An RTSP camera for the tests: GStreamer's gst-rtsp-server (scripts/rtsp-camera.py, through python3-gi) serving
/// a clip at its own pace over UDP and interleaved TCP, optionally behind Digest authentication.
final class RTSPCamera {
    let port: Int
    let logPath: String
    private var pid: pid_t = 0
    private let arguments: [String]

    init(clip: String, codec: String, port: Int = freePort(), user: String? = nil, password: String? = nil, directory: URL,
         start: Bool = true) throws {
        self.port = port
        logPath = directory.appendingPathComponent("camera-\(port).log").path
        var arguments = [TestEnvironment.repositoryRoot.appendingPathComponent("scripts/rtsp-camera.py").path,
                         "--port", String(port), "--clip", clip, "--codec", codec]
        if let user, let password { arguments += ["--user", user, "--password", password] }
        self.arguments = arguments
        if start { try self.start() }
    }

    var url: String { "rtsp://127.0.0.1:\(port)/cam" }

    /// Starts the server (again) and waits until it listens.
    func start() throws {
        let before = log.components(separatedBy: "ready").count
        // Debian's python3 (python3-gi lives there), whatever python3 is first on PATH.
        pid = try spawn("/usr/bin/python3", arguments, log: logPath)
        let deadline = Date().addingTimeInterval(20)
        while log.components(separatedBy: "ready").count == before {
            if Date() > deadline || Glibc.kill(pid, 0) != 0 { throw HarnessError(description: "rtsp-camera.py did not start: \(log)") }
            usleep(20_000)
        }
    }

    /// Stopped (SIGSTOP) or continued (SIGCONT): a camera that hangs, its connections open and silent.
    func signal(_ number: Int32) {
        if pid > 0 { Glibc.kill(pid, number) }
    }

    /// Killed, as a camera loses power: no TEARDOWN, no BYE, the connection reset.
    func kill() {
        guard pid > 0 else { return }
        Glibc.kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        pid = 0
    }

    deinit { kill() }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// RTCP receiver reports the server's RTP session has from a client.
    var receiverReports: Int { log.components(separatedBy: "rtcp-rr ").count - 1 }
}

/// source = "rtsp://…": the daemon pulls from a real RTSP server (gst-rtsp-server) over interleaved TCP and UDP,
/// H.264 and H.265, with and without Digest authentication; every frame bit-exact against FFmpeg's decode of the
/// clip served. The clip's parameter sets reach the daemon only in the SDP (Matroska keeps them out of the frames):
/// without them nothing decodes. A camera killed mid-stream and back again; a wrong password, an unreachable camera and a server that
/// answers garbage: a line (once per change), a counter, a state in STATUS, the daemon up, the password nowhere.
@Suite(.serialized) struct RTSPPullTests {
    static let frames = 60
    static let password = "rtsp-camera-secret"

    /// 60 frames of testsrc2 in Matroska (B-frames for H.264), as the camera serves it.
    static func clip(codec: String, in directory: URL) throws -> String {
        let path = directory.appendingPathComponent("clip-\(codec).mkv").path
        let encoder = codec == "h264" ? ["-c:v", "libx264", "-x264-params", "bframes=2:keyint=30"]
            : ["-c:v", "libx265", "-x265-params", "log-level=error:keyint=30"]
        try runChecked("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
                                  "-frames:v", String(frames), "-pix_fmt", "yuv420p"] + encoder + [path])
        return path
    }

    /// The clip `times` over in one file (FFmpeg's stream_loop, no re-encoding).
    static func repeated(_ clip: String, times: Int, in directory: URL) throws -> String {
        let path = directory.appendingPathComponent("repeated-\(times).mkv").path
        try runChecked("ffmpeg", ["-v", "error", "-y", "-stream_loop", String(times - 1), "-i", clip, "-c", "copy", path])
        return path
    }

    static func daemon(_ label: String, source: String, transport: String = "tcp", _ settings: [String: String] = [:],
                       metricsPort: Int? = nil, start: Bool = true) throws -> DaemonProcess {
        try DaemonProcess(label: label, settings: [
            "max_width": "320", "max_height": "240", "slots": String(frames + 8), "rtsp_transport": "\"\(transport)\"",
        ].merging(settings) { $1 }, daemonSettings: metricsPort.map { ["metrics": "\"127.0.0.1:\($0)\""] } ?? [:],
            source: source, start: start)
    }

    static func credentialed(_ url: String, password: String = RTSPPullTests.password) -> String {
        url.replacingOccurrences(of: "rtsp://", with: "rtsp://viewer:\(password)@")
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var codec: String
        var transport: String
        var authenticated: Bool
        /// "localhost": a name of two addresses (::1 refused, 127.0.0.1 answers: NIO tries both).
        var host = "127.0.0.1"
        var testDescription: String { "\(codec) over \(transport)\(authenticated ? ", Digest authentication" : "") to \(host)" }
    }

    @Test(arguments: [Case(codec: "h264", transport: "udp", authenticated: false),
                      Case(codec: "h264", transport: "tcp", authenticated: true),
                      Case(codec: "h265", transport: "udp", authenticated: true, host: "localhost"),
                      Case(codec: "h265", transport: "tcp", authenticated: false)])
    func everyFrameBitExact(_ test: Case) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let clip = try Self.clip(codec: test.codec, in: directory)
        // The camera comes up after the daemon (which retries meanwhile), so that the reader attached before it.
        let camera = try RTSPCamera(clip: clip, codec: test.codec, user: test.authenticated ? "viewer" : nil,
                                    password: test.authenticated ? Self.password : nil, directory: directory, start: false)
        let url = camera.url.replacingOccurrences(of: "127.0.0.1", with: test.host)
        let daemon = try Self.daemon("rtsp\(test.codec)\(test.transport)",
                                     source: test.authenticated ? Self.credentialed(url) : url, transport: test.transport)
        let cat = try CatProcess(stream: daemon.name, frames: Self.frames, directory: directory)
        try camera.start()
        let (status, errors) = cat.finish()
        #expect(status == 0, "cat exited \(status): \(errors)\n\(daemon.log.suffix(3000))")
        let difference = firstDifference(try catMD5s(cat), try ffmpegMD5s(clip))
        #expect(difference == nil, "\(difference ?? "")")
        let log = daemon.log
        let how = test.transport == "udp" ? "UDP" : "interleaved TCP"
        #expect(log.contains("RTSP session playing: \(test.codec) over \(how) from \(url)"), "\(log.suffix(3000))")
        // pts: the RTP timestamps (90 kHz), in presentation order at 25 fps. The camera serves its clip again after
        // its BYE: a new session, whose first frame says so (discontinuity), may already be in the ring.
        let frames = readFrames(daemon.shmName, count: Self.frames)
        let steps = zip(frames, frames.dropFirst()).filter { !$1.flags.contains(.discontinuity) }.map { $1.pts - $0.pts }
        #expect(frames.count == Self.frames && steps.allSatisfy { $0 == 3600 }, "\(steps)")
        // The server's RTP session has our receiver reports (the first goes out a second into the session).
        let deadline = Date().addingTimeInterval(10)
        while camera.receiverReports == 0 && Date() < deadline { usleep(50_000) }
        #expect(camera.receiverReports > 0, "no RTCP receiver report reached the server: \(camera.log.suffix(1000))")
        #expect(!log.contains(Self.password))
        #expect(daemon.isRunning)
    }

    /// The camera loses power mid-stream and comes back: the daemon publishes what it had, says the session ended
    /// and that the camera does not answer (once, however many attempts), and streams every frame of the new
    /// session bit-exact.
    @Test(arguments: ["udp", "tcp"])
    func aCameraKilledAndBackStreamsOn(transport: String) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let clip = try Self.clip(codec: "h264", in: directory)
        // A longer clip: the camera is killed while it is still sending.
        let long = try Self.repeated(clip, times: 10, in: directory)
        let camera = try RTSPCamera(clip: long, codec: "h264", directory: directory)
        let metricsPort = freePort()
        let daemon = try Self.daemon("rtspkill\(transport)", source: camera.url, transport: transport, metricsPort: metricsPort)
        let deadline = Date().addingTimeInterval(30)
        while (daemon.status?.counters.framesPublished ?? 0) < 20 && Date() < deadline { usleep(20_000) }
        #expect((daemon.status?.counters.framesPublished ?? 0) >= 20, "\(daemon.log.suffix(2000))")
        camera.kill()
        while !daemon.log.contains("cannot connect: Connection refused") && Date() < deadline.addingTimeInterval(10) { usleep(20_000) }
        #expect(daemon.log.contains("RTSP session ended: the server closed the connection; reconnecting"), "\(daemon.log.suffix(2000))")
        // Several attempts while it is down; one line.
        usleep(1_500_000)
        let cat = try CatProcess(stream: daemon.name, frames: Self.frames, directory: directory)
        try camera.start()
        #expect(cat.finish().status == 0, "\(daemon.log.suffix(2000))")
        let difference = firstDifference(try catMD5s(cat), try ffmpegMD5s(clip))
        #expect(difference == nil, "\(difference ?? "")")
        let log = daemon.log
        // Said once at warning level (each attempt is a debug line).
        let warnings = log.split(separator: "\n").filter { $0.contains(" warning ") && $0.contains("cannot connect: Connection refused") }
        #expect(warnings.count == 1, "\(warnings)")
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        let labels = "stream=\"\(daemon.name)\""
        #expect((sample(body, "streamrecvd_rtsp_failures_total", labels + ",reason=\"unreachable\"") ?? 0) >= 2, "\(body)")
        #expect((sample(body, "streamrecvd_rtsp_failures_total", labels + ",reason=\"closed\"") ?? 0) == 1)
        #expect((sample(body, "streamrecvd_rtsp_sessions_total", labels) ?? 0) >= 2)
        #expect(sample(body, "streamrecvd_rtsp_playing", labels) == 1)
        #expect(daemon.isRunning)
    }

    /// A camera that hangs (SIGSTOP: its connection open, nothing sent, nothing answered): a session without a packet
    /// for a second asks the server, gets no answer, and ends well before idle_timeout; once the camera resumes, a new
    /// session streams.
    @Test func aCameraThatHangsIsNoticedAndStreamsAgainOnceItResumes() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let clip = try Self.clip(codec: "h264", in: directory)
        let long = try Self.repeated(clip, times: 20, in: directory)
        let camera = try RTSPCamera(clip: long, codec: "h264", directory: directory)
        let metricsPort = freePort()
        let daemon = try Self.daemon("rtsphang", source: camera.url, transport: "udp", ["idle_timeout": "60"], metricsPort: metricsPort)
        let deadline = Date().addingTimeInterval(60)
        while (daemon.status?.counters.framesPublished ?? 0) < 10 && Date() < deadline { usleep(20_000) }
        camera.signal(SIGSTOP)
        while !daemon.log.contains("RTSP session ended: no answer to") && Date() < deadline { usleep(50_000) }
        #expect(daemon.log.contains("RTSP session ended: no answer to"), "\(daemon.log.suffix(2000))")
        let before = daemon.status?.counters.framesPublished ?? 0
        camera.signal(SIGCONT)
        while (daemon.status?.counters.framesPublished ?? 0) < before + 30 && Date() < deadline { usleep(50_000) }
        #expect((daemon.status?.counters.framesPublished ?? 0) >= before + 30, "\(daemon.log.suffix(3000))")
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        #expect((sample(body, "streamrecvd_rtsp_failures_total", "stream=\"\(daemon.name)\",reason=\"timeout\"") ?? 0) >= 1)
        #expect(daemon.isRunning)
    }

    /// A packet the camera never sends (scripts/rtsp-lossy-camera.py drops the first of frame 10): the frames it
    /// damaged are flagged until the next keyframe, the daemon asks the camera for one with RTCP PLI on the session
    /// (keyframe_request), and every frame before the loss and from the keyframe on is bit-exact.
    @Test func aLostPacketIsFlaggedAndAKeyframeIsAskedForOnTheSession() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let stream = try GeneratedStreams.encode(codec: "h264", size: "320x240", frames: Self.frames,
                                                 encoderParameters: "keyint=30:min-keyint=30:bframes=0:scenecut=0",
                                                 in: directory, name: "lossy.h264")
        let port = freePort()
        let cameraLog = directory.appendingPathComponent("lossy-camera.log").path
        let camera = try spawn("/usr/bin/python3", [
            TestEnvironment.repositoryRoot.appendingPathComponent("scripts/rtsp-lossy-camera.py").path,
            "--port", String(port), "--stream", stream.path, "--fps", "25", "--drop-frame", "10",
        ], log: cameraLog)
        defer {
            kill(camera, SIGKILL)
            var status: Int32 = 0
            waitpid(camera, &status, 0)
        }
        func said(_ text: String) -> Bool { ((try? String(contentsOfFile: cameraLog, encoding: .utf8)) ?? "").contains(text) }
        let deadline = Date().addingTimeInterval(60)
        while !said("ready") && Date() < deadline { usleep(20_000) }
        let metricsPort = freePort()
        let daemon = try Self.daemon("rtsploss", source: "rtsp://127.0.0.1:\(port)/cam", transport: "udp",
                                     ["keyframe_request": "\"pli\"", "keyframe_request_interval": "0.2"], metricsPort: metricsPort)
        while !said("done") && Date() < deadline { usleep(50_000) }
        let cameraSaid = (try? String(contentsOfFile: cameraLog, encoding: .utf8)) ?? ""
        #expect(said("done"), "\(cameraSaid)\n\(daemon.log.suffix(2000))")
        // The camera's SSRC (scripts/bench-rtsp.py's packetizer): "STRM".
        #expect(cameraSaid.contains("rtcp-pli \(0x5354_524D)"), "no PLI reached the camera: \(cameraSaid)")
        let reference = try referenceFrames(stream.path, frameBytes: 320 * 240 * 3 / 2)
        let frames = readFrames(daemon.shmName, count: Self.frames)
        var corrupt = 0
        for frame in frames {
            let index = Int(frame.pts / 3600)
            guard index >= 0, index < reference.count else {
                Issue.record("pts \(frame.pts) names no frame")
                continue
            }
            if (10..<30).contains(index) {
                #expect(frame.flags.contains(.corrupt), "frame \(index), damaged by the loss, is not flagged")
                corrupt += 1
            } else {
                #expect(!frame.flags.contains(.corrupt) && frame.pixels == reference[index], "frame \(index) differs or is flagged")
            }
        }
        #expect(corrupt > 0 && frames.count >= Self.frames - 1, "\(frames.count) frames, \(corrupt) flagged")
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        let labels = "stream=\"\(daemon.name)\""
        #expect(sample(body, "streamrecvd_rtp_packets_lost_total", labels) == 1, "\(body)")
        #expect((sample(body, "streamrecvd_keyframe_requests_total", labels) ?? 0) >= 1)
        #expect(daemon.isRunning)
    }

    /// A wrong password, a port nobody answers on, a server that answers garbage: each a clear line, a counter and
    /// a STATUS state, the daemon up and its other stream streaming; the password in no log line, metric or status.
    @Test func failuresAreSaidCountedAndShown() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let clip = try Self.clip(codec: "h264", in: directory)
        let camera = try RTSPCamera(clip: clip, codec: "h264", user: "viewer", password: Self.password, directory: directory)
        let garbage = try GarbageServer()
        let unreachable = freePort()
        let wrong = "wrong-password-\(UInt32.random(in: 0...UInt32.max))"
        struct Case {
            var url: String
            var line: String
            var reason: String
        }
        let cases = [
            Case(url: Self.credentialed(camera.url, password: wrong), line: "the server refused the credentials (401 Unauthorized)", reason: "unauthorized"),
            Case(url: camera.url, line: "the server wants credentials (401 Unauthorized) and source has none", reason: "unauthorized"),
            Case(url: "rtsp://127.0.0.1:\(unreachable)/cam", line: "cannot connect: Connection refused", reason: "unreachable"),
            Case(url: "rtsp://127.0.0.1:\(garbage.port)/cam", line: "protocol error: the server's bytes are not RTSP", reason: "protocol"),
        ]
        for test in cases {
            let metricsPort = freePort()
            let notify = try NotifyListener(directory: try TestEnvironment.temporaryDirectory())
            let daemon = try Self.daemon("rtspfail", source: test.url, metricsPort: metricsPort, start: false)
            try daemon.start(environment: ["NOTIFY_SOCKET": notify.path])
            let statusLines = notify.receive(until: { $0.contains(test.line) }, seconds: 15)
            #expect(statusLines.last?.contains("(rtsp \(test.line)") == true, "STATUS: \(statusLines.suffix(3))\n\(daemon.log.suffix(2000))")
            #expect(statusLines.last?.contains("waiting") == true)
            // The ring header says it too, for `streamrecvctl status` (it alternates with "connecting" at each try).
            let shown = Date().addingTimeInterval(10)
            while !(daemon.status?.sourceStatus.contains("rtsp \(test.line)") ?? false) && Date() < shown { usleep(20_000) }
            let ctl = try runProcess(tool("streamrecvctl"), ["status", daemon.name, "--json"])
            #expect(daemon.status?.sourceStatus.contains("rtsp \(test.line)") == true, "\(ctl.text)")
            #expect(ctl.text.contains("\"source_status\":\"rtsp "), "\(ctl.text)")
            let log = daemon.log
            #expect(log.contains("RTSP \(test.url.contains("@") ? "rtsp://127.0.0.1:\(camera.port)/cam" : test.url): \(test.line); retrying"),
                    "\(log.suffix(2000))")
            let body = try httpGet(port: metricsPort, path: "/metrics").body
            #expect((sample(body, "streamrecvd_rtsp_failures_total", "stream=\"\(daemon.name)\",reason=\"\(test.reason)\"") ?? 0) >= 1, "\(body)")
            for secret in [wrong, Self.password] {
                #expect(!log.contains(secret) && !body.contains(secret) && !statusLines.joined().contains(secret)
                        && !ctl.text.contains(secret), "a password leaked")
            }
            let check = try runProcess(tool("streamrecvd"), ["--check-config", daemon.configPath])
            #expect(check.status == 0 && !check.text.contains(wrong), "\(check.text)")
            #expect(daemon.isRunning)
            #expect(daemon.stop() == 0)
        }
        #expect(garbage.connections > 0)
    }
}

/// A TCP server that answers every connection with bytes that are not RTSP, then closes it.
final class GarbageServer {
    let port: Int
    private let descriptor: Int32
    private let thread: Thread
    private let count: Counter

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0
        func increment() { lock.withLock { value += 1 } }
        var current: Int { lock.withLock { value } }
    }

    var connections: Int { count.current }

    init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.descriptor = descriptor
        var yes: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(descriptor, pointer, length) == 0 && getsockname(descriptor, pointer, &length) == 0
            }
        }
        guard bound, listen(descriptor, 8) == 0 else { throw HarnessError(description: "garbage server: \(String(cString: strerror(errno)))") }
        port = Int(UInt16(bigEndian: address.sin_port))
        let (listener, count) = (descriptor, Counter())
        self.count = count
        thread = Thread {
            let junk = Array("\u{01}\u{02}\u{7f}garbage \u{00}\u{ff}\r\n\r\n".utf8)
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                count.increment()
                var buffer = [UInt8](repeating: 0, count: 1024)
                _ = recv(client, &buffer, buffer.count, 0)
                _ = junk.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                usleep(100_000)
                Glibc.close(client)
            }
        }
        thread.start()
    }

    deinit {
        shutdown(descriptor, Int32(SHUT_RDWR))
        Glibc.close(descriptor)
    }
}
