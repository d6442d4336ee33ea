import Foundation
import Glibc

/// Certificates for HTTPS tests, made at test time by the `openssl` command (nothing is committed).
public enum TestCertificate {
    /// A self-signed ECDSA P-256 certificate for localhost and 127.0.0.1 (or `alternativeNames`), and its unencrypted key (mode 0600):
    /// `NAME.pem` and `NAME.key` in `directory`. `days` is how long it is valid from now.
    public static func make(in directory: URL, name: String = "server", commonName: String = "localhost", days: Int = 30,
                            keyPassword: String? = nil, alternativeNames: [String] = ["DNS:localhost", "IP:127.0.0.1"]) throws -> (certificate: String, key: String) {
        let certificate = directory.appendingPathComponent("\(name).pem").path
        let key = directory.appendingPathComponent("\(name).key").path
        let encryption = keyPassword.map { ["-passout", "pass:\($0)"] } ?? ["-nodes"]
        _ = try runChecked("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"] + encryption + [
            "-keyout", key, "-out", certificate, "-days", String(days), "-subj", "/CN=\(commonName)",
            "-addext", "subjectAltName=" + alternativeNames.joined(separator: ","),
        ])
        chmod(key, 0o600)
        return (certificate, key)
    }

    /// The subject of the certificate a TLS server at 127.0.0.1:`port` presents ("CN = localhost"), from
    /// `openssl s_client` (which does not verify: the test checks which certificate, not whether to trust it).
    public static func presentedSubject(port: Int) throws -> String {
        let result = try runProcess("openssl", ["s_client", "-connect", "127.0.0.1:\(port)", "-servername", "localhost"], input: Data())
        let line = result.text.split(separator: "\n").first { $0.hasPrefix("subject=") }
        return line.map { String($0.dropFirst("subject=".count)).trimmingCharacters(in: .whitespaces) } ?? ""
    }

    /// Base64 of the SHA-256 of the certificate's public key (SPKI), as Chromium's
    /// --ignore-certificate-errors-spki-list takes it.
    public static func publicKeySHA256Base64(certificate: String) throws -> String {
        let key = try runChecked("openssl", ["x509", "-in", certificate, "-noout", "-pubkey"]).standardOutput
        let der = try runChecked("openssl", ["pkey", "-pubin", "-outform", "der"], input: key).standardOutput
        let digest = try runChecked("openssl", ["dgst", "-sha256", "-binary"], input: der).standardOutput
        return digest.base64EncodedString()
    }
}
