import Foundation
import FrameFormats
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// The hostile-server suite's transport cases: a server that refuses interleaved TCP, redirects, a flood.
extension RTSPHostileServerTests {
    /// Item 8: a server that answers 461 Unsupported Transport to interleaved TCP (VLC 3.0) is asked for UDP in the
    /// same session, said once, shown in the status; later sessions go to UDP at once.
    @Test func aServerThatRefusesInterleavedTCPIsPlayedOverUDP() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let stream = try Self.stream(in: directory)
        let camera = try HostileCamera(mode: "tcp-461", stream: stream.path, directory: directory)
        let metrics = freePort()
        let daemon = try Self.daemon("rtsp461", source: camera.url, ["idle_timeout": "1"], metricsPort: metrics)
        let reference = try referenceFrames(stream.path, frameBytes: 320 * 240 * 3 / 2)
        let frames = readFrames(daemon.shmName, count: Self.frames)
        #expect(frames.count == Self.frames && frames.allSatisfy { $0.pixels == reference[Int($0.pts / 3600)] }, "\(daemon.log.suffix(2000))")
        #expect(daemon.status?.sourceStatus.contains("rtsp playing h264 over UDP (the server refuses interleaved TCP)") == true
                || daemon.log.contains("RTSP session playing: h264 over UDP (the server refuses interleaved TCP)"))
        // The clip ends, the session stalls after idle_timeout, the next one asks for UDP straight away.
        #expect(camera.wait(for: "playing 2", seconds: 20), "\(camera.log)")
        #expect(camera.count("setup tcp") == 1 && camera.count("setup udp") >= 2, "\(camera.log)")
        let said = daemon.log.split(separator: "\n").filter { $0.contains("the server refuses interleaved TCP (461 Unsupported Transport); using UDP") }
        #expect(said.count == 1, "\(said)")
        #expect(daemon.isRunning)
    }

    /// A server asked for UDP whose SETUP answer names neither server_port nor ssrc: whoever sends to our port pair
    /// first would decide whose video this is (a local user reads the pair from /proc/net/udp), so the session ends,
    /// said once, and the next asks for interleaved TCP, where the frames are the camera's.
    @Test func aServerWhoseUDPMediaCannotBeVerifiedIsAskedForInterleavedTCP() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let stream = try Self.stream(in: directory)
        let camera = try HostileCamera(mode: "no-server-port", stream: stream.path, directory: directory)
        let daemon = try Self.daemon("rtspnoport", source: camera.url, ["rtsp_transport": "\"udp\""], metricsPort: freePort())
        let reference = try referenceFrames(stream.path, frameBytes: 320 * 240 * 3 / 2)
        let frames = readFrames(daemon.shmName, count: Self.frames)
        #expect(frames.count == Self.frames && frames.allSatisfy { $0.pixels == reference[Int($0.pts / 3600)] }, "\(daemon.log.suffix(2000))")
        #expect(camera.count("setup udp") == 1 && camera.count("setup tcp") >= 1, "\(camera.log)")
        let said = daemon.log.split(separator: "\n").filter { $0.contains("names neither server_port nor ssrc, so its UDP media") }
        #expect(said.count == 1, "\(said)")
        #expect(daemon.log.contains("RTSP session playing: h264 over interleaved TCP (the server's UDP media cannot be told from another process's)"),
                "\(daemon.log.suffix(2000))")
        #expect(daemon.isRunning)
    }

    /// Item 9: a 302 to another server is followed there, without the credentials (another host:port); a redirect
    /// to another scheme, and a loop, are refused with a clear reason, counted, shown.
    @Test func redirectsAreFollowedWithinBounds() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let stream = try Self.stream(in: directory)
        let target = try HostileCamera(mode: "play", stream: stream.path, directory: directory)
        let redirecting = try HostileCamera(mode: "redirect", stream: stream.path, directory: directory, ["--location", target.url])
        var metrics = freePort()
        let source = redirecting.url.replacingOccurrences(of: "rtsp://", with: "rtsp://viewer:redirect-secret@")
        var daemon = try Self.daemon("rtspredir", source: source, metricsPort: metrics)
        #expect(target.wait(for: "playing 1", seconds: 20), "\(target.log)\n\(daemon.log.suffix(2000))")
        let reference = try referenceFrames(stream.path, frameBytes: 320 * 240 * 3 / 2)
        let frames = readFrames(daemon.shmName, count: Self.frames)
        #expect(frames.count == Self.frames && frames.allSatisfy { $0.pixels == reference[Int($0.pts / 3600)] }, "\(daemon.log.suffix(2000))")
        #expect(daemon.log.contains("RTSP session playing: h264 over interleaved TCP (redirected to \(target.url)) from \(redirecting.url)"),
                "\(daemon.log.suffix(2000))")
        #expect(target.count("auth") == 0 && !daemon.log.contains("redirect-secret"), "credentials went to another server: \(target.log)")
        #expect(daemon.stop() == 0)
        for (location, reason) in [("http://127.0.0.1:\(target.port)/cam", "a redirect to another scheme (http) is not followed; only rtsp:// is"),
                                   ("", "more than 3 redirects")] {
            let camera = try HostileCamera(mode: "redirect", stream: stream.path, directory: directory,
                                           ["--location", location.isEmpty ? "SELF" : location])
            metrics = freePort()
            daemon = try Self.daemon("rtspredir", source: camera.url, metricsPort: metrics)
            let line = "redirect not followed: \(reason)"
            let deadline = Date().addingTimeInterval(20)
            while !(daemon.status?.sourceStatus.contains(line) ?? false) && Date() < deadline { usleep(20_000) }
            #expect(daemon.status?.sourceStatus.contains(line) == true && daemon.log.contains(line), "\(daemon.log.suffix(2000))")
            #expect(try Self.metric(metrics, daemon, "streamrecvd_rtsp_failures_total", ",reason=\"redirect\"") >= 1)
            #expect(daemon.isRunning)
            #expect(daemon.stop() == 0)
        }
    }

    /// Item 7: a server that floods the interleaved connection (64 KiB RTP packets of garbage, as fast as the socket
    /// takes them) is held back: the daemon stops reading while its decode queue is full, so its CPU time stays
    /// bounded (a resource bound, measured from /proc, not a timing); keep-alives are still answered; the daemon up.
    @Test(arguments: ["rtp", "garbage"])
    func aFloodingServerIsHeldBack(flood: String) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let camera = try HostileCamera(mode: "flood", stream: try Self.stream(in: directory).path, directory: directory,
                                       ["--flood", flood, "--session-timeout", "2"])
        let metrics = freePort()
        let daemon = try Self.daemon("rtspflood", source: camera.url, ["idle_timeout": "0"], metricsPort: metrics)
        #expect(camera.wait(for: "playing 1", seconds: 20))
        usleep(1_000_000)
        let pid = try #require(daemon.pid)
        let before = (cpu: cpuSeconds(pid), wall: Date())
        usleep(6_000_000)
        let used = cpuSeconds(pid) - before.cpu
        let elapsed = Date().timeIntervalSince(before.wall)
        #expect(used < elapsed * 0.5, "\(used) s of CPU in \(elapsed) s\n\(daemon.log.suffix(2000))")
        if flood == "rtp" { #expect(camera.count("keepalive") >= 2, "\(camera.log)\n\(daemon.log.suffix(2000))") }
        #expect(daemon.isRunning)
    }
}

