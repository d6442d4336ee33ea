import Glibc
@testable import MediaSecurity
import Testing

/// The daemon's DTLS server: handshakes with the in-memory client and with `openssl s_client`, the SRTP keys it
/// exports (RFC 5764), its retransmission timer, and how it ends. Hostile peers: DTLSHostilePeerTests.
@Suite struct DTLSServerAssociationTests {
    @Test(arguments: [
        ("SRTP_AEAD_AES_128_GCM", SRTPProfile.aeadAes128Gcm),
        ("SRTP_AES128_CM_SHA1_80", SRTPProfile.aes128CmSha1_80),
    ])
    func bothSidesExportTheSameKeys(clientProfiles: String, profile: SRTPProfile) throws {
        let pair = try InMemoryHandshake(clientProfiles: clientProfiles)
        pair.exchange()
        let server = try #require(pair.serverKeys)
        let client = try #require(pair.clientKeys)
        #expect(server == client, "client and server halves line up on both sides")
        #expect(server.profile == profile)
        #expect(server.clientKey.count == 16 && server.serverKey.count == 16)
        #expect(server.clientSalt.count == profile.saltLength && server.serverSalt.count == profile.saltLength)
        #expect(server.clientKey != server.serverKey, "each direction has its own key")
        #expect(pair.server.peerFingerprintSHA256 == pair.clientIdentity?.fingerprintSHA256)
        #expect(pair.client.core.peerFingerprintSHA256 == pair.serverIdentity.fingerprintSHA256)
        #expect(pair.serverEvents.filter { if case .connected = $0 { true } else { false } }.count == 1)
    }

    @Test func theServerPrefersGCMWhenTheClientOffersBoth() throws {
        let pair = try InMemoryHandshake(clientProfiles: "SRTP_AES128_CM_SHA1_80:SRTP_AEAD_AES_128_GCM")
        pair.exchange()
        #expect(pair.serverKeys?.profile == .aeadAes128Gcm)
    }

    @Test func everyDatagramIsOneWholeRecordWithinTheMTU() throws {
        let pair = try InMemoryHandshake()
        pair.exchange()
        #expect(pair.serverKeys != nil)
        #expect(pair.sentDatagrams.count >= 8, "each handshake message travels alone")
        for datagram in pair.sentDatagrams {
            #expect(datagram.count <= 1200)
            #expect(dtlsRecordLengths(datagram)?.count == 1, "datagram of \(datagram.count) bytes")
        }
    }

    /// Both ends of the in-memory handshake are our own code, so they would agree on a wrong exporter label or
    /// a wrong split. OpenSSL's own client, asked for RFC 5764 §4.2's exporter by name, must print the same bytes
    /// in the order client key, server key, client salt, server salt.
    @Test(arguments: [
        ("SRTP_AEAD_AES_128_GCM", SRTPProfile.aeadAes128Gcm),
        ("SRTP_AES128_CM_SHA1_80", SRTPProfile.aes128CmSha1_80),
    ])
    func theKeysAreThoseOpenSSLsClientExportsForDTLSSRTP(clientProfile: String, profile: SRTPProfile) throws {
        let run = try OpenSSLClientRun(profile: clientProfile, keyingLength: 2 * (16 + profile.saltLength))
        let keys = try #require(run.keys, "server events: \(run.events)\n\(run.client.standardError)")
        #expect(keys.profile == profile)
        #expect(run.client.standardOutput.contains("SRTP Extension negotiated, profile=\(clientProfile)"))
        #expect(keys.clientKey + keys.serverKey + keys.clientSalt + keys.serverSalt == run.exported)
        #expect(run.peerFingerprint == run.clientFingerprint, "the certificate s_client presented")
        #expect(run.events.last == .closed, "s_client's close_notify at the end of its input")
    }

    /// The pinned fingerprint is compared in full: a certificate whose SHA-256 differs only in its last byte is
    /// someone else's.
    @Test func aFingerprintThatDiffersOnlyInItsLastByteIsRefused() throws {
        let clientIdentity = try DTLSIdentity.generate()
        var almost = clientIdentity.fingerprintSHA256
        almost[31] ^= 0x01
        let pair = try InMemoryHandshake(clientIdentity: .some(clientIdentity), serverExpects: almost)
        pair.exchange()
        #expect(pair.serverFailure == .fingerprintMismatch)
        #expect(pair.serverKeys == nil && pair.clientKeys == nil)
        #expect(pair.server.retransmissionDeadline == nil, "no timer for a failed association")
        #expect(pair.server.handleRetransmissionTimer() == .failed(.fingerprintMismatch))
    }

    @Test func closeNotifyClosesBothSides() throws {
        let pair = try InMemoryHandshake()
        pair.exchange()
        pair.client.core.close()
        pair.deliverToServer(pair.takeFromClient())
        #expect(pair.serverEvents.last == .closed)
        #expect(!pair.takeFromServer().isEmpty, "the server answers with its own close_notify")
        #expect(pair.server.receive([0x17, 0xFE, 0xFD]) == .closed, "closed stays closed")

        let other = try InMemoryHandshake()
        other.exchange()
        other.server.close()
        other.deliverToClient(other.takeFromServer())
        #expect(other.clientEvents.last == .closed)
    }

