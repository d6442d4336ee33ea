import Foundation
import StreamrecvTestSupport
import Testing

/// listen = "whip" from a second, independent WebRTC stack: aiortc (python3-aiortc, scripts/aiortc-whip-client.py),
/// with its own ICE (aioice, full ICE against the daemon's ICE-lite), DTLS (pyOpenSSL), SRTP (pylibsrtp) and H.264
/// packetizer (STAP-A for the parameter sets, FU-A above 1300 bytes). First it sends an x264 clip made here as it
/// is, so that every frame the daemon publishes is checked bit-exact against FFmpeg's decode of the clip itself;
/// then aiortc's own encoder, against the H.264 it recorded. Each session is counted, DELETE ends it, and the
/// daemon stays up. With Opus beside the video (as OBS and browsers send it) the audio is taken and dropped: aiortc
/// cannot take an answer that rejects an audio m-section (the script says why).
@Suite(.serialized) struct AiortcPeerTests {
    /// aiortc-whip-client.py against the daemon; returns its last line and its log.
    static func runClient(url: String, frames: Int, extra: [String]) throws -> (result: String, log: String) {
        let script = TestEnvironment.repositoryRoot.appendingPathComponent("scripts/aiortc-whip-client.py").path
        let result = try runProcess("/usr/bin/python3", [script, url, "--token", WebRTCIngestTests.token,
                                                         "--frames", String(frames)] + extra)
        return (result.text.split(separator: "\n").last.map(String.init) ?? "", result.standardError)
    }

    /// `frames` of testsrc2 at 640x360 as x264 makes them for aiortc to pass through: constrained baseline, no
    /// B-frames, SPS and PPS before every IDR.
    static func makeClip(_ path: String, frames: Int) throws {
        try runChecked("ffmpeg", ["-v", "error", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30", "-frames:v", String(frames),
                                  "-c:v", "libx264", "-profile:v", "baseline", "-bf", "0", "-g", "30", "-tune", "zerolatency",
                                  "-x264-params", "repeat-headers=1", "-f", "h264", path])
    }

    /// Known bytes: a clip x264 made here (constrained baseline, no B-frames, SPS and PPS before every IDR, so it
    /// needs no keyframe request, which aiortc cannot honour for bytes it passes through) goes out unchanged.
    @Test func knownH264ArrivesBitExact() throws {
        let metricsPort = freePort()
        let (daemon, whipPort, _) = try WebRTCIngestTests.daemon("aiortcexact", metricsPort: metricsPort)
        let directory = daemon.directory
        let clip = directory.appendingPathComponent("clip.h264").path
        let record = directory.appendingPathComponent("sent.h264").path
        let frames = 90
        try Self.makeClip(clip, frames: frames)
        let cat = try CatProcess(stream: daemon.name, frames: frames - 10, timeout: 30, directory: directory)
        let client = try Self.runClient(url: "http://127.0.0.1:\(whipPort)/whip/\(daemon.name)", frames: frames,
                                        extra: ["--send", clip, "--record", record])
        #expect(client.result == "sent \(frames) frames", "\(client.log)\n\(daemon.log.suffix(3000))")
        // aiortc starts sending only once DTLS is up: the clip's first frame is the first published.
        try WebRTCIngestTests.expectBitExact(cat, against: clip, daemon: daemon, fromFirst: true)
        // What went into aiortc's packetizer is the clip, byte for byte: nothing was re-encoded.
        #expect(FileManager.default.contents(atPath: record) == FileManager.default.contents(atPath: clip))
        try WebRTCIngestTests.expectEndedByDelete(daemon, metricsPort: metricsPort)
    }

    /// aiortc's own encoder (libx264 through PyAV, which it re-creates when a REMB moves its bitrate by more than
    /// 10 %): what it encoded, as recorded at its packetizer's input, is what the daemon publishes.
    @Test func itsOwnEncoderArrivesBitExact() throws {
        let metricsPort = freePort()
        let (daemon, whipPort, _) = try WebRTCIngestTests.daemon("aiortcenc", metricsPort: metricsPort)
        let record = daemon.directory.appendingPathComponent("sent.h264").path
        let frames = 90
        let cat = try CatProcess(stream: daemon.name, frames: frames - 10, timeout: 30, directory: daemon.directory)
        let client = try Self.runClient(url: "http://127.0.0.1:\(whipPort)/whip/\(daemon.name)", frames: frames,
                                        extra: ["--record", record, "--size", "640x360"])
        #expect(client.result == "sent \(frames) frames", "\(client.log)\n\(daemon.log.suffix(3000))")
        let reference = try WebRTCIngestTests.expectBitExact(cat, against: record, daemon: daemon, fromFirst: true)
        #expect(reference.count == frames, "aiortc encoded \(reference.count) frames")
        try WebRTCIngestTests.expectEndedByDelete(daemon, metricsPort: metricsPort)
    }

    /// Opus beside the video, first in the offer as OBS puts it: answered in the BUNDLE, every audio packet
    /// authenticated and dropped (counted), and the video bit-exact as without it.
    @Test func audioBesideTheVideoIsTakenAndDropped() throws {
        let metricsPort = freePort()
        let (daemon, whipPort, _) = try WebRTCIngestTests.daemon("aiortcaudio", metricsPort: metricsPort)
        let directory = daemon.directory
        let clip = directory.appendingPathComponent("clip.h264").path
        let frames = 90
        try Self.makeClip(clip, frames: frames)
        let cat = try CatProcess(stream: daemon.name, frames: frames - 10, timeout: 30, directory: directory)
        let client = try Self.runClient(url: "http://127.0.0.1:\(whipPort)/whip/\(daemon.name)", frames: frames,
                                        extra: ["--send", clip, "--audio"])
        #expect(client.result == "sent \(frames) frames", "\(client.log)\n\(daemon.log.suffix(3000))")
        try WebRTCIngestTests.expectBitExact(cat, against: clip, daemon: daemon, fromFirst: true)
        #expect(daemon.log.contains("its audio (opus) taken and dropped"), "\(daemon.log.suffix(2000))")
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        // Three seconds of 20 ms Opus packets: about 150.
        #expect((unlabelled(body, "streamrecvd_webrtc_audio_packets_dropped_total") ?? 0) >= 50, "\(body)")
        #expect((unlabelled(body, "streamrecvd_webrtc_srtp_rejected_total") ?? 0) == 0, "\(body)")
        try WebRTCIngestTests.expectEndedByDelete(daemon, metricsPort: metricsPort)
    }
}
