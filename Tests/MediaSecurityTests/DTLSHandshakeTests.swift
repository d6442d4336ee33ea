@testable import MediaSecurity
import Testing

@Suite struct DTLSHandshakeTests {
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

    @Test func keyingMaterialNeverPrintsKeys() throws {
        let pair = try InMemoryHandshake()
        pair.exchange()
        let keys = try #require(pair.serverKeys)
        #expect(!"\(keys)".contains("\(keys.clientKey)"))
        #expect(!String(reflecting: keys).contains("\(keys.clientKey)"))
    }
}
