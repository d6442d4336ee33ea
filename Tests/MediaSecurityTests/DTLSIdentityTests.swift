import Foundation
@testable import MediaSecurity
import Testing

/// The daemon's DTLS certificate as a peer sees it: taken from the server's Certificate message on the wire and
/// read by the `openssl` command, so what is checked is what a browser gets, judged by OpenSSL rather than by us.
@Suite struct DTLSIdentityTests {
    /// The DER of the certificate in the first Certificate message (type 11) among `datagrams`. DTLS 1.2 sends it
    /// in the clear: a 13-byte record header, a 12-byte handshake header, then the 3-byte length of the list and
    /// the 3-byte length of its first certificate (RFC 6347 §4.2.2, RFC 5246 §7.4.2).
    static func certificate(in datagrams: [[UInt8]]) -> [UInt8]? {
        func number(_ bytes: ArraySlice<UInt8>) -> Int { bytes.reduce(0) { $0 << 8 | Int($1) } }
        for datagram in datagrams where datagram.count > 31 && datagram[0] == 22 && datagram[13] == 11 {
            let length = number(datagram[14..<17])
            // Only a message in one fragment: a P-256 certificate is far smaller than the 1200-byte MTU.
            guard number(datagram[19..<22]) == 0, number(datagram[22..<25]) == length else { continue }
            let certificateLength = number(datagram[28..<31])
            guard datagram.count >= 31 + certificateLength else { continue }
            return Array(datagram[31..<31 + certificateLength])
        }
        return nil
    }

    /// The certificate the server with `identity` sends in answer to a ClientHello, written to `directory` as
    /// DER and PEM.
    static func presentedCertificate(
        of identity: DTLSIdentity, in directory: TemporaryDirectory
    ) throws -> (der: String, pem: String) {
        let pair = try InMemoryHandshake(serverIdentity: identity)
        pair.deliverToServer(pair.takeFromClient())
        let der = try #require(certificate(in: pair.takeFromServer()), "no Certificate message in the first flight")
        let derPath = try directory.write(der, to: "identity.der")
        let pemPath = directory.path("identity.pem")
        _ = try OpenSSLTool.checked(["x509", "-inform", "DER", "-in", derPath, "-out", pemPath])
        return (derPath, pemPath)
    }

    /// "Dec  6 19:50:31 2026 GMT", as `openssl x509 -dates` prints notBefore and notAfter.
    static func date(_ text: Substring) throws -> Date {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "MMM d HH:mm:ss yyyy 'GMT'"
        let single = text.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
        return try #require(formatter.date(from: single), "unreadable date \(text)")
    }

    @Test func identitiesAreFreshAndPrintedAsSDPWants() throws {
        let first = try DTLSIdentity.generate()
        let second = try DTLSIdentity.generate()
        #expect(first.fingerprintSHA256.count == 32)
        #expect(first.fingerprintSHA256 != second.fingerprintSHA256)
        let text = first.fingerprintText
        #expect(text.count == 32 * 3 - 1)
        #expect(text.split(separator: ":").map { UInt8($0, radix: 16)! } == first.fingerprintSHA256)
        #expect(text.allSatisfy { $0 == ":" || $0.isNumber || ("A"..."F").contains($0) })
    }

    /// RFC 8122 §5: each byte as two upper-case hex digits, leading zeros kept, joined by colons.
    @Test func fingerprintTextKeepsLeadingZerosInUpperCase() {
        #expect(DTLSIdentity.fingerprintText([0x00, 0x0A, 0xF0, 0xFF, 0x5C]) == "00:0A:F0:FF:5C")
        #expect(DTLSIdentity.fingerprintText([0x07]) == "07")
    }

    /// The fingerprint in the SDP answer is the SHA-256 of the very certificate the handshake sends, printed
    /// exactly as OpenSSL prints one.
    @Test func theAdvertisedFingerprintIsThatOfTheCertificateOnTheWire() throws {
        let directory = try TemporaryDirectory()
        let identity = try DTLSIdentity.generate()
        let presented = try Self.presentedCertificate(of: identity, in: directory)
        let computed = try OpenSSLTool.sha256FingerprintText(certificate: presented.der, inform: "DER")
        #expect(computed == identity.fingerprintText)
        #expect(OpenSSLTool.bytes(ofFingerprint: computed) == identity.fingerprintSHA256)
    }

