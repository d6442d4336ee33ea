import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

/// The WHIP ingest against peers that do not play fair (STYLE.md §9): offers that never go on to ICE, a DTLS client
/// whose certificate is not the one its offer names, and a path that sends the client's SRTP twice or again later.
/// Each is bounded or refused and counted, the daemon stays up, and an honest webrtcbin client afterwards is
/// bit-exact (scripts/whip-client.py, scripts/lossy-udp-relay.py).
@Suite(.serialized) struct WebRTCHostileTests {
    /// An H.264 offer as webrtcbin writes it (scripts/whip-client.py --verbose), with its own ICE username fragment.
    static func offer(ufrag: String) -> String {
        let fingerprint = "25:E4:9A:F8:73:A8:35:CE:5B:59:95:ED:42:3C:BD:26:88:72:B8:98:1E:10:76:35:DC:8C:AF:8A:56:74:73:AA"
        return [
            "v=0", "o=- 1448189279818737347 0 IN IP4 0.0.0.0", "s=-", "t=0 0", "a=ice-options:trickle", "a=group:BUNDLE video0",
            "m=video 9 UDP/TLS/RTP/SAVPF 96 97", "c=IN IP4 0.0.0.0", "a=setup:actpass", "a=ice-ufrag:\(ufrag)",
            "a=ice-pwd:i/lBVDDjgOjEDMw61RB/3Vm4TJ2w1C5Q", "a=rtcp-mux", "a=rtcp-rsize", "a=sendonly", "a=rtpmap:96 H264/90000",
            "a=rtcp-fb:96 nack", "a=rtcp-fb:96 nack pli", "a=rtcp-fb:96 ccm fir", "a=rtpmap:97 rtx/90000", "a=fmtp:97 apt=96",
            "a=mid:video0", "a=fingerprint:sha-256 \(fingerprint)", "a=rtcp-mux-only",
            "a=candidate:1 1 UDP 2015364095 127.0.0.1 56195 typ host", "",
        ].joined(separator: "\r\n")
    }

    /// POSTs an offer to a stream's WHIP endpoint; the HTTP status.
    static func post(port: Int, stream: String, _ sdp: String) throws -> Int {
        try httpRequest(port: port, method: "POST", path: "/whip/\(stream)",
                        headers: ["Content-Type": "application/sdp", "Authorization": "Bearer \(WebRTCIngestTests.token)"], body: sdp).status
    }

    static func metrics(_ port: Int) -> String { (try? httpGet(port: port, path: "/metrics").body) ?? "" }

    static func ended(_ body: String, _ reason: String) -> Double? {
        sample(body, "streamrecvd_webrtc_sessions_ended_total", "reason=\"\(reason)\"")
    }

    /// An honest webrtcbin client on one of the daemon's streams (its first by default): every frame bit-exact from
    /// the recording's first.
    static func expectHonestClientIsBitExact(_ daemon: DaemonProcess, whipPort: Int, stream: String? = nil, frames: Int = 60,
                                             extra: [String] = []) throws {
        let stream = stream ?? daemon.name
        let record = daemon.directory.appendingPathComponent("honest.h264").path
        let cat = try CatProcess(stream: stream, frames: frames - 10, timeout: 40, directory: daemon.directory)
        let client = try WebRTCIngestTests.runClient(url: "http://127.0.0.1:\(whipPort)/whip/\(stream)", record: record,
                                                     frames: frames, extra: extra)
        #expect(client.result == "sent \(frames) frames", "\(client.log)\n\(daemon.log.suffix(3000))")
        try WebRTCIngestTests.expectBitExact(cat, against: record, daemon: daemon, fromFirst: true)
    }