    /// After `close()` the server's one datagram is its close_notify (an alert record, content type 21); records
    /// the client sends later, even genuine ones, are neither read nor answered.
    @Test func afterCloseOnlyCloseNotifyGoesOutAndNoRecordIsAnswered() throws {
        let pair = try InMemoryHandshake()
        pair.deliverToServer(pair.takeFromClient())
        pair.deliverToClient(pair.takeFromServer())
        let finalClientFlight = pair.takeFromClient()
        pair.deliverToServer(finalClientFlight)
        pair.deliverToClient(pair.takeFromServer())
        try #require(pair.serverKeys != nil && pair.clientKeys != nil)
        pair.server.close()
        let goodbye = pair.takeFromServer()
        #expect(goodbye.count == 1 && goodbye.first?.first == 21, "\(goodbye.map(\.count)) bytes")
        // While connected the server answers a repeated final flight with its own; once closed it stays silent.
        for datagram in finalClientFlight {
            #expect(pair.server.receive(datagram) == .closed)
        }
        #expect(pair.takeFromServer().isEmpty)
        pair.deliverToClient(goodbye)
        #expect(pair.clientEvents.last == .closed)
    }

    /// Closed in the middle of the handshake: nothing to say (no keys were made), no timer, and the rest of the
    /// client's handshake is ignored.
    @Test func closingMidHandshakeEndsItWithoutKeysOrTimer() throws {
        let pair = try InMemoryHandshake()
        pair.deliverToServer(pair.takeFromClient())
        pair.deliverToClient(pair.takeFromServer())
        #expect(pair.server.retransmissionDeadline != nil, "the server's flight is on its timer")
        pair.server.close()
        #expect(pair.takeFromServer().isEmpty)
        #expect(pair.server.retransmissionDeadline == nil)
        pair.deliverToServer(pair.takeFromClient())
        #expect(pair.serverEvents.last == .closed)
        #expect(pair.serverKeys == nil && pair.takeFromServer().isEmpty)
        #expect(pair.server.handleRetransmissionTimer() == .closed)
    }

    /// OpenSSL reads its own clock for the timer, and the API takes no time: these tests wait the few
    /// milliseconds the association itself names as its deadline.
    @Test func aLostServerFlightIsSentAgainByTheTimer() async throws {
        let pair = try InMemoryHandshake(initialTimeout: .milliseconds(50))
        pair.deliverToServer(pair.takeFromClient())
        let lost = pair.takeFromServer()
        #expect(!lost.isEmpty)
        #expect(pair.server.handleRetransmissionTimer() == .handshaking, "not yet due: nothing happens")
        #expect(pair.takeFromServer().isEmpty)
        let delay = try #require(pair.server.retransmissionDeadline)
        #expect(delay <= .milliseconds(50))
        try await Task.sleep(for: delay + .milliseconds(5))
        #expect(pair.server.handleRetransmissionTimer() == .handshaking)
        pair.exchange()
        #expect(pair.serverKeys != nil && pair.serverKeys == pair.clientKeys)
        #expect(pair.server.retransmissionDeadline == nil, "no timer once connected")
    }