extension RTSPHostileServerTests {
    /// A camera that sends faster than the decoder takes (54 MB of lossless noise at socket speed) while the decode
    /// thread stalls 4 s, and answers no request after PLAY: the connection holds its reads back, and while it does,
    /// the server's silence is the daemon's own, so no keep-alive goes out (it would make the connection read on to
    /// its answer, past the backlog's bound). Every packet arrives and every frame is published, bit-exact.
    @Test func aServerFasterThanTheDecoderLosesNothingOverInterleavedTCP() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let clip = directory.appendingPathComponent("noise.h264").path
        try runChecked("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25", "-frames:v", "60",
                                  "-vf", "noise=alls=30:allf=t", "-pix_fmt", "yuv420p", "-c:v", "libx264",
                                  "-x264-params", "qp=0:keyint=30:min-keyint=30:bframes=0:scenecut=0", clip])
        let loops = 3, total = 60 * 3
        let camera = try HostileCamera(mode: "burst", stream: clip, directory: directory, ["--loops", String(loops)])
        let metrics = freePort()
        let daemon = try DaemonProcess(label: "rtspburst", settings: [
            "max_width": "640", "max_height": "360", "slots": "80", "rtsp_transport": "\"tcp\"",
        ], daemonSettings: ["metrics": "\"127.0.0.1:\(metrics)\""], source: camera.url, start: false)
        try daemon.start(environment: ["STREAMRECVD_FAULT_STALL_DECODE_SECONDS": "4"])
        let deadline = Date().addingTimeInterval(60)
        while (daemon.status?.counters.framesPublished ?? 0) < UInt64(total) && Date() < deadline { usleep(50_000) }
        #expect(daemon.status?.counters.framesPublished == UInt64(total), "\(camera.log)\n\(daemon.log.suffix(3000))")
        #expect(try Self.metric(metrics, daemon, "streamrecvd_datagrams_lost_total") == 0, "\(daemon.log.suffix(3000))")
        // The held session's requests only: the next session (the camera closes after its burst) gets nothing, and
        // is asked after a second of silence whether the camera is still there, as it should be.
        let heldSession = camera.log.components(separatedBy: "playing 2")[0]
        #expect(!heldSession.contains("keepalive"), "a request went out while reads were held back: \(camera.log)")
        // The frames the ring still holds: consecutive, each the clip's, bit-exact.
        let reference = try referenceFrames(clip, frameBytes: 640 * 360 * 3 / 2)
        let reader = try FrameRingReader(shmName: daemon.shmName)
        let held = min(reader.status.slotCount - 1, 60)
        var pixels: [UInt8] = [], previous = UInt64(total - held), checked = 0
        while checked < held, case .frame(let info) = reader.next(after: previous, into: &pixels, timeoutNanoseconds: 2_000_000_000) {
            #expect(info.sequence == previous + 1)
            #expect(PlanarConversion.planar(pixels, layout: info.layout) == reference[Int(info.pts / 3600) % 60], "frame \(info.sequence)")
            previous = info.sequence
            checked += 1
        }
        #expect(checked == held && held >= 8, "\(checked) of \(held)")
        #expect(daemon.isRunning)
    }
}

