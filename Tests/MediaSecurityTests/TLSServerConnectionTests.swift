import Glibc
@testable import MediaSecurity
import Testing

/// One HTTPS connection, server side, against a real client: `openssl s_client` over a Unix socket, with the
/// test moving the bytes between the socket and the connection as the daemon's event loop does.
@Suite struct TLSServerConnectionTests {
    static let request = Array("GET /whip HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8)
    static let reply = Array("HTTP/1.1 204 No Content\r\nX-Served-By: streamrecvd-test\r\n\r\n".utf8)

    /// The base64 body of the first PEM certificate in `text`.
    static func firstCertificate(in text: String) -> String? {
        guard let start = text.range(of: "-----BEGIN CERTIFICATE-----"),
              let end = text.range(of: "-----END CERTIFICATE-----", range: start.upperBound..<text.endIndex)
        else { return nil }
        return text[start.upperBound..<end.lowerBound].filter { !$0.isWhitespace }
    }

    /// Both versions the server allows: a client that checks the certificate against the file and the name
    /// "localhost" completes the handshake, its request arrives as plaintext, and the reply reaches it.
    @Test(arguments: ["-tls1_2", "-tls1_3"])
    func aVerifyingClientGetsItsRequestThroughAndTheReplyBack(version: String) throws {
        let directory = try TemporaryDirectory()
        let files = try OpenSSLTool.makeCertificate(in: directory)
        let certificate = try TLSServerCertificate(certificatePath: files.certificate, keyPath: files.key)
        let run = try TLSClientRun(
            connection: certificate.makeConnection(),
            clientArguments: [version, "-CAfile", files.certificate, "-verify_hostname", "localhost",
                              "-verify_return_error", "-ign_eof"],
            input: Self.request, reply: Self.reply)
        #expect(run.states.contains(.open), "\(run.states)\n\(run.client.standardError)")
        #expect(run.plaintext == Self.request)
        #expect(run.client.standardOutput.contains("Verify return code: 0 (ok)"), "\(run.client.standardOutput)")
        #expect(run.client.standardOutput.contains("New, TLSv1.\(version.last!)"))
        #expect(run.client.standardOutput.contains("X-Served-By: streamrecvd-test"), "the reply arrived")
    }

    /// The certificate on the wire is the file's, byte for byte.
    @Test func theCertificatePresentedIsTheConfiguredOne() throws {
        let directory = try TemporaryDirectory()
        let files = try OpenSSLTool.makeCertificate(in: directory, commonName: "receiver.example")
        let certificate = try TLSServerCertificate(certificatePath: files.certificate, keyPath: files.key)
        let run = try TLSClientRun(connection: certificate.makeConnection(), clientArguments: [])
        let output = run.client.standardOutput
        let presented = try #require(Self.firstCertificate(in: output), "\(run.client.standardError)")
        let configured = try String(contentsOfFile: files.certificate, encoding: .utf8)
        #expect(presented == Self.firstCertificate(in: configured))
        #expect(run.client.standardOutput.contains("subject=CN = receiver.example"))
    }

    /// The chain goes out behind the certificate, so a client that trusts only the CA can verify the server.
    @Test func theChainIsSentAndVerifiesUpToItsCA() throws {
        let directory = try TemporaryDirectory()
        let files = try TLSServerCertificateTests.chain(in: directory)
        let certificate = try TLSServerCertificate(certificatePath: files.chain, keyPath: files.key)
        let run = try TLSClientRun(
            connection: certificate.makeConnection(),
            clientArguments: ["-showcerts", "-CAfile", files.ca, "-verify_hostname", "leaf.example",
                              "-verify_return_error"])
        #expect(run.client.standardOutput.components(separatedBy: "-----BEGIN CERTIFICATE-----").count == 3,
                "two certificates on the wire")
        #expect(run.client.standardOutput.contains("Verify return code: 0 (ok)"), "\(run.client.standardError)")
    }

    /// A client that ends its input sends close_notify: the connection is closed, with no plaintext.
    @Test func theClientsCloseNotifyClosesTheConnection() throws {
        let directory = try TemporaryDirectory()
        let files = try OpenSSLTool.makeCertificate(in: directory)
        let certificate = try TLSServerCertificate(certificatePath: files.certificate, keyPath: files.key)
        let connection = try certificate.makeConnection()
        let run = try TLSClientRun(connection: connection, clientArguments: [])
        #expect(run.states.contains(.open))
        #expect(run.states.last == .closed, "\(run.states)")
        #expect(run.plaintext.isEmpty)
        #expect(!Self.reply.withUnsafeBytes { connection.send($0) }, "nothing is sent once closed")
    }