    /// A retransmission repeats the flight's handshake messages byte for byte; only the record sequence numbers
    /// (record header bytes 5 to 10, RFC 6347 §4.1) are new.
    @Test func aRetransmittedFlightRepeatsItsMessagesInNewRecords() async throws {
        let pair = try InMemoryHandshake(initialTimeout: .milliseconds(50))
        pair.deliverToServer(pair.takeFromClient())
        let first = pair.takeFromServer()
        let delay = try #require(pair.server.retransmissionDeadline)
        try await Task.sleep(for: delay + .milliseconds(5))
        #expect(pair.server.handleRetransmissionTimer() == .handshaking)
        let again = pair.takeFromServer()
        try #require(again.count == first.count, "\(first.count) datagrams, then \(again.count)")
        for (original, repeated) in zip(first, again) {
            #expect(original[..<5] == repeated[..<5], "content type, version and epoch")
            #expect(original[11...] == repeated[11...], "length and handshake message")
            let sequence = { (datagram: [UInt8]) in datagram[5..<11].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
            #expect(sequence(repeated) > sequence(first.last!), "a record number never used before")
        }
        pair.deliverToClient(again)
        pair.exchange()
        #expect(pair.serverKeys != nil && pair.serverKeys == pair.clientKeys)
    }

    /// The server's last flight (ChangeCipherSpec, Finished) has no timer of its own: the client's retransmission
    /// asks for it again, and the connected server answers.
    @Test func aLostFinalFlightIsSentAgainWhenTheClientAsks() async throws {
        let pair = try InMemoryHandshake(initialTimeout: .milliseconds(50))
        pair.deliverToServer(pair.takeFromClient())
        pair.deliverToClient(pair.takeFromServer())
        pair.deliverToServer(pair.takeFromClient())
        #expect(pair.serverKeys != nil)
        _ = pair.takeFromServer()  // lost
        #expect(pair.clientKeys == nil)
        let delay = try #require(pair.client.core.retransmissionDelay)
        try await Task.sleep(for: delay + .milliseconds(5))
        _ = pair.client.core.handleRetransmissionTimer()
        pair.exchange()
        #expect(pair.serverEvents.last == .established)
        #expect(pair.clientKeys == pair.serverKeys)
    }

    /// A retransmission not yet sent when the next flight is written (the timer ran out while a datagram was on
    /// its way) must not take that flight down with it: OpenSSL drops what follows a stale message in a datagram.
    @Test func aStaleRetransmissionDoesNotSwallowTheNextFlight() async throws {
        let pair = try InMemoryHandshake(initialTimeout: .milliseconds(50))
        pair.deliverToServer(pair.takeFromClient())
        let delay = try #require(pair.server.retransmissionDeadline)
        try await Task.sleep(for: delay + .milliseconds(5))
        pair.deliverToClient(pair.takeFromServer())  // the client's own timer has run out by now as well
        let clientFlight = pair.takeFromClient()
        #expect(clientFlight.count > 5, "the ClientHello again, then the client's second flight")
        pair.deliverToServer(clientFlight)
        pair.exchange()
        #expect(pair.serverKeys != nil && pair.serverKeys == pair.clientKeys)
    }
}

/// One handshake between a `DTLSServerAssociation` on a loopback UDP socket and `openssl s_client -dtls1_2`
/// with a certificate of its own, driven like the daemon drives it: datagrams in, datagrams out, the timer
/// when one runs. s_client's input is empty, so it sends close_notify once connected.
struct OpenSSLClientRun {
    let events: [DTLSEvent]
    let client: OpenSSLTool.Output
    let clientFingerprint: [UInt8]
    let peerFingerprint: [UInt8]?
    /// What s_client printed as "Keying material" for the label EXTRACTOR-dtls_srtp.
    let exported: [UInt8]

    var keys: DTLSKeyingMaterial? {
        for case .connected(let keys) in events { return keys }
        return nil
    }

    static func ends(_ event: DTLSEvent) -> Bool {
        switch event {
        case .closed, .failed: true
        case .handshaking, .connected, .established: false
        }
    }

    init(profile: String, keyingLength: Int) throws {
        let directory = try TemporaryDirectory()
        let credentials = try OpenSSLTool.makeCertificate(in: directory, name: "browser", subjectAltName: nil)
        clientFingerprint = OpenSSLTool.bytes(
            ofFingerprint: try OpenSSLTool.sha256FingerprintText(certificate: credentials.certificate))
        let server = try DTLSServerAssociation(
            identity: DTLSIdentity.generate(), expectedPeerFingerprint: clientFingerprint)

        let socket = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        try #require(socket >= 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                try #require(bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0)
            }
        }
        let running = try OpenSSLTool.Running([
            "s_client", "-dtls1_2", "-connect", "127.0.0.1:\(UInt16(bigEndian: address.sin_port))",
            "-cert", credentials.certificate, "-key", credentials.key, "-use_srtp", profile,
            "-keymatexport", "EXTRACTOR-dtls_srtp", "-keymatexportlen", String(keyingLength),
        ], input: [])

        var events: [DTLSEvent] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var peer = sockaddr_storage()
        var peerLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        // Ends with close_notify or a failure; s_client is killed after 20 s, and then nothing comes for 10.
        while !events.contains(where: Self.ends) {
            let timer = server.retransmissionDeadline.map { $0 / .seconds(1) + 0.001 }
            guard waitReadable(socket, seconds: min(timer ?? 10, 10)) else {
                if timer == nil { break }
                events.append(server.handleRetransmissionTimer())
                sendAll(server.takeOutgoingDatagrams(), on: socket, to: &peer, length: peerLength)
                continue
            }
            peerLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let count = withUnsafeMutablePointer(to: &peer) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    recvfrom(socket, &buffer, buffer.count, 0, $0, &peerLength)
                }
            }
            guard count > 0 else { break }
            events.append(server.receive(Array(buffer[..<count])))
            sendAll(server.takeOutgoingDatagrams(), on: socket, to: &peer, length: peerLength)
        }
        self.events = events
        peerFingerprint = server.peerFingerprintSHA256
        client = running.finish()
        let line = client.standardOutput.split(separator: "\n").first { $0.contains("Keying material: ") }
        let digits = (line?.split(separator: ":").last ?? "").filter { !$0.isWhitespace }
        exported = digits.count % 2 == 0 && digits.allSatisfy(\.isHexDigit) ? [UInt8](hex: String(digits)) : []
    }
}

private func sendAll(_ datagrams: [[UInt8]], on socket: Int32, to peer: inout sockaddr_storage, length: socklen_t) {
    for datagram in datagrams {
        _ = withUnsafePointer(to: &peer) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                sendto(socket, datagram, datagram.count, 0, $0, length)
            }
        }
    }
}
