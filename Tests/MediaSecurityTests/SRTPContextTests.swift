@testable import MediaSecurity
import Testing

@Suite struct SRTPContextTests {
    /// Keys from a real handshake: `server` as the daemon exported them, `client` as the browser did.
    static func handshakeKeys(
        _ profile: SRTPProfile
    ) throws -> (server: DTLSKeyingMaterial, client: DTLSKeyingMaterial) {
        let pair = try InMemoryHandshake(
            clientProfiles: profile == .aeadAes128Gcm ? "SRTP_AEAD_AES_128_GCM" : "SRTP_AES128_CM_SHA1_80")
        pair.exchange()
        return (try #require(pair.serverKeys), try #require(pair.clientKeys))
    }

    static func rtpPacket(sequence: UInt16, ssrc: UInt32 = 0x1234_5678, payload: Int = 100) -> [UInt8] {
        let timestamp = UInt32(sequence) &* 3000
        return [0x80, 96, UInt8(sequence >> 8), UInt8(sequence & 0xFF)]
            + [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: timestamp >> $0) }
            + [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: ssrc >> $0) }
            + (0..<payload).map { UInt8(truncatingIfNeeded: $0 &+ Int(sequence)) }
    }

    /// A receiver report with one report block (RFC 3550 §6.4.2).
    static let receiverReport: [UInt8] = [0x81, 201, 0, 7, 0, 0, 0, 1, 0x12, 0x34, 0x56, 0x78]
        + Array(repeating: 0, count: 20)

    @Test(arguments: [SRTPProfile.aeadAes128Gcm, .aes128CmSha1_80])
    func mediaFromTheBrowserDecryptsToTheSameBytes(profile: SRTPProfile) throws {
        let keys = try Self.handshakeKeys(profile)
        let browser = try SRTPSendContext(keying: keys.client, localIsDTLSClient: true)
        let daemon = try SRTPReceiveContext(keying: keys.server)
        // Across the 16-bit wrap, so the rollover counter is guessed right too.
        for sequence in (0..<40).map({ UInt16(truncatingIfNeeded: 65_520 + $0) }) {
            let packet = Self.rtpPacket(sequence: sequence)
            let protected = try browser.protectRTP(packet).get()
            #expect(protected.count == packet.count + (profile == .aeadAes128Gcm ? 16 : 10))
            #expect(protected != packet)
            #expect(try daemon.unprotectRTP(protected).get() == packet)
        }
    }

    @Test(arguments: [SRTPProfile.aeadAes128Gcm, .aes128CmSha1_80])
    func forgedAndReplayedMediaIsRefused(profile: SRTPProfile) throws {
        let keys = try Self.handshakeKeys(profile)
        let browser = try SRTPSendContext(keying: keys.client, localIsDTLSClient: true)
        let daemon = try SRTPReceiveContext(keying: keys.server)
        let protected = try browser.protectRTP(Self.rtpPacket(sequence: 1)).get()
        for index in [2, 20, protected.count - 1] {  // header, payload, tag
            var forged = protected
            forged[index] ^= 0x01
            #expect(daemon.unprotectRTP(forged) == .failure(.authenticationFailed), "byte \(index) flipped")
        }
        #expect(try daemon.unprotectRTP(protected).get() == Self.rtpPacket(sequence: 1), "forgeries changed nothing")
        #expect(daemon.unprotectRTP(protected) == .failure(.replayed))
        #expect(daemon.unprotectRTP([0x80, 96, 0]) == .failure(.malformed))
        #expect(daemon.unprotectRTP(Array(repeating: 0x80, count: 70_000)) == .failure(.malformed))
        let otherSession = try SRTPReceiveContext(keying: Self.handshakeKeys(profile).server)
        #expect(otherSession.unprotectRTP(protected) == .failure(.authenticationFailed), "another session's keys")
    }

    @Test(arguments: [SRTPProfile.aeadAes128Gcm, .aes128CmSha1_80])
    func reportsFromTheBrowserDecryptOnceAndOnlyUnforged(profile: SRTPProfile) throws {
        let keys = try Self.handshakeKeys(profile)
        let browser = try SRTPSendContext(keying: keys.client, localIsDTLSClient: true)
        let daemon = try SRTPReceiveContext(keying: keys.server)
        let protected = try browser.protectRTCP(Self.receiverReport).get()
        var forged = protected
        forged[10] ^= 0x80
        #expect(daemon.unprotectRTCP(forged) == .failure(.authenticationFailed))
        #expect(try daemon.unprotectRTCP(protected).get() == Self.receiverReport)
        #expect(daemon.unprotectRTCP(protected) == .failure(.replayed))
    }

    @Test(arguments: [SRTPProfile.aeadAes128Gcm, .aes128CmSha1_80])
    func ourReportsDecryptOnlyWithTheServersKeys(profile: SRTPProfile) throws {
        let keys = try Self.handshakeKeys(profile)
        let daemon = try SRTPSendContext(keying: keys.server)
        let browser = try SRTPReceiveContext(keying: keys.client, remoteIsDTLSClient: false)
        let wrongDirection = try SRTPReceiveContext(keying: keys.server)
        for _ in 0..<3 {
            let protected = try daemon.protectRTCP(Self.receiverReport).get()
            #expect(wrongDirection.unprotectRTCP(protected) == .failure(.authenticationFailed))
            #expect(try browser.unprotectRTCP(protected).get() == Self.receiverReport)
        }
    }

    @Test func keysOfTheWrongLengthAreRefused() {
        let keys = DTLSKeyingMaterial(
            profile: .aeadAes128Gcm,
            clientKey: Array(repeating: 1, count: 16), clientSalt: Array(repeating: 2, count: 14),
            serverKey: Array(repeating: 3, count: 16), serverSalt: Array(repeating: 4, count: 12))
        #expect(throws: SRTPSetupError.self) { try SRTPReceiveContext(keying: keys) }
        #expect(throws: Never.self) { try SRTPSendContext(keying: keys) }
    }
}

