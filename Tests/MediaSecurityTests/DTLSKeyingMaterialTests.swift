@testable import MediaSecurity
import Testing

/// The SRTP keys a DTLS handshake hands out (DTLSEvents.swift): how the exporter's block is cut, which profiles
/// are known, and that keys stay out of logs.
@Suite struct DTLSKeyingMaterialTests {
    static func exportedLength(_ profile: SRTPProfile) -> Int { 2 * (profile.keyLength + profile.saltLength) }

    /// RFC 5764 §4.2: client_write_SRTP_master_key, server_write_SRTP_master_key, client_write_SRTP_master_salt,
    /// server_write_SRTP_master_salt, one after the other. Counting bytes show which slice went where.
    @Test(arguments: [SRTPProfile.aeadAes128Gcm, .aes128CmSha1_80])
    func theExportedBlockIsCutAsRFC5764Says(profile: SRTPProfile) throws {
        let block = (0..<UInt8(Self.exportedLength(profile))).map { $0 }
        let keys = try #require(DTLSKeyingMaterial(exported: block, profile: profile))
        let salt = UInt8(profile.saltLength)
        #expect(keys.profile == profile)
        #expect(keys.clientKey == Array(0..<16))
        #expect(keys.serverKey == Array(16..<32))
        #expect(keys.clientSalt == Array(32..<32 + salt))
        #expect(keys.serverSalt == Array(32 + salt..<32 + 2 * salt))
    }

    /// 60 bytes for AES-CM with HMAC-SHA1-80, 56 for AES-GCM; anything else is not that profile's keys.
    @Test(arguments: [SRTPProfile.aeadAes128Gcm, .aes128CmSha1_80])
    func aBlockOfAnyOtherLengthIsNoKeys(profile: SRTPProfile) {
        let length = Self.exportedLength(profile)
        #expect(length == (profile == .aeadAes128Gcm ? 56 : 60))
        let otherProfile: SRTPProfile = profile == .aeadAes128Gcm ? .aes128CmSha1_80 : .aeadAes128Gcm
        for wrong in [0, length - 1, length + 1, Self.exportedLength(otherProfile)] {
            #expect(DTLSKeyingMaterial(exported: Array(repeating: 7, count: wrong), profile: profile) == nil,
                    "\(wrong) bytes")
        }
    }

    /// The IANA ids OpenSSL reports (RFC 5764 §4.1.2, RFC 7714); the profiles the server never offers, such
    /// as SRTP_AES128_CM_HMAC_SHA1_32 (2) or AEAD_AES_256_GCM (8), are not keys it can use.
    @Test func onlyTheTwoOfferedProfilesAreKnownByTheirIANAIds() {
        #expect(SRTPProfile(ianaID: 0x0001) == .aes128CmSha1_80)
        #expect(SRTPProfile(ianaID: 0x0007) == .aeadAes128Gcm)
        for unknown in [0x0000, 0x0002, 0x0005, 0x0006, 0x0008, 0x0100, -1] {
            #expect(SRTPProfile(ianaID: unknown) == nil, "id \(unknown)")
        }
        #expect(SRTPProfile.aes128CmSha1_80.keyLength == 16 && SRTPProfile.aes128CmSha1_80.saltLength == 14)
        #expect(SRTPProfile.aeadAes128Gcm.keyLength == 16 && SRTPProfile.aeadAes128Gcm.saltLength == 12)
    }

    @Test func keyingMaterialNeverPrintsKeys() throws {
        let pair = try InMemoryHandshake()
        pair.exchange()
        let keys = try #require(pair.serverKeys)
        #expect(!"\(keys)".contains("\(keys.clientKey)"))
        #expect(!String(reflecting: keys).contains("\(keys.clientKey)"))
    }

    /// A log line that prints a whole event (`"\(event)"`) prints the keys inside it through their own
    /// description: redacted there too.
    @Test func anEventCarryingKeysPrintsThemRedacted() throws {
        let keys = try #require(DTLSKeyingMaterial(
            exported: (0..<56).map { UInt8(0xA0 | $0 % 16) }, profile: .aeadAes128Gcm))
        let event = DTLSEvent.connected(keys)
        for text in ["\(event)", String(reflecting: event), "\([event])"] {
            #expect(text.contains("keys redacted"), "\(text)")
            #expect(!text.contains("160") && !text.contains("0xa0") && !text.contains("161, 162"), "\(text)")
        }
    }

    /// Every failure reads differently in a log, and an alert carries OpenSSL's reason for it.
    @Test func failuresDescribeThemselvesDistinctly() {
        let failures: [DTLSFailure] = [
            .fingerprintMismatch, .noCommonSRTPProfile, .noPeerCertificate, .timedOut,
            .peerAlert("sslv3 alert handshake failure"), .handshakeFailed("unexpected message"), .keyExportFailed,
        ]
        let descriptions = failures.map(\.description)
        #expect(Set(descriptions).count == failures.count, "\(descriptions)")
        #expect(descriptions.allSatisfy { !$0.isEmpty })
        let alert = "sslv3 alert handshake failure"
        #expect(DTLSFailure.peerAlert(alert).description.hasSuffix(alert))
        #expect(DTLSFailure.handshakeFailed("unexpected message").description.hasSuffix("unexpected message"))
    }
}
