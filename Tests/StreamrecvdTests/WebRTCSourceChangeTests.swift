import Foundation
import StreamrecvTestSupport
import Testing

/// A WHIP sender that changes its SSRC mid-session (an encoder restart does): webrtcbin's payloader takes a new
/// SSRC at frame 90 of 180 (no keyframe there, sequence numbers go on, RTX picks a new repair SSRC), through a relay
/// that loses 2 % each way. The session follows the new SSRC at once: NACK and RTX keep repairing loss, a PLI
/// brings a keyframe, and nearly every frame is published, each bit-exact (damaged ones are withheld).
@Suite(.serialized) struct WebRTCSourceChangeTests {
    @Test func aNewSSRCMidSessionIsFollowedAtOnce() throws {
        let metricsPort = freePort()
        let (daemon, whipPort, mediaPort) = try WebRTCIngestTests.daemon(
            "whipssrc", settings: ["loss_policy": "\"keyframe\""], metricsPort: metricsPort)
        let relay = try LossyRelay(to: mediaPort, loss: 0.02, delayMilliseconds: 10)
        let record = daemon.directory.appendingPathComponent("sent.h264").path
        let frames = 180
        // cat ends 15 s after the last frame it gets; its timeout also covers the wait for the first, which on a
        // loaded machine includes the client's start, ICE and DTLS (3 s was once too short).
        let cat = try CatProcess(stream: daemon.name, frames: 10 * frames, timeout: 15, directory: daemon.directory)
        let client = try WebRTCIngestTests.runClient(
            url: "http://127.0.0.1:\(whipPort)/whip/\(daemon.name)", record: record, frames: frames,
            extra: ["--timeout", "60", "--media-via", String(relay.port), "--change-ssrc-at", "90"])
        #expect(client.result == "sent \(frames) frames", "\(client.log)\n\(daemon.log.suffix(3000))")
        #expect(client.log.contains("SSRC changed from"), "\(client.log)")
        let (status, errors) = cat.finish()
        #expect(status == 2, "cat: \(errors)")
        let counts = relay.stop()
        let ours = try catMD5s(cat)
        let reference = try ffmpegMD5s(record)
        let published = daemon.status?.counters.framesPublished ?? 0
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        let summary = "published \(published), cat \(ours.count) of \(reference.count) (relay: \(counts))"
        print("aNewSSRCMidSessionIsFollowedAtOnce: \(summary)")
        let context = "\(summary)\n\(body)\n\(daemon.log.suffix(4000))"
        // ≥ 95 %: what the switch may cost is the frames until the keyframe the PLI brings.
        #expect(ours.count * 100 >= reference.count * 95, "\(context)")
        #expect(published * 100 >= UInt64(reference.count) * 95, "\(context)")
        #expect(Self.inOrderSubsequence(ours, of: reference), "a frame not FFmpeg's, or out of order: \(context)")
        #expect((unlabelled(body, "streamrecvd_webrtc_ssrc_changes_total") ?? 0) == 1, "\(context)")
        // No packet of the new source taken for a stranger's (an RTX repair labelled with the old SSRC was).
        let otherSource = body.split(separator: "\n").first { $0.hasPrefix("streamrecvd_rtp_packets_discarded_total{") && $0.contains("other_source") }
        #expect(otherSource.flatMap { $0.split(separator: " ").last.flatMap { Double($0) } } ?? 0 == 0, "\(context)")
        #expect(daemon.log.contains("changed SSRC from"), "\(context)")
        #expect(daemon.isRunning)
    }

    /// Every frame of `ours` is one of `reference`, in the same order (withheld frames leave gaps).
    static func inOrderSubsequence(_ ours: [String], of reference: [String]) -> Bool {
        var remaining = reference[...]
        for frame in ours {
            guard let index = remaining.firstIndex(of: frame) else { return false }
            remaining = remaining[(index + 1)...]
        }
        return true
    }
}

/// scripts/lossy-udp-relay.py in front of the daemon's media port, for as long as the value lives.
final class LossyRelay {
    let port = freePort()
    private let process = Process()
    private let output = Pipe()

    init(to mediaPort: Int, loss: Double, delayMilliseconds: Int) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [TestEnvironment.repositoryRoot.appendingPathComponent("scripts/lossy-udp-relay.py").path,
                             "--listen", "127.0.0.1:\(port)", "--to", "127.0.0.1:\(mediaPort)",
                             "--loss", String(loss), "--delay-ms", String(delayMilliseconds)]
        process.standardOutput = output
        try process.run()
        _ = output.fileHandleForReading.availableData  // "ready"
    }

    deinit { if process.isRunning { process.terminate() } }

    /// Stops it; its counts (`forwarded N dropped M`).
    func stop() -> String {
        process.terminate()
        process.waitUntilExit()
        return String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
