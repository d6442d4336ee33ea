import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

/// `[webrtc]` with an operator's certificate: the WHIP endpoint and the share page speak HTTPS (OpenSSL, the same
/// library as DTLS). A webrtcbin client that trusts only that certificate posts its offer and sends bit-exact
/// video; plain HTTP to the port is refused and counted; a reload reads a renewed certificate, and keeps the one
/// in use when the new files are broken.
@Suite(.serialized) struct WHIPOverHTTPSTests {
    /// A daemon with one whip stream whose `[webrtc]` has `certificate` and `key`; its folder holds server.pem/.key.
    /// `listenHost`: where the endpoint listens ("0.0.0.0" for tests with other hosts).
    static func daemon(_ label: String, commonName: String = "localhost", metricsPort: Int? = nil,
                       listenHost: String = "127.0.0.1") throws -> (DaemonProcess, whipPort: Int, folder: URL) {
        let folder = try TestEnvironment.temporaryDirectory()
        let (certificate, key) = try TestCertificate.make(in: folder, commonName: commonName)
        let tokenPath = folder.appendingPathComponent("whip.token").path
        try (WebRTCIngestTests.token + "\n").write(toFile: tokenPath, atomically: true, encoding: .utf8)
        chmod(tokenPath, 0o600)
        let (whipPort, mediaPort) = (freePort(), freePort())
        let tables = "[webrtc]\nlisten = \"\(listenHost):\(whipPort)\"\nmedia = \"127.0.0.1:\(mediaPort)\"\n"
            + "certificate = \"\(certificate)\"\nkey = \"\(key)\""
        let daemon = try DaemonProcess(
            label: label, settings: ["token_file": "\"\(tokenPath)\"", "max_width": "1280", "max_height": "720", "slots": "200"],
            daemonSettings: metricsPort.map { ["metrics": "\"127.0.0.1:\($0)\""] } ?? [:], transport: "whip", tables: tables)
        return (daemon, whipPort, folder)
    }