    /// TLS 1.0 and 1.1 are refused (the server's floor is 1.2), with OpenSSL's reason.
    @Test func aClientThatOffersOnlyTLS11IsRefused() throws {
        let directory = try TemporaryDirectory()
        let files = try OpenSSLTool.makeCertificate(in: directory)
        let certificate = try TLSServerCertificate(certificatePath: files.certificate, keyPath: files.key)
        // Security level 0, or the client itself would refuse to offer TLS 1.1.
        let run = try TLSClientRun(
            connection: certificate.makeConnection(), clientArguments: ["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"])
        guard case .failed(let reason) = run.states.last else {
            Issue.record("expected a failure, got \(run.states)")
            return
        }
        #expect(reason == "unsupported protocol", "\(reason)")
        #expect(!run.states.contains(.open))
    }

    /// Plain HTTP sent to the HTTPS port fails at once with OpenSSL's "http request", which the daemon logs.
    @Test func plainHTTPToTheHTTPSPortFailsAsAnHTTPRequest() throws {
        let directory = try TemporaryDirectory()
        let files = try OpenSSLTool.makeCertificate(in: directory)
        let connection = try TLSServerCertificate(certificatePath: files.certificate, keyPath: files.key)
            .makeConnection()
        let state = Self.request.withUnsafeBytes { connection.receive($0) }
        #expect(state == .failed("http request"))
        #expect(connection.takePlaintext().isEmpty)
        #expect(Self.request.withUnsafeBytes { connection.receive($0) } == .failed("http request"), "it stays failed")
    }

    /// Before the handshake nothing can be sent, and `close()` ends the connection without a word.
    @Test func beforeTheHandshakeNothingIsSentAndCloseIsSilent() throws {
        let directory = try TemporaryDirectory()
        let files = try OpenSSLTool.makeCertificate(in: directory)
        let connection = try TLSServerCertificate(certificatePath: files.certificate, keyPath: files.key)
            .makeConnection()
        #expect(!Self.reply.withUnsafeBytes { connection.send($0) })
        #expect(connection.takeOutput().isEmpty)
        connection.close()
        #expect(connection.state == .closed)
        #expect(connection.takeOutput().isEmpty)
        #expect(Self.request.withUnsafeBytes { connection.receive($0) } == .closed)
    }
}

/// One `TLSServerConnection` served to `openssl s_client -unix` until either side is done. With `reply`, the
/// server answers the first request (a blank line ends it) and then closes; without it, the client closes when
/// its input ends (unless told -ign_eof).
struct TLSClientRun {
    private(set) var states: [TLSServerConnection.State] = []
    private(set) var plaintext: [UInt8] = []
    let client: OpenSSLTool.Output

    init(connection: TLSServerConnection, clientArguments: [String], input: [UInt8] = [], reply: [UInt8]? = nil)
        throws
    {
        let directory = try TemporaryDirectory()
        let path = directory.path("https.sock")
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        try #require(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8).prefix($0.count - 1)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        try #require(bound == 0 && listen(listener, 1) == 0)
        let running = try OpenSSLTool.Running(["s_client", "-unix", path] + clientArguments, input: input)
        guard waitReadable(listener, seconds: 10) else {
            client = running.finish()
            return
        }
        let socket = accept(listener, nil, nil)
        try #require(socket >= 0)
        _ = fcntl(socket, F_SETFD, FD_CLOEXEC)
        defer { close(socket) }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var replied = false
        // Ends when the client hangs up; s_client is killed after 20 s, and the wait for bytes is 10.
        while waitReadable(socket, seconds: 10) {
            let count = read(socket, &buffer, buffer.count)
            guard count > 0 else { break }
            let state = buffer[..<count].withUnsafeBytes { connection.receive($0) }
            states.append(state)
            _ = writeAll(socket, connection.takeOutput())
            plaintext += connection.takePlaintext()
            if case .failed = state { break }
            if let reply, !replied, plaintext.count >= 4, plaintext.suffix(4).elementsEqual("\r\n\r\n".utf8) {
                replied = reply.withUnsafeBytes { connection.send($0) }
                connection.close()
                _ = writeAll(socket, connection.takeOutput())
                shutdown(socket, Int32(SHUT_WR))
            }
        }
        states.append(connection.state)
        client = running.finish()
    }
}
