import Foundation
import StreamrecvTestSupport
import Testing

/// H.265 over WebRTC (RFC 7798), as Chromium 136+ and Safari offer it where they have a hardware encoder: webrtcbin
/// sends x265 through rtph265pay, the daemon answers H.265 and publishes FFmpeg's frames of what was sent.
@Suite(.serialized) struct WebRTCH265Tests {
    @Test func aWebRTCBinClientSendingH265IsBitExact() throws {
        let metricsPort = freePort()
        let (daemon, whipPort, _) = try WebRTCIngestTests.daemon("whiph265", metricsPort: metricsPort)
        let record = daemon.directory.appendingPathComponent("sent.h265").path
        let frames = 90
        let cat = try CatProcess(stream: daemon.name, frames: frames - 10, timeout: 40, directory: daemon.directory)
        let client = try WebRTCIngestTests.runClient(url: "http://127.0.0.1:\(whipPort)/whip/\(daemon.name)", record: record,
                                                     frames: frames, extra: ["--codec", "h265", "--verbose"])
        #expect(client.result == "sent \(frames) frames", "\(client.log.suffix(3000))\n\(daemon.log.suffix(3000))")
        // The answer took H.265 (the offer had nothing else), with NACK and RTX.
        #expect(client.log.contains("H265/90000") && daemon.log.contains("(h265, payload type 96, "), "\(client.log.suffix(3000))\n\(daemon.log.suffix(2000))")
        try WebRTCIngestTests.expectBitExact(cat, against: record, daemon: daemon, fromFirst: true)
        try WebRTCIngestTests.expectEndedByDelete(daemon, metricsPort: metricsPort)
    }
}
