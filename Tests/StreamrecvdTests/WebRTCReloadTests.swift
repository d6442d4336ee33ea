import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

/// SIGHUP while a WHIP session streams (scripts/whip-client.py): a reload that leaves the whip stream unchanged
/// leaves its session alone, frames bit-exact across it; one that removes the stream ends the session, says so
/// in the log and to the client (a DTLS close_notify), and the daemon goes on.
@Suite(.serialized) struct WebRTCReloadTests {
    static func published(_ daemon: DaemonProcess) -> UInt64 { daemon.status?.counters.framesPublished ?? 0 }

    static func clientLog(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }

    /// Three reloads of the same file mid-session: the session is never ended or re-admitted, the decode thread
    /// never hears a disconnect, and every frame the client sent is published, bit-exact, in order.
    @Test func reloadsOfAnUnchangedConfigurationLeaveTheSessionStreaming() throws {
        let metricsPort = freePort()
        let (daemon, whipPort, _) = try WebRTCIngestTests.daemon("whipkeep", metricsPort: metricsPort)
        let record = daemon.directory.appendingPathComponent("sent.h264").path
        let logPath = daemon.directory.appendingPathComponent("client.log").path
        let frames = 240
        let cat = try CatProcess(stream: daemon.name, frames: frames - 10, timeout: 40, directory: daemon.directory)
        let client = try WebRTCIngestTests.startClient(url: "http://127.0.0.1:\(whipPort)/whip/\(daemon.name)", record: record,
                                                       frames: frames, extra: ["--timeout", "60"], log: logPath)
        defer { if client.isRunning { client.terminate() } }
        #expect(eventually(within: 30) { Self.published(daemon) >= 15 }, "\(Self.clientLog(logPath))\n\(daemon.log.suffix(2000))")
        for round in 1...3 {
            let before = daemon.log.components(separatedBy: "reloaded").count
            daemon.send(signal: SIGHUP)
            #expect(eventually(within: 20) { daemon.log.components(separatedBy: "reloaded").count > before },
                    "round \(round): \(daemon.log.suffix(2000))")
        }
        #expect(daemon.log.contains("unchanged \(daemon.name)"), "\(daemon.log.suffix(2000))")
        // The reloads happened mid-session: it is still open and frames still come after them.
        let afterReloads = Self.published(daemon)
        #expect(afterReloads < UInt64(frames - 30), "the client was nearly done before the reloads: nothing was tested")
        #expect(unlabelled(WebRTCHostileTests.metrics(metricsPort), "streamrecvd_webrtc_sessions") == 1)
        #expect(eventually(within: 30) { Self.published(daemon) > afterReloads + 30 })
        client.waitUntilExit()
        #expect(client.terminationStatus == 0, "\(Self.clientLog(logPath))\n\(daemon.log.suffix(2000))")
        try WebRTCIngestTests.expectBitExact(cat, against: record, daemon: daemon, fromFirst: true)
        let body = WebRTCHostileTests.metrics(metricsPort)
        #expect(unlabelled(body, "streamrecvd_webrtc_sessions_started_total") == 1, "\(body)")
        #expect(WebRTCHostileTests.ended(body, "deleted") == 1 && WebRTCHostileTests.ended(body, "stream_stopped") == 0, "\(body)")
        #expect(daemon.status?.counters.connections == 1, "the decode thread saw the sender leave and come back")
        #expect(daemon.log.components(separatedBy: "connected for stream \(daemon.name)").count - 1 == 1, "\(daemon.log.suffix(2000))")
        #expect(daemon.isRunning)
    }

    /// A reload that takes the whip stream away (renames it) mid-session: the session ends as stream_stopped,
    /// logged once; the client hears the DTLS close_notify and stops long before its frames are done; the old
    /// endpoint is 404; the daemon stays up and the renamed stream takes a new client, bit-exact.
    @Test func aReloadThatRemovesTheStreamEndsItsSessionAndTellsTheClient() throws {
        let metricsPort = freePort()
        let (daemon, whipPort, _) = try WebRTCIngestTests.daemon("whipdrop", metricsPort: metricsPort)
        let logPath = daemon.directory.appendingPathComponent("client.log").path
        let client = try WebRTCIngestTests.startClient(url: "http://127.0.0.1:\(whipPort)/whip/\(daemon.name)",
                                                       record: daemon.directory.appendingPathComponent("first.h264").path,
                                                       frames: 1800, extra: ["--timeout", "90"], log: logPath)
        defer { if client.isRunning { client.terminate() } }
        #expect(eventually(within: 30) { Self.published(daemon) >= 15 }, "\(Self.clientLog(logPath))\n\(daemon.log.suffix(2000))")
        let renamed = daemon.name + "-renamed"
        defer { shm_unlink("/streamrecv-" + renamed) }
        let base = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
        try base.replacingOccurrences(of: "name = \"\(daemon.name)\"", with: "name = \"\(renamed)\"")
            .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        daemon.send(signal: SIGHUP)
        #expect(eventually(within: 20) { daemon.log.contains("removed \(daemon.name)") }, "\(daemon.log.suffix(2000))")
        // Told, the client stops at once; untold, it would send its 1800 frames (a minute) into the void.
        let stopped = eventually(within: 20) { !client.isRunning }
        if client.isRunning { client.terminate() }
        client.waitUntilExit()
        let said = Self.clientLog(logPath)
        #expect(stopped && said.contains("failed: the server closed the DTLS association"), "\(said)\n\(daemon.log.suffix(2000))")
        let lines = daemon.log.components(separatedBy: "of stream \(daemon.name) ended: the stream stopped").count - 1
        #expect(lines == 1, "\(lines) lines\n\(daemon.log.suffix(2000))")
        // The decode thread's line names the daemon's side, not the sender, as the one that closed.
        #expect(eventually(within: 10) { daemon.log.contains("sender disconnected: listener closed") },
                "\(daemon.log.suffix(2000))")
        #expect(!daemon.log.contains("sender disconnected: sender closed the connection"), "\(daemon.log.suffix(2000))")
        var body = ""
        #expect(eventually(within: 10) {
            body = WebRTCHostileTests.metrics(metricsPort)
            return WebRTCHostileTests.ended(body, "stream_stopped") == 1 && unlabelled(body, "streamrecvd_webrtc_sessions") == 0
        }, "\(body)")
        #expect(daemon.isRunning)
        #expect(try WebRTCHostileTests.post(port: whipPort, stream: daemon.name, WebRTCHostileTests.offer(ufrag: "gone")) == 404)
        try WebRTCHostileTests.expectHonestClientIsBitExact(daemon, whipPort: whipPort, stream: renamed)
        body = WebRTCHostileTests.metrics(metricsPort)
        #expect(unlabelled(body, "streamrecvd_webrtc_sessions_started_total") == 2 && WebRTCHostileTests.ended(body, "deleted") == 1, "\(body)")
        #expect(daemon.isRunning)
    }
}