    /// 100 offers to 100 streams that never go on to ICE, twice: `max_sessions` (64 by default) bounds them, the
    /// rest (even the stream a real client wants) get 503 and are counted, but an offer that takes over its own
    /// stream's stale session is let in; every half-open session ends by the ICE timeout, counted by reason, in a
    /// few log lines, not one each; the daemon's descriptors and memory come back to their baseline; then a real
    /// client gets in and is bit-exact.
    @Test func halfOpenSessionsAreCappedExpireAndLeaveNothingBehind() throws {
        let metricsPort = freePort()
        let (daemon, whipPort, _) = try WebRTCIngestTests.daemon("whiphalf", metricsPort: metricsPort)
        let pid = try #require(daemon.pid)
        // A stream holds one session at a time (second_sender): the cap is reached only across streams. These
        // hundred are added by a reload, with rings of a few KiB.
        let base = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
        let tokenLine = try #require(base.split(separator: "\n").first { $0.hasPrefix("token_file") })
        let names = (1...100).map { "\(daemon.name)-h\($0)" }
        // The daemon first: a running one puts back a ring removed under it.
        defer { daemon.stop(); for name in names { shm_unlink("/streamrecv-" + name) } }
        let tables = names.map { "\n[[stream]]\nname = \"\($0)\"\nlisten = \"whip\"\n\(tokenLine)\nhwaccel = \"none\"\nmax_width = 64\nmax_height = 64\nslots = 2\n" }
        try (base + tables.joined()).write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        daemon.send(signal: SIGHUP)
        #expect(eventually(within: 60) { daemon.log.contains("reloaded") && daemon.log.contains("taking WebRTC") && daemon.log.contains("\(names[99]) whip=") },
                "\(daemon.log.suffix(2000))")
        let (rssBaseline, descriptorsBaseline) = (residentKilobytes(pid), openDescriptors(pid))
        var measured: [String] = []
        var refusedBeforeHold = 0
        for round in 1...2 {
            var statuses: [Int: Int] = [:]
            for (index, name) in names.enumerated() {
                statuses[try Self.post(port: whipPort, stream: name, Self.offer(ufrag: "half\(round)x\(index)")), default: 0] += 1
            }
            #expect(statuses == [201: 64, 503: 36], "round \(round): \(statuses)\n\(daemon.log.suffix(2000))")
            // Full: the stream a real client wants is refused too, until the half-open sessions expire.
            #expect(try Self.post(port: whipPort, stream: daemon.name, Self.offer(ufrag: "real\(round)")) == 503)
            if round == 1 {
                // Full, but an offer that takes over its stream's stale session (no video for the 2 s hold) frees
                // that session's place: a client back after a crash is not refused for its leftover (503 until the
                // hold, counted).
                var status = 0
                _ = try eventually(within: 15) {
                    status = try Self.post(port: whipPort, stream: names[0], Self.offer(ufrag: "back\(refusedBeforeHold)"))
                    refusedBeforeHold += status == 503 ? 1 : 0
                    return status != 503
                }
                #expect(status == 201, "\(status)\n\(daemon.log.suffix(2000))")
            }
            let open = Self.metrics(metricsPort)
            #expect(unlabelled(open, "streamrecvd_webrtc_sessions") == 64, "\(open)")
            let (rssPeak, descriptorsPeak) = (residentKilobytes(pid), openDescriptors(pid))
            // The ICE timeout is 10 s, checked every second.
            var body = ""
            let expired = eventually(within: 40) {
                body = Self.metrics(metricsPort)
                return Self.ended(body, "ice_timeout") == Double(64 * round) && unlabelled(body, "streamrecvd_webrtc_sessions") == 0
            }
            #expect(expired, "round \(round): \(body)\n\(daemon.log.suffix(2000))")
            // The WHIP and metrics connections close a moment after their answers.
            #expect(eventually(within: 20) { openDescriptors(pid) <= descriptorsBaseline },
                    "round \(round): descriptors \(descriptorsBaseline) -> \(openDescriptors(pid))")
            let (rssAfter, descriptorsAfter) = (residentKilobytes(pid), openDescriptors(pid))
            // Generous: allocator pools keep some of what 64 sessions and 137 HTTP exchanges took.
            #expect(rssAfter - rssBaseline < 16_000, "round \(round): RSS \(rssBaseline) kB -> \(rssAfter) kB")
            measured.append("round \(round): RSS \(rssBaseline) -> \(rssPeak) (64 open) -> \(rssAfter) kB, descriptors \(descriptorsBaseline) -> \(descriptorsPeak) -> \(descriptorsAfter)")
        }
        print("half-open sessions: " + measured.joined(separator: "; "))
        let body = Self.metrics(metricsPort)
        #expect(unlabelled(body, "streamrecvd_webrtc_sessions_started_total") == 129, "\(body)")
        #expect(Self.ended(body, "taken_over") == 1, "\(body)")
        #expect(sample(body, "streamrecvd_webrtc_requests_refused_total", "reason=\"full\"") == Double(74 + refusedBeforeHold), "\(body)")
        let expiryLines = daemon.log.components(separatedBy: "ended: no ICE connectivity check").count - 1
        #expect(expiryLines >= 1 && expiryLines <= 8, "\(expiryLines) expiry lines for 128 sessions")
        try Self.expectHonestClientIsBitExact(daemon, whipPort: whipPort)
        #expect(daemon.isRunning)
    }

    /// A client whose DTLS certificate is not the one its offer's a=fingerprint names (a man in the middle who
    /// rewrote the offer): the handshake is refused, the session ends as fingerprint_mismatch in one log line, no
    /// video reaches the ring, and the next honest client is bit-exact.
    @Test func aCertificateThatIsNotTheOffersFingerprintIsRefused() throws {
        let metricsPort = freePort()
        let (daemon, whipPort, _) = try WebRTCIngestTests.daemon("whipfinger", metricsPort: metricsPort)
        let forged = try WebRTCIngestTests.runClient(url: "http://127.0.0.1:\(whipPort)/whip/\(daemon.name)",
                                                     record: daemon.directory.appendingPathComponent("forged.h264").path, frames: 30,
                                                     extra: ["--wrong-fingerprint", "--timeout", "20"])
        #expect(forged.result.hasPrefix("failed:"), "\(forged.result)\n\(forged.log)")
        var body = ""
        #expect(eventually(within: 30) {
            body = Self.metrics(metricsPort)
            return Self.ended(body, "fingerprint_mismatch") == 1 && unlabelled(body, "streamrecvd_webrtc_sessions") == 0
        }, "\(body)\n\(daemon.log.suffix(2000))")
        #expect(Self.ended(body, "dtls_failed") == 0 && Self.ended(body, "deleted") == 0, "\(body)")
        #expect(daemon.status?.counters.framesPublished == 0, "video from a refused session reached the ring")
        let lines = daemon.log.components(separatedBy: "certificate does not match its offer's fingerprint").count - 1
        #expect(lines == 1, "\(lines) lines\n\(daemon.log.suffix(2000))")
        #expect(!daemon.log.contains("connected for stream"), "\(daemon.log.suffix(2000))")
        #expect(daemon.isRunning)
        try Self.expectHonestClientIsBitExact(daemon, whipPort: whipPort)
        body = Self.metrics(metricsPort)
        #expect(Self.ended(body, "fingerprint_mismatch") == 1 && Self.ended(body, "deleted") == 1, "\(body)")
        #expect(daemon.isRunning)
    }

    /// The client's SRTP and SRTCP through a relay that sends 5 % of them twice and 2 % again 1.5 s later (by
    /// then past libsrtp's 128-packet replay window, or after the session's end): every copy is dropped and counted
    /// in srtp_rejected_total, and the frames are bit-exact from the first.
    @Test func replayedSRTPIsDroppedAndCounted() throws {
        let metricsPort = freePort()
        let (daemon, whipPort, mediaPort) = try WebRTCIngestTests.daemon("whipreplay", metricsPort: metricsPort)
        let relayPort = freePort()
        let relay = Process()
        relay.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        relay.arguments = [TestEnvironment.repositoryRoot.appendingPathComponent("scripts/lossy-udp-relay.py").path,
                           "--listen", "127.0.0.1:\(relayPort)", "--to", "127.0.0.1:\(mediaPort)", "--loss", "0", "--delay-ms", "2",
                           "--duplicate", "0.05", "--replay", "0.02", "--replay-delay-ms", "1500"]
        let relayOutput = Pipe()
        relay.standardOutput = relayOutput
        try relay.run()
        defer { if relay.isRunning { relay.terminate() } }
        _ = relayOutput.fileHandleForReading.availableData  // "ready"
        try Self.expectHonestClientIsBitExact(daemon, whipPort: whipPort, frames: 150, extra: ["--media-via", String(relayPort)])
        // Copies still pending are never sent, and not counted: the relay counts what it sent.
        relay.terminate()
        relay.waitUntilExit()
        let counts = String(decoding: relayOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let copiesLine = counts.split(separator: "\n").first { $0.hasPrefix("duplicated ") }.map { $0.split(separator: " ") } ?? []
        let (duplicated, replayed) = copiesLine.count == 4 ? (Int(copiesLine[1]) ?? 0, Int(copiesLine[3]) ?? 0) : (0, 0)
        #expect(duplicated >= 20 && replayed >= 5, "the relay copied too little to test anything: \(counts)")
        // Every copy sent was rejected (nothing else is, on this path); the last may still be on its way in.
        var body = ""
        let counted = eventually(within: 10) {
            body = Self.metrics(metricsPort)
            return (unlabelled(body, "streamrecvd_webrtc_srtp_rejected_total") ?? 0) >= Double(duplicated + replayed)
        }
        #expect(counted, "\(duplicated + replayed) copies sent (\(counts)), \(body)")
        print("replayed SRTP: relay \(counts.split(separator: "\n").joined(separator: ", ")); srtp_rejected_total \(unlabelled(body, "streamrecvd_webrtc_srtp_rejected_total") ?? -1)")
        #expect(Self.ended(body, "deleted") == 1 && unlabelled(body, "streamrecvd_webrtc_sessions_started_total") == 1, "\(body)")
        #expect(daemon.log.contains("SRTP packet dropped"), "\(daemon.log.suffix(2000))")
        #expect(daemon.isRunning)
    }
}