/// libsrtp's own reference packets (test/srtp_driver.c, srtp_validate and srtp_validate_gcm): they pin the key and
/// salt layout and the policy against outside numbers, which a round trip through our own code cannot.
@Suite struct SRTPKnownAnswerTests {
    static let rtp = [UInt8](hex: "800f1234decafbadcafebabe") + Array(repeating: 0xAB, count: 16)
    static let rtcp = [UInt8](hex: "81c8000bcafebabe") + Array(repeating: 0xAB, count: 16)

    static func keying(_ profile: SRTPProfile, key: String, salt: String) -> DTLSKeyingMaterial {
        // The reference key goes in the client's half: the browser's, which SRTPReceiveContext uses by default.
        DTLSKeyingMaterial(
            profile: profile, clientKey: [UInt8](hex: key), clientSalt: [UInt8](hex: salt),
            serverKey: Array(repeating: 0, count: 16), serverSalt: Array(repeating: 0, count: profile.saltLength))
    }

    static let cases: [(keying: DTLSKeyingMaterial, srtp: String, srtcp: String)] = [
        (
            keying(.aes128CmSha1_80, key: "e1f97a0d3e018be0d64fa32c06de4139", salt: "0ec675ad498afeebb6960b3aabe6"),
            "800f1234decafbadcafebabe4e55dc4ce79978d88ca4d215949d2402b78d6acc99ea179b8dbb",
            "81c8000bcafebabe7128035be487b9bdbef89041f977a5a880000001993e08cd54d6c1230798"
        ),
        (
            keying(.aeadAes128Gcm, key: "000102030405060708090a0b0c0d0e0f", salt: "a0a1a2a3a4a5a6a7a8a9aaab"),
            "800f1234decafbadcafebabec5002ede04cfdd2eb91159e0880aa06ed2976826f796b201df3131a127e8a392",
            "81c8000bcafebabec98b8b5df0392a55852b6c21ac8e7025c52c6fbea2b3b446ea31123ba88ce61e80000001"
        ),
    ]

    @Test(arguments: 0..<cases.count)
    func matchesLibsrtpsReferencePackets(index: Int) throws {
        let (keying, srtp, srtcp) = Self.cases[index]
        let sender = try SRTPSendContext(keying: keying, localIsDTLSClient: true)
        #expect(try sender.protectRTP(Self.rtp).get() == [UInt8](hex: srtp))
        #expect(try sender.protectRTCP(Self.rtcp).get() == [UInt8](hex: srtcp))
        let receiver = try SRTPReceiveContext(keying: keying)
        #expect(try receiver.unprotectRTP([UInt8](hex: srtp)).get() == Self.rtp)
        #expect(try receiver.unprotectRTCP([UInt8](hex: srtcp)).get() == Self.rtcp)
    }
}