    /// Polls the daemon's log until it holds `text` (a state, not a time: the deadline only ends a failing test).
    static func waitForLog(_ daemon: DaemonProcess, _ text: String, after offset: Int = 0, timeout: TimeInterval = 20) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if daemon.log.dropFirst(offset).contains(text) { return true }
            usleep(50_000)
        }
        return false
    }

    @Test func aClientTrustingOnlyTheCertificatePostsOverHTTPSAndIsBitExact() throws {
        let metricsPort = freePort()
        let (daemon, whipPort, folder) = try Self.daemon("https", metricsPort: metricsPort)
        let certificate = folder.appendingPathComponent("server.pem").path
        #expect(daemon.log.contains("WHIP on https://127.0.0.1:\(whipPort)/whip/STREAM"), "\(daemon.log.suffix(2000))")

        // Plain HTTP to the HTTPS port: no HTTP answer, the connection closed, the failure counted and said.
        let plain = try httpExchange(port: whipPort, "GET /streams.json HTTP/1.1\r\nHost: x\r\n\r\n", waitMilliseconds: 5000)
        #expect(!String(decoding: plain, as: UTF8.self).contains("streams"), "plain HTTP must get nothing from the page")
        #expect(Self.waitForLog(daemon, "failed: http request"), "\(daemon.log.suffix(2000))")

        // The share page's stream list, with the certificate as the only trust anchor.
        let list = try runProcess("curl", ["-sS", "--cacert", certificate, "https://localhost:\(whipPort)/streams.json"])
        #expect(list.status == 0 && list.text.contains(daemon.name), "\(list.standardError)")

        let record = daemon.directory.appendingPathComponent("sent.h264").path
        let frames = 90
        let cat = try CatProcess(stream: daemon.name, frames: frames - 10, timeout: 30, directory: daemon.directory)
        let script = TestEnvironment.repositoryRoot.appendingPathComponent("scripts/whip-client.py").path
        // Python's default context trusts SSL_CERT_FILE alone: a client that would refuse any other certificate.
        let client = try runProcess("/usr/bin/env", [
            "SSL_CERT_FILE=\(certificate)", "/usr/bin/python3", script, "https://localhost:\(whipPort)/whip/\(daemon.name)",
            "--token", WebRTCIngestTests.token, "--record", record, "--frames", String(frames),
        ])
        let last = client.text.split(separator: "\n").last.map(String.init) ?? ""
        #expect(last == "sent \(frames) frames", "\(client.standardError)\n\(daemon.log.suffix(3000))")
        try WebRTCIngestTests.expectBitExact(cat, against: record, daemon: daemon, fromFirst: false)
        try WebRTCIngestTests.expectEndedByDelete(daemon, metricsPort: metricsPort)
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        #expect(body.contains("streamrecvd_webrtc_requests_refused_total{reason=\"tls_handshake\"} 1"), "\(body)")
    }

    /// certbot renews, then `systemctl reload`: new connections get the new certificate. A broken renewal (a key
    /// that is not the certificate's) is refused with a reason and the certificate in use stays.
    @Test func aReloadReadsARenewedCertificateAndKeepsTheOldOneWhenTheNewIsBroken() throws {
        let (daemon, whipPort, folder) = try Self.daemon("renew", commonName: "first-certificate")
        #expect(try TestCertificate.presentedSubject(port: whipPort).contains("first-certificate"))

        _ = try TestCertificate.make(in: folder, commonName: "renewed-certificate")
        var offset = daemon.log.utf8.count
        daemon.send(signal: SIGHUP)
        #expect(Self.waitForLog(daemon, "HTTPS certificate read again", after: offset), "\(daemon.log.suffix(2000))")
        #expect(try TestCertificate.presentedSubject(port: whipPort).contains("renewed-certificate"))

        let other = try TestCertificate.make(in: folder, name: "other", commonName: "other")
        try FileManager.default.removeItem(atPath: folder.appendingPathComponent("server.key").path)
        try FileManager.default.copyItem(atPath: other.key, toPath: folder.appendingPathComponent("server.key").path)
        offset = daemon.log.utf8.count
        daemon.send(signal: SIGHUP)
        #expect(Self.waitForLog(daemon, "reload failed, configuration unchanged", after: offset), "\(daemon.log.suffix(2000))")
        #expect(daemon.log.dropFirst(offset).contains("does not belong to the certificate"), "\(daemon.log.suffix(2000))")
        #expect(try TestCertificate.presentedSubject(port: whipPort).contains("renewed-certificate"))
        #expect(daemon.isRunning)
    }

    /// The daemon's peak resident memory so far (VmHWM), in kB.
    static func peakMemory(_ daemon: DaemonProcess) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(daemon.pid ?? 0)/status", encoding: .utf8)) ?? ""
        return status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }.flatMap { Int($0.split(separator: " ")[1]) } ?? 0
    }

    /// Found by the red-team pass: 8 connections pipelining `GET /` (the 13.7 KB page) without reading the replies
    /// took the daemon from 54 MB to 5.1 GB. Now a connection's requests stop being read while its replies wait
    /// (64 KiB), and a connection is cut after 120 requests.
    @Test func pipelinedRequestsNobodyReadsDoNotPileUpReplies() throws {
        let (daemon, whipPort, _) = try Self.daemon("pipeline")
        let before = Self.peakMemory(daemon)
        let flood = """
            import socket, ssl, sys, threading, time
            context = ssl.create_default_context(); context.check_hostname = False; context.verify_mode = ssl.CERT_NONE
            requests = b"GET / HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n" * 300
            sent = [0] * 8
            def flood(index):
                raw = socket.socket(); raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                raw.connect(("127.0.0.1", int(sys.argv[1])))
                connection = context.wrap_socket(raw, server_hostname="localhost"); connection.settimeout(1)
                end = time.monotonic() + 6
                try:
                    while time.monotonic() < end:
                        connection.sendall(requests); sent[index] += 300
                except OSError:
                    pass
            threads = [threading.Thread(target=flood, args=(i,)) for i in range(8)]
            [thread.start() for thread in threads]; [thread.join() for thread in threads]
            print(sum(sent))
            """
        let result = try runProcess("/usr/bin/python3", ["-c", flood, String(whipPort)])
        let growth = Self.peakMemory(daemon) - before
        print("WHIPOverHTTPSTests: \(result.text.trimmingCharacters(in: .whitespacesAndNewlines)) requests pipelined unread, peak RSS +\(growth) kB")
        #expect(result.status == 0, "\(result.standardError)")
        #expect(growth < 256 << 10, "peak RSS grew by \(growth) kB")
        let list = try runProcess("curl", ["-sS", "-k", "https://localhost:\(whipPort)/streams.json"])
        #expect(list.status == 0 && list.text.contains(daemon.name), "\(list.standardError)")
        #expect(daemon.isRunning)
    }

    /// A connection that starts a handshake and stalls gives its place back after 5 s, counted and said.
    @Test func aHandshakeThatStallsIsCutCountedAndSaid() throws {
        let metricsPort = freePort()
        let (daemon, whipPort, _) = try Self.daemon("stall", metricsPort: metricsPort)
        // The first bytes of a ClientHello (a handshake record of 512 bytes), and then nothing.
        let stalled = try httpExchange(port: whipPort, String(decoding: [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01], as: UTF8.self),
                                       waitMilliseconds: 20_000)
        #expect(stalled.isEmpty)
        #expect(Self.waitForLog(daemon, "failed: handshake not finished within 5 s"), "\(daemon.log.suffix(2000))")
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        #expect(body.contains("streamrecvd_webrtc_requests_refused_total{reason=\"tls_handshake\"} 1"), "\(body)")
        #expect(daemon.isRunning)
    }

    /// Found by the second red-team pass: pipelined requests for a large picture (a 1280×720 frame of noise, a PNG
    /// of hundreds of kilobytes) that the client never reads. Replies are made one at a time while the client reads, so what
    /// waits for a connection is a reply or two, not one per request.
    @Test func pipelinedPicturesNobodyReadsDoNotPileUp() throws {
        let (daemon, whipPort, folder) = try Self.daemon("pictures")
        let certificate = folder.appendingPathComponent("server.pem").path
        let script = TestEnvironment.repositoryRoot.appendingPathComponent("scripts/whip-client.py").path
        let client = try runProcess("/usr/bin/env", [
            "SSL_CERT_FILE=\(certificate)", "/usr/bin/python3", script, "https://localhost:\(whipPort)/whip/\(daemon.name)",
            "--token", WebRTCIngestTests.token, "--record", daemon.directory.appendingPathComponent("sent.h264").path,
            "--frames", "30", "--size", "1280x720", "--pattern", "snow", "--bitrate", "8000",
        ])
        #expect(client.text.hasSuffix("sent 30 frames\n"), "\(client.standardError)")
        let picture = try runProcess("curl", ["-sS", "-k", "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                                              "-H", "Authorization: Bearer \(WebRTCIngestTests.token)",
                                              "https://localhost:\(whipPort)/whip/\(daemon.name)/frame.png"]).text.split(separator: " ")
        // 8 × 119 replies of this, had they all been made, would be 190 MB and more (the PNG of the last frame is
        // 280 to 400 kB: the encoder's rate control decides how much noise is left in it).
        #expect(picture.first == "200" && (Int(picture.last ?? "") ?? 0) > 200_000, "\(picture): the test needs a large picture")
        let before = Self.peakMemory(daemon)
        let flood = """
            import socket, ssl, sys, threading, time
            context = ssl.create_default_context(); context.check_hostname = False; context.verify_mode = ssl.CERT_NONE
            request = ("GET /whip/%s/frame.png HTTP/1.1\\r\\nHost: localhost\\r\\nAuthorization: Bearer %s\\r\\n\\r\\n" % (sys.argv[2], sys.argv[3])).encode()
            def flood():
                raw = socket.socket(); raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                raw.connect(("127.0.0.1", int(sys.argv[1])))
                connection = context.wrap_socket(raw, server_hostname="localhost")
                connection.sendall(request * 119)
                time.sleep(4)
            threads = [threading.Thread(target=flood) for _ in range(8)]
            [thread.start() for thread in threads]; [thread.join() for thread in threads]
            """
        let result = try runProcess("/usr/bin/python3", ["-c", flood, String(whipPort), daemon.name, WebRTCIngestTests.token])
        let growth = Self.peakMemory(daemon) - before
        print("WHIPOverHTTPSTests: 8 × 119 pictures of \(picture.last ?? "?") bytes asked and never read, peak RSS +\(growth) kB")
        #expect(result.status == 0, "\(result.standardError)")
        #expect(growth < 128 << 10, "peak RSS grew by \(growth) kB")
        #expect(daemon.isRunning)
    }

    /// A request that does not parse gets its 400 and the connection ends there (it used to stay open, reading
    /// on until the idle timer).
    @Test func aMalformedRequestEndsItsConnection() throws {
        let (daemon, whipPort, _) = try Self.daemon("malformed")
        let exchange = """
            import socket, ssl, sys
            context = ssl.create_default_context(); context.check_hostname = False; context.verify_mode = ssl.CERT_NONE
            connection = context.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1]))), server_hostname="localhost")
            connection.settimeout(8)  # under the 10 s idle timer: an end before it is the daemon's doing
            # A good request first (the first-request deadline no longer runs), then one with a bare LF.
            connection.sendall(b"GET /streams.json HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\nGET / HTTP/1.1\\nHost: localhost\\r\\n\\r\\n")
            answer = b""
            try:
                while chunk := connection.recv(4096):
                    answer += chunk
                print("closed", b"HTTP/1.1 400" in answer)
            except socket.timeout:
                print("still open", b"HTTP/1.1 400" in answer)
            except ssl.SSLError as error:
                print("closed", b"HTTP/1.1 400" in answer, error)
            """
        let result = try runProcess("/usr/bin/python3", ["-c", exchange, String(whipPort)])
        #expect(result.text.hasPrefix("closed True"), "\(result.text) \(result.standardError)")
        #expect(daemon.isRunning)
    }
}

