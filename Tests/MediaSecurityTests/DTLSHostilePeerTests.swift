@testable import MediaSecurity
import Testing

/// What a peer that is not the browser its SDP described can do to the server: wrong certificates, no keys in
/// common, garbage, cut records, forged alerts.
@Suite struct DTLSHostilePeerTests {
    @Test func aCertificateOtherThanTheOfferedOneFailsWithoutKeys() throws {
        let pair = try InMemoryHandshake(serverExpects: Array(repeating: 0xAB, count: 32))
        pair.exchange()
        #expect(pair.serverFailure == .fingerprintMismatch)
        #expect(pair.serverKeys == nil && pair.clientKeys == nil)
        guard case .peerAlert = pair.clientFailure else {
            Issue.record("the client should have been told by an alert, got \(String(describing: pair.clientFailure))")
            return
        }
        #expect(pair.server.receive([0x16, 0xFE, 0xFD]) == .failed(.fingerprintMismatch), "failed stays failed")
    }

    @Test func aClientThatPinsAnotherServerRefusesIt() throws {
        let pair = try InMemoryHandshake(clientExpects: Array(repeating: 0x01, count: 32))
        pair.exchange()
        #expect(pair.clientFailure == .fingerprintMismatch)
        #expect(pair.serverKeys == nil)
        guard case .peerAlert = pair.serverFailure else {
            Issue.record("expected the client's alert, got \(String(describing: pair.serverFailure))")
            return
        }
    }

    @Test(arguments: ["SRTP_AES128_CM_SHA1_32", nil] as [String?])
    func noSRTPProfileInCommonFailsWithThatReason(clientProfiles: String?) throws {
        let pair = try InMemoryHandshake(clientProfiles: clientProfiles)
        pair.exchange()
        #expect(pair.serverFailure == .noCommonSRTPProfile)
        #expect(pair.serverFailure?.description == "no SRTP profile in common")
        #expect(pair.serverKeys == nil && pair.clientKeys == nil)
        #expect(pair.clientFailure != nil, "the client hears of it")
    }

    @Test func aClientWithoutCertificateFails() throws {
        let pair = try InMemoryHandshake(clientIdentity: .some(nil))
        pair.exchange()
        #expect(pair.serverFailure == .noPeerCertificate)
        #expect(pair.serverKeys == nil)
    }

    @Test func aFingerprintOfTheWrongLengthIsRefusedUpFront() throws {
        let identity = try DTLSIdentity.generate()
        #expect(throws: DTLSSetupError.self) {
            _ = try DTLSServerAssociation(identity: identity, expectedPeerFingerprint: [1, 2, 3])
        }
    }

    /// Bytes that are no DTLS record, and records cut short, are dropped: the real handshake still completes.
    @Test func garbageAndCutRecordsBeforeAndDuringTheHandshakeAreDropped() throws {
        var random = SeededGenerator(seed: 25)
        let pair = try InMemoryHandshake()
        for _ in 0..<200 {
            let length = Int.random(in: 0...1500, using: &random)
            var garbage = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            if !garbage.isEmpty { garbage[0] = UInt8.random(in: 64...255, using: &random) }  // no DTLS content type
            #expect(pair.server.receive(garbage) == .handshaking)
        }
        let hello = pair.takeFromClient()
        try #require(hello.count == 1)
        for cut in 1..<hello[0].count {
            #expect(pair.server.receive(Array(hello[0].prefix(cut))) == .handshaking, "ClientHello cut at \(cut)")
        }
        #expect(pair.takeFromServer().isEmpty, "nothing answered a cut ClientHello")
        pair.deliverToServer(hello)
        pair.deliverToClient(pair.takeFromServer())
        let secondFlight = pair.takeFromClient()
        for datagram in secondFlight {
            for cut in stride(from: 1, to: datagram.count, by: 7) {
                #expect(pair.server.receive(Array(datagram.prefix(cut))) == .handshaking)
            }
        }
        pair.deliverToServer(secondFlight)
        pair.exchange()
        #expect(pair.serverKeys != nil && pair.serverKeys == pair.clientKeys)
    }

    /// Mutated handshakes: whatever a byte flip does, the server either waits or fails with a reason, and never
    /// hands out keys for a handshake it did not finish with the pinned certificate.
    @Test func mutatedHandshakeDatagramsNeverCrashOrConnect() throws {
        var random = SeededGenerator(seed: 9725)
        let template = try InMemoryHandshake()
        let hello = template.takeFromClient()[0]
        for _ in 0..<300 {
            let server = try DTLSServerAssociation(
                identity: template.serverIdentity, expectedPeerFingerprint: Array(repeating: 7, count: 32))
            var mutated = hello
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                mutated[Int.random(in: 0..<mutated.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
            }
            for datagram in [mutated, hello, mutated] {
                switch server.receive(datagram) {
                case .handshaking, .failed: break
                case let event: Issue.record("unexpected \(event)")
                }
                #expect(server.takeOutgoingDatagrams().allSatisfy { $0.count <= 1200 })
            }
        }
    }

    /// After the handshake, garbage, a forged plaintext fatal alert and a replayed first flight change nothing.
    @Test func aConnectedAssociationShrugsOffForgedRecords() throws {
        let pair = try InMemoryHandshake()
        let firstFlight = pair.takeFromClient()
        pair.deliverToServer(firstFlight)
        pair.exchange()
        try #require(pair.serverKeys != nil)
        let forgedAlert: [UInt8] = [0x15, 0xFE, 0xFD, 0, 0, 0, 0, 0, 0, 0, 9, 0, 2, 2, 40]
        #expect(pair.server.receive(forgedAlert) == .established)
        #expect(pair.server.receive(Array(repeating: 0x17, count: 100)) == .established)
        pair.deliverToServer(firstFlight)
        #expect(pair.serverEvents.last == .established)
        var random = SeededGenerator(seed: 1)
        for _ in 0..<100 {
            let length = Int.random(in: 1...300, using: &random)
            let garbage = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            #expect(pair.server.receive(garbage) == .established)
        }
        _ = pair.takeFromServer()
        pair.client.core.close()
        pair.deliverToServer(pair.takeFromClient())
        #expect(pair.serverEvents.last == .closed, "the real peer's close_notify still gets through")
    }
}