/// VLC 3.0 itself as the RTSP server (its stream output answers 461 to interleaved TCP), run as a throwaway user
/// (cvlc refuses root). Only where VLC is installed (`apt-get install vlc-bin vlc-plugin-base`).
@Suite(.serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/cvlc")))
struct RTSPFromVLCTests {
    @Test func vlcIsPlayedOverUDPAfterRefusingInterleavedTCP() throws {
        let user = try ThrowawayUser()
        let clip = "/tmp/\(user.name)-vlc.mkv"
        try runChecked("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-frames:v", "100",
                                  "-pix_fmt", "yuv420p", "-c:v", "libx264", "-x264-params", "keyint=25", clip])
        defer { try? FileManager.default.removeItem(atPath: clip) }
        chmod(clip, 0o644)
        let port = freePort()
        let directory = try TestEnvironment.temporaryDirectory()
        let vlc = try spawn("/usr/bin/setpriv", user.command("/usr/bin/env", [
            "HOME=/tmp", "/usr/bin/cvlc", "-q", "--loop", clip, "--sout", "#rtp{sdp=rtsp://127.0.0.1:\(port)/cam}",
        ]), log: directory.appendingPathComponent("vlc.log").path)
        defer {
            kill(vlc, SIGKILL)
            var status: Int32 = 0
            waitpid(vlc, &status, 0)
        }
        let daemon = try RTSPHostileServerTests.daemon("rtspvlc", source: "rtsp://127.0.0.1:\(port)/cam", metricsPort: freePort())
        let deadline = Date().addingTimeInterval(30)
        while (daemon.status?.counters.framesPublished ?? 0) < 25 && Date() < deadline { usleep(50_000) }
        #expect((daemon.status?.counters.framesPublished ?? 0) >= 25, "\(daemon.log.suffix(3000))")
        let log = daemon.log
        #expect(log.contains("the server refuses interleaved TCP (461 Unsupported Transport); using UDP"), "\(log.suffix(2000))")
        // VLC's own packets pass the media gate: its ports and SSRC are the ones its SETUP answer names.
        #expect(!log.contains("not the server's RTP port") && !log.contains("not the session's") && !log.contains("another SSRC than"),
                "\(log.suffix(2000))")
        #expect(daemon.isRunning)
    }
}
