import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

/// srt:// with FFmpeg as the caller (`ffmpeg -re -i clip.ts -c copy -f mpegts srt://…`, as OBS and encoders send):
/// every frame bit-exact against FFmpeg's decode of the same MPEG-TS; callers with the wrong passphrase refused with
/// a line and a counter, the passphrase in neither; a sender killed mid-stream and started again.
@Suite(.serialized) struct SRTIngestTests {
    static let frames = 60
    static let passphrase = "streamrecv-srt-secret"

    /// 60 frames of testsrc2 in MPEG-TS as FFmpeg muxes it (B-frames for H.264).
    static func clip(codec: String, in directory: URL) throws -> String {
        let path = directory.appendingPathComponent("clip.ts").path
        let encoder = codec == "h264" ? ["-c:v", "libx264", "-x264-params", "bframes=2:keyint=30"]
            : ["-c:v", "libx265", "-x265-params", "log-level=error:keyint=30"]
        try runChecked("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
                                  "-frames:v", String(frames), "-pix_fmt", "yuv420p"] + encoder + ["-f", "mpegts", path])
        return path
    }

    /// A caller with the right passphrase sends `clip`: every frame `cat` reads must be FFmpeg's decode of it.
    static func expectBitExact(_ clip: String, through daemon: DaemonProcess, directory: URL) throws {
        let cat = try CatProcess(stream: daemon.name, frames: frames, directory: directory)
        let sent = try send(clip, to: url(daemon))
        #expect(sent.status == 0, "ffmpeg: \(sent.text)")
        #expect(cat.finish().status == 0)
        let difference = firstDifference(try catMD5s(cat), try ffmpegMD5s(clip))
        #expect(difference == nil, "\(difference ?? "")")
    }

    static func url(_ daemon: DaemonProcess, passphrase: String? = SRTIngestTests.passphrase) -> String {
        "srt://127.0.0.1:\(daemon.port)" + (passphrase.map { "?passphrase=\($0)" } ?? "")
    }

    /// FFmpeg as the SRT caller, paced at the clip's rate; `loops` extra passes of the clip. With `record`, what was
    /// sent is written there too (FFmpeg's tee muxer): a looped clip is not the clip twice at the seam.
    static func send(_ clip: String, to url: String, loops: Int = 0, record: String? = nil) throws -> ProcessResult {
        let output = record.map { ["-map", "0", "-f", "tee", "[f=mpegts]\(url.replacingOccurrences(of: ":", with: "\\:"))|[f=mpegts]\($0)"] }
            ?? ["-f", "mpegts", url]
        return try runProcess("ffmpeg", ["-v", "error", "-re", "-stream_loop", String(loops), "-i", clip, "-c", "copy"] + output)
    }

    static func daemon(_ label: String, _ settings: [String: String] = [:], metricsPort: Int? = nil) throws -> DaemonProcess {
        try DaemonProcess(label: label, settings: [
            "max_width": "320", "max_height": "240", "slots": String(frames + 8),
            "passphrase": "\"\(passphrase)\"",
        ].merging(settings) { $1 }, daemonSettings: metricsPort.map { ["metrics": "\"127.0.0.1:\($0)\""] } ?? [:],
            transport: "srt")
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var codec: String
        var delivery: String
        var testDescription: String { "\(codec), \(delivery) delivery" }
    }

    @Test(arguments: [Case(codec: "h264", delivery: "arrival"), Case(codec: "h265", delivery: "arrival"),
                      Case(codec: "h264", delivery: "timed")])
    func everyFrameBitExact(_ test: Case) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let clip = try Self.clip(codec: test.codec, in: directory)
        var settings = ["srt_delivery": "\"\(test.delivery)\""]
        if test.delivery == "timed" { settings["latency_ms"] = "40" }
        let daemon = try Self.daemon("srt\(test.codec)\(test.delivery)", settings)
        let cat = try CatProcess(stream: daemon.name, frames: Self.frames, directory: directory)
        // Timed delivery loses what is still held back when a caller closes (libsrt): a second pass of the clip
        // keeps the caller open until the first pass is out.
        let record = directory.appendingPathComponent("sent.ts").path
        let sent = try Self.send(clip, to: Self.url(daemon), loops: test.delivery == "timed" ? 1 : 0, record: record)
        #expect(sent.status == 0, "ffmpeg: \(sent.text)")
        let (status, errors) = cat.finish()
        #expect(status == 0, "cat exited \(status): \(errors)\n\(daemon.log.suffix(3000))")
        let difference = firstDifference(try catMD5s(cat), Array(try ffmpegMD5s(record).prefix(Self.frames)))
        #expect(difference == nil, "\(difference ?? "")")
        #expect(daemon.log.contains("MPEG-TS program: \(test.codec) video on PID"))
        if test.delivery == "arrival" {
            // pts: the PES timestamps (90 kHz), in presentation order at 25 fps.
            let pts = readFrames(daemon.shmName, count: Self.frames).map(\.pts)
            #expect(pts.count == Self.frames && zip(pts, pts.dropFirst()).allSatisfy { $1 - $0 == 3600 },
                    "\(zip(pts, pts.dropFirst()).map { $1 - $0 })")
            #expect(daemon.waitUntilPublished(UInt64(Self.frames), timeout: 30))
            #expect(daemon.log.contains("sender disconnected: sender closed the connection"))
        }
    }

    @Test func callersWithTheWrongPassphraseAreRefusedAndCounted() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let clip = try Self.clip(codec: "h264", in: directory)
        let metricsPort = freePort()
        let daemon = try Self.daemon("srtpass", metricsPort: metricsPort)
        let wrong = "not-the-right-one"
        for _ in 0..<2 {
            let refused = try Self.send(clip, to: Self.url(daemon, passphrase: wrong))
            #expect(refused.status != 0, "a caller with the wrong passphrase must not get through")
        }
        #expect(try Self.send(clip, to: Self.url(daemon, passphrase: nil)).status != 0, "nor one that does not encrypt")
        let cat = try CatProcess(stream: daemon.name, frames: Self.frames, directory: directory)
        let sent = try Self.send(clip, to: Self.url(daemon))
        #expect(sent.status == 0, "ffmpeg: \(sent.text)")
        #expect(cat.finish().status == 0)
        #expect(firstDifference(try catMD5s(cat), try ffmpegMD5s(clip)) == nil)
        let log = daemon.log
        #expect(log.contains("SRT caller refused: wrong passphrase (remote"), "\(log.suffix(2000))")
        #expect(log.contains("SRT caller refused: it does not encrypt, and this stream has a passphrase (remote"))
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        let refusals = sample(body, "streamrecvd_refused_total", "stream=\"\(daemon.name)\",reason=\"passphrase\"")
        #expect(refusals == 3, "refusals counted: \(body.split(separator: "\n").filter { $0.contains("refused") })")
        for secret in [Self.passphrase, wrong] {
            #expect(!log.contains(secret) && !body.contains(secret), "a passphrase leaked")
        }
        let check = try runProcess(tool("streamrecvd"), ["--check-config", daemon.configPath])
        #expect(check.status == 0 && !check.text.contains(Self.passphrase), "\(check.text)")
        #expect(daemon.isRunning)
    }

    /// The sender's process is killed (no SRT shutdown reaches the daemon): idle_timeout lets it go, and the same
    /// sender started again streams every frame bit-exact.
    @Test func aKilledSenderStartedAgainStreamsOn() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let clip = try Self.clip(codec: "h264", in: directory)
        let daemon = try Self.daemon("srtkill", ["idle_timeout": "1"])
        let first = Process()
        first.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        first.arguments = ["-v", "quiet", "-re", "-stream_loop", "-1", "-i", clip, "-c", "copy", "-f", "mpegts", Self.url(daemon)]
        try first.run()
        let deadline = Date().addingTimeInterval(20)
        while (daemon.status?.counters.framesPublished ?? 0) < 10 && Date() < deadline { usleep(20_000) }
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        #expect((daemon.status?.counters.framesPublished ?? 0) >= 10)
        // Let go once it has delivered no video for idle_timeout.
        while daemon.status?.state != .waiting && Date() < deadline.addingTimeInterval(10) { usleep(20_000) }
        #expect(daemon.status?.state == .waiting)
        #expect(daemon.log.contains("sender disconnected: no video for"))
        try Self.expectBitExact(clip, through: daemon, directory: directory)
        #expect(daemon.isRunning)
    }

    /// Socket activation: systemd-socket-activate owns the UDP socket and starts the daemon on the caller's first
    /// handshake packet; the SRT listener adopts the socket (srt_bind_acquire), and the caller, retrying its
    /// handshake, gets through.
    @Test func socketActivation() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let clip = try Self.clip(codec: "h264", in: directory)
        let daemon = try DaemonProcess(label: "srtactivate", settings: [
            "max_width": "320", "max_height": "240", "slots": String(Self.frames + 8),
        ], transport: "srt", start: false)
        let activationPort = freePort()
        let activator = try SocketActivator(daemon: daemon, port: activationPort, datagram: true)
        defer { withExtendedLifetime(activator) {} }
        let record = directory.appendingPathComponent("sent.ts").path
        var sent = try Self.send(clip, to: "srt://127.0.0.1:\(activationPort)?connect_timeout=10000", record: record)
        // A caller that gave up while the daemon was still starting tries again, as encoders do.
        if sent.status != 0 { sent = try Self.send(clip, to: "srt://127.0.0.1:\(activationPort)", record: record) }
        #expect(sent.status == 0, "ffmpeg: \(sent.text)\n\(daemon.log.suffix(2000))")
        #expect(daemon.waitUntilPublished(UInt64(Self.frames), timeout: 30), "\(daemon.log.suffix(2000))")
        #expect(daemon.log.contains("inherited socket"))
        #expect(daemon.log.contains("MPEG-TS program: h264 video on PID"))
    }
}
