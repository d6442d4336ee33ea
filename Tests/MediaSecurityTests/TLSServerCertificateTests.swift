import Foundation
@testable import MediaSecurity
import Testing

/// The HTTPS certificate and key the operator configures, read by `TLSServerCertificate`: what it reports, which
/// hosts it covers, and which files it refuses. Certificates are made by the `openssl` command at test time.
@Suite struct TLSServerCertificateTests {
    /// A certificate signed by a CA of its own, and a file with the certificate then the CA (as fullchain.pem).
    static func chain(in directory: TemporaryDirectory) throws -> (chain: String, key: String, ca: String) {
        let ca = try OpenSSLTool.makeCertificate(in: directory, name: "ca", commonName: "Test CA", subjectAltName: nil)
        let key = directory.path("leaf.key")
        let request = directory.path("leaf.csr")
        let leaf = directory.path("leaf.pem")
        _ = try OpenSSLTool.checked(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                                     "-keyout", key, "-out", request, "-subj", "/CN=leaf.example"])
        let names = Array("subjectAltName=DNS:localhost,DNS:leaf.example\n".utf8)
        let extensions = try directory.write(names, to: "leaf.ext")
        _ = try OpenSSLTool.checked(["x509", "-req", "-in", request, "-CA", ca.certificate, "-CAkey", ca.key,
                                     "-set_serial", "7", "-days", "30", "-extfile", extensions, "-out", leaf])
        let chain = try [leaf, ca.certificate].map { try String(contentsOfFile: $0, encoding: .utf8) }.joined()
        return (try directory.write(Array(chain.utf8), to: "fullchain.pem"), key, ca.certificate)
    }

    /// The subject as OpenSSL's one-line text, and the time left until notAfter, for the log and the expiry
    /// warning: two certificates of different lifetimes, so the figure is read from the certificate.
    @Test(arguments: [30, 2])
    func itReportsItsSubjectAndTheTimeLeft(days: Int) throws {
        let directory = try TemporaryDirectory()
        let files = try OpenSSLTool.makeCertificate(in: directory, commonName: "receiver.example", days: days)
        let certificate = try TLSServerCertificate(certificatePath: files.certificate, keyPath: files.key)
        #expect(certificate.subject == "/CN=receiver.example")
        let full = Int64(days) * 86_400
        #expect((full - 300...full).contains(certificate.secondsUntilExpiry), "\(certificate.secondsUntilExpiry) s")
    }

    /// With a chain the subject is the server's own certificate's, the first in the file.
    @Test func withAChainTheSubjectIsTheServersOwn() throws {
        let directory = try TemporaryDirectory()
        let files = try Self.chain(in: directory)
        let certificate = try TLSServerCertificate(certificatePath: files.chain, keyPath: files.key)
        #expect(certificate.subject == "/CN=leaf.example")
        #expect(certificate.covers(host: "leaf.example"))
    }

    /// The names in subjectAltName, DNS names (a wildcard for exactly one label) and IP addresses, are what a
    /// browser checks the address bar against; anything else is not covered.
    @Test func itCoversTheNamesAndAddressesInItsSubjectAltNameOnly() throws {
        let directory = try TemporaryDirectory()
        let files = try OpenSSLTool.makeCertificate(
            in: directory, commonName: "receiver.example",
            subjectAltName: "DNS:receiver.example,DNS:*.cameras.example,IP:192.0.2.7,IP:2001:db8::7")
        let certificate = try TLSServerCertificate(certificatePath: files.certificate, keyPath: files.key)
        for host in ["receiver.example", "RECEIVER.example", "north.cameras.example", "192.0.2.7", "2001:db8::7"] {
            #expect(certificate.covers(host: host), "\(host)")
        }
        for host in ["other.example", "cameras.example", "a.b.cameras.example", "192.0.2.8", "2001:db8::8",
                     "localhost", "example", ""] {
            #expect(!certificate.covers(host: host), "\(host)")
        }
    }

    /// A certificate with no subjectAltName covers nothing, not even its CN: browsers refuse it for every name,
    /// so a `Host:` of its CN is no name the endpoint serves over HTTPS (it used to count).
    @Test func theCommonNameAloneCoversNothing() throws {
        let directory = try TemporaryDirectory()
        for name in ["receiver.example", "127.0.0.1"] {
            let files = try OpenSSLTool.makeCertificate(in: directory, name: name, commonName: name, subjectAltName: nil)
            let certificate = try TLSServerCertificate(certificatePath: files.certificate, keyPath: files.key)
            #expect(certificate.subject == "/CN=\(name)")
            #expect(!certificate.covers(host: name), "\(name)")
        }
    }

    /// Each refusal names what is wrong, so the operator knows which file to fix.
    @Test func filesThatCannotServeAreRefusedWithTheirReason() throws {
        let directory = try TemporaryDirectory()
        let good = try OpenSSLTool.makeCertificate(in: directory, name: "good")
        let other = try OpenSSLTool.makeCertificate(in: directory, name: "other")
        let locked = try OpenSSLTool.makeCertificate(in: directory, name: "locked", keyPassword: "secret")
        let cases: [(certificate: String, key: String, reason: String)] = [
            (directory.path("missing.pem"), good.key, "cannot read the certificate"),
            (good.key, good.key, "cannot read the certificate"),
            (good.certificate, directory.path("missing.key"), "cannot read the private key"),
            (good.certificate, other.key, "the private key does not belong to the certificate"),
            (locked.certificate, locked.key, "cannot read the private key (PEM, not encrypted)"),
        ]
        for (certificate, key, reason) in cases {
            let error = #expect(throws: TLSSetupError.self) {
                try TLSServerCertificate(certificatePath: certificate, keyPath: key)
            }
            #expect(error?.description.hasPrefix(reason) == true, "\(String(describing: error))")
        }
        #expect(throws: Never.self) { try TLSServerCertificate(certificatePath: good.certificate, keyPath: good.key) }
    }

    /// Connections hold their own reference to the context: a reload may drop the old certificate while
    /// connections made from it are still open. Each connection starts handshaking and has nothing to say.
    @Test func connectionsOutliveTheCertificateTheyWereMadeFrom() throws {
        let directory = try TemporaryDirectory()
        let files = try OpenSSLTool.makeCertificate(in: directory)
        let connections = try {
            let certificate = try TLSServerCertificate(certificatePath: files.certificate, keyPath: files.key)
            return try (0..<3).map { _ in try certificate.makeConnection() }
        }()
        for connection in connections {
            #expect(connection.state == .handshaking)
            #expect(connection.takeOutput().isEmpty)
        }
        let run = try TLSClientRun(connection: connections[1], clientArguments: ["-CAfile", files.certificate])
        #expect(run.states.contains(.open), "\(run.states)\n\(run.client.standardError)")
    }
}