    /// Self-signed (issuer is subject, and the signature verifies with the certificate's own key), ECDSA on P-256
    /// with SHA-256: what browsers generate for WebRTC themselves, and what every one of them accepts.
    @Test func theCertificateIsASelfSignedECDSAP256Certificate() throws {
        let directory = try TemporaryDirectory()
        let presented = try Self.presentedCertificate(of: DTLSIdentity.generate(), in: directory)
        let verified = try OpenSSLTool.run(["verify", "-check_ss_sig", "-CAfile", presented.pem, presented.pem])
        #expect(verified.status == 0, "\(verified.standardOutput)\(verified.standardError)")
        let names = try OpenSSLTool.checked(
            ["x509", "-in", presented.pem, "-noout", "-subject", "-issuer", "-nameopt", "RFC2253"])
        #expect(names.split(separator: "\n") == ["subject=CN=streamrecvd", "issuer=CN=streamrecvd"])
        let text = try OpenSSLTool.checked(["x509", "-in", presented.pem, "-noout", "-text"])
        #expect(text.contains("Version: 3 (0x2)"))
        #expect(text.contains("Public Key Algorithm: id-ecPublicKey"))
        #expect(text.contains("ASN1 OID: prime256v1"))
        #expect(text.contains("Signature Algorithm: ecdsa-with-SHA256"))
    }

    /// Valid from a day ago (a peer's clock may run behind) until 30 days from now: 31 days in all.
    @Test func theCertificateIsValidFromADayAgoForThirtyDays() throws {
        let directory = try TemporaryDirectory()
        let now = Date()
        let presented = try Self.presentedCertificate(of: DTLSIdentity.generate(), in: directory)
        let dates = try OpenSSLTool.checked(["x509", "-in", presented.pem, "-noout", "-startdate", "-enddate"])
        let fields = Dictionary(uniqueKeysWithValues: dates.split(separator: "\n").map {
            let parts = $0.split(separator: "=", maxSplits: 1)
            return (String(parts[0]), parts.count > 1 ? parts[1] : "")
        })
        let notBefore = try Self.date(try #require(fields["notBefore"]))
        let notAfter = try Self.date(try #require(fields["notAfter"]))
        let day: TimeInterval = 86_400
        #expect(abs(notBefore.timeIntervalSince(now) + day) < 300, "notBefore \(notBefore), now \(now)")
        // The two ends are stamped one after the other, so a second may tick between them.
        #expect((31 * day...31 * day + 1).contains(notAfter.timeIntervalSince(notBefore)), "\(dates)")
    }

    /// Each identity has a key pair and a serial of its own: a restart never presents the old certificate again.
    @Test func twoIdentitiesHaveDifferentKeysAndSerials() throws {
        let first = try TemporaryDirectory()
        let second = try TemporaryDirectory()
        let one = try Self.presentedCertificate(of: DTLSIdentity.generate(), in: first)
        let other = try Self.presentedCertificate(of: DTLSIdentity.generate(), in: second)
        let fields = { (pem: String) in try OpenSSLTool.checked(["x509", "-in", pem, "-noout", "-pubkey", "-serial"]) }
        let (oneFields, otherFields) = (try fields(one.pem), try fields(other.pem))
        let serial = { (text: String) in text.split(separator: "\n").first { $0.hasPrefix("serial=") } }
        let key = { (text: String) in text.split(separator: "\n").filter { !$0.hasPrefix("serial=") } }
        #expect(serial(oneFields) != nil && serial(oneFields) != serial(otherFields))
        #expect(!key(oneFields).isEmpty && key(oneFields) != key(otherFields))
    }

    @Test func oneIdentityServesManySessionsAtOnce() async throws {
        let identity = try DTLSIdentity.generate()
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let pair = try InMemoryHandshake(serverIdentity: identity)
                    pair.exchange()
                    return pair.serverKeys != nil
                }
            }
            for try await connected in group { #expect(connected) }
        }
    }

    /// An association holds its own references to the certificate and key: the identity may go first (a reload
    /// that makes a new one while sessions are still handshaking).
    @Test func anAssociationOutlivesTheIdentityItWasMadeFrom() throws {
        let clientIdentity = try DTLSIdentity.generate()
        var serverFingerprint: [UInt8] = []
        let server: DTLSServerAssociation = try {
            let identity = try DTLSIdentity.generate()
            serverFingerprint = identity.fingerprintSHA256
            return try DTLSServerAssociation(
                identity: identity, expectedPeerFingerprint: clientIdentity.fingerprintSHA256)
        }()
        let client = try DTLSClientAssociation(identity: clientIdentity, expectedPeerFingerprint: serverFingerprint)
        var serverKeys: DTLSKeyingMaterial?
        var clientKeys: DTLSKeyingMaterial?
        for _ in 0..<8 {
            for datagram in client.core.takeOutgoingDatagrams() {
                if case .connected(let keys) = server.receive(datagram) { serverKeys = keys }
            }
            for datagram in server.takeOutgoingDatagrams() {
                if case .connected(let keys) = client.core.receive(datagram) { clientKeys = keys }
            }
        }
        #expect(serverKeys != nil && serverKeys == clientKeys)
        #expect(client.core.peerFingerprintSHA256 == serverFingerprint)
    }
}
