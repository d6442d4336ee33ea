import Bitstream
import StreamrecvTestSupport
import Testing

/// RFC 5769's sample messages (§2.1 to §2.3), typed from the RFC; password "VOkJxbRl1RmTxUk/WvJxBt". Their
/// MESSAGE-INTEGRITY and FINGERPRINT were checked once against a real HMAC-SHA1 and zlib's crc32 when typed.
private enum RFC5769 {
    static let password = Array("VOkJxbRl1RmTxUk/WvJxBt".utf8)
    static let transactionID = hex("b7e7a701 bc34d686 fa87dfae")
    static let request = hex("""
        00010058 2112a442 b7e7a701 bc34d686 fa87dfae 80220010 5354554e 20746573 7420636c 69656e74
        00240004 6e0001ff 80290008 932ff9b1 51263b36 00060009 6576746a 3a683676 59202020
        00080014 9aeaa70c bfd8cb56 781ef2b5 b2d3f249 c1b571a2 80280004 e57a3bcf
        """)
    static let ipv4Response = hex("""
        0101003c 2112a442 b7e7a701 bc34d686 fa87dfae 8022000b 74657374 20766563 746f7220
        00200008 0001a147 e112a643 00080014 2b91f599 fd9e90c3 8c7489f9 2af9ba53 f06be7d7 80280004 c07d4c96
        """)
    static let ipv6Response = hex("""
        01010048 2112a442 b7e7a701 bc34d686 fa87dfae 8022000b 74657374 20766563 746f7220
        00200014 0002a147 0113a9fa a5d3f179 bc25f4b5 bed2b9d9
        00080014 a382954e 4be67bf1 1784c97c 8292c275 bfe3ed41 80280004 c8fb0b4c
        """)
    static let all = [request, ipv4Response, ipv6Response]

    static func hex(_ text: String) -> [UInt8] {
        let digits = text.unicodeScalars.compactMap { UInt8(String($0), radix: 16) }
        return stride(from: 0, to: digits.count, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }
    }
}

/// A stand-in for HMAC-SHA1 (this module does no cryptography): remembers what it was asked and answers `answer`.
private final class RecordingMAC {
    var calls: [(key: [UInt8], data: [UInt8])] = []
    let answer: [UInt8]
    init(answer: [UInt8]) { self.answer = answer }
    func callAsFunction(_ key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        calls.append((key, data))
        return answer
    }
}

/// A keyed checksum that changes with every byte (not cryptography; it stands in for HMAC-SHA1 in round trips).
private func toyMAC(_ key: [UInt8], _ data: [UInt8]) -> [UInt8] {
    var lanes = (0..<20).map { UInt64($0) &* 0x9E37_79B9_7F4A_7C15 }
    for byte in key + [0xFF] + data {
        for lane in lanes.indices { lanes[lane] = (lanes[lane] ^ UInt64(byte)) &* 0x1000_0000_01B3 &+ UInt64(lane) }
    }
    return lanes.map { lane in
        // SplitMix64's finalizer, so that a change in the last byte reaches every output bit.
        var mixed = (lane ^ lane >> 30) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ mixed >> 27) &* 0x94D0_49BB_1331_11EB
        return UInt8(truncatingIfNeeded: mixed ^ mixed >> 31)
    }
}

@Suite struct STUNMessageTests {
    @Test func sampleRequestParses() throws {
        let message = try STUNMessage.parse(RFC5769.request)
        #expect(message.method == STUNMessage.binding && message.messageClass == .request)
        #expect(message.transactionID == RFC5769.transactionID)
        #expect(message.attributes.map(\.type) == [0x8022, 0x0024, 0x8029, 0x0006, 0x0008, 0x8028])
        #expect(message.username == "evtj:h6vY", "padding (spaces in RFC 5769) is not part of the value")
        #expect(message.priority == 0x6E00_01FF)
        #expect(message.iceControlled == 0x932F_F9B1_5126_3B36 && message.iceControlling == nil)
        #expect(!message.useCandidate && message.hasMessageIntegrity && message.hasFingerprint)
        #expect(message.value(of: STUNAttribute.software) == Array("STUN test client".utf8))
    }

    @Test func sampleResponsesDecodeTheirXORMappedAddress() throws {
        let ipv4 = try STUNMessage.parse(RFC5769.ipv4Response)
        #expect(ipv4.messageClass == .successResponse && ipv4.method == STUNMessage.binding)
        #expect(ipv4.xorMappedAddress == STUNAddress(.ipv4([192, 0, 2, 1]), port: 32853))
        let ipv6 = try STUNMessage.parse(RFC5769.ipv6Response)
        let expected: [UInt8] = [0x20, 0x01, 0x0D, 0xB8, 0x12, 0x34, 0x56, 0x78, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77]
        #expect(ipv6.xorMappedAddress == STUNAddress(.ipv6(expected), port: 32853))
    }

    @Test(arguments: RFC5769.all) func sampleFingerprintsVerify(_ sample: [UInt8]) {
        #expect(STUNMessage.hasValidFingerprint(sample))
        var tampered = sample
        tampered[tampered.count - 1] ^= 1
        #expect(!STUNMessage.hasValidFingerprint(tampered))
    }

    /// The HMAC must cover the header and attributes before MESSAGE-INTEGRITY, with the length rewritten to end
    /// after MESSAGE-INTEGRITY (FINGERPRINT left out): the stand-in answers the RFC's MAC only to verify.
    @Test(arguments: RFC5769.all) func sampleIntegrityCoversThePrefixWithTheLengthRewritten(_ sample: [UInt8]) {
        let integrityStart = sample.count - 32  // MESSAGE-INTEGRITY (24 bytes) then FINGERPRINT (8)
        let mac = RecordingMAC(answer: Array(sample[integrityStart + 4..<integrityStart + 24]))
        #expect(STUNMessage.verifyMessageIntegrity(of: sample, key: RFC5769.password, hmacSHA1: mac.callAsFunction))
        var expectedData = Array(sample[..<integrityStart])
        expectedData[3] = UInt8(integrityStart - 20 + 24)
        #expect(mac.calls.count == 1)
        #expect(mac.calls.first?.key == RFC5769.password)
        #expect(mac.calls.first?.data == expectedData)
        #expect(Int(sample[3]) == integrityStart - 20 + 32, "the sample's own length also covers FINGERPRINT")

        let wrong = RecordingMAC(answer: [UInt8](repeating: 0xA5, count: 20))
        #expect(!STUNMessage.verifyMessageIntegrity(of: sample, key: RFC5769.password, hmacSHA1: wrong.callAsFunction))
        let short = RecordingMAC(answer: [UInt8](repeating: 0, count: 19))
        #expect(!STUNMessage.verifyMessageIntegrity(of: sample, key: RFC5769.password, hmacSHA1: short.callAsFunction))
    }

    @Test(arguments: [
        STUNAddress(.ipv4([203, 0, 113, 7]), port: 50_000),
        STUNAddress(.ipv6([0x20, 0x01, 0x0D, 0xB8] + [UInt8](repeating: 0, count: 11) + [1]), port: 9),
    ])
    func successResponseRoundTrips(_ address: STUNAddress) throws {
        let key = Array("local-password".utf8)
        let mac = RecordingMAC(answer: [UInt8](repeating: 0x3C, count: 20))
        let bytes = STUNMessage.bindingSuccessResponse(transactionID: RFC5769.transactionID, mappedAddress: address,
                                                       integrityKey: key, hmacSHA1: mac.callAsFunction)
        let message = try STUNMessage.parse(bytes)
        #expect(message.messageClass == .successResponse && message.method == STUNMessage.binding)
        #expect(message.transactionID == RFC5769.transactionID)
        #expect(message.xorMappedAddress == address)
        #expect(message.attributes.map(\.type) == [0x0020, 0x0008, 0x8028])
        #expect(message.value(of: STUNAttribute.messageIntegrity) == mac.answer)
        #expect(STUNMessage.hasValidFingerprint(bytes))
        #expect(STUNMessage.verifyMessageIntegrity(of: bytes, key: key, hmacSHA1: mac.callAsFunction))
        // Writing and verifying hashed the same bytes: the prefix with the length ending after MESSAGE-INTEGRITY.
        #expect(mac.calls.count == 2 && mac.calls[0].data == mac.calls[1].data && mac.calls[0].key == key)
        #expect(mac.calls[0].data == Array(bytes[..<(bytes.count - 32)]).withLength(bytes.count - 20 - 8))
    }

    @Test func everyTamperedByteBeforeTheIntegrityFails() {
        let key = Array("pw".utf8)
        let bytes = STUNMessage.bindingSuccessResponse(transactionID: RFC5769.transactionID,
                                                       mappedAddress: STUNAddress(.ipv4([10, 0, 0, 1]), port: 1234),
                                                       integrityKey: key, hmacSHA1: toyMAC)
        #expect(STUNMessage.verifyMessageIntegrity(of: bytes, key: key, hmacSHA1: toyMAC))
        #expect(!STUNMessage.verifyMessageIntegrity(of: bytes, key: Array("pW".utf8), hmacSHA1: toyMAC))
        for index in 0..<bytes.count {
            var tampered = bytes
            tampered[index] ^= 0x01
            let integrity = STUNMessage.verifyMessageIntegrity(of: tampered, key: key, hmacSHA1: toyMAC)
            // FINGERPRINT (the last 8 bytes) is outside the HMAC, but not outside its own CRC; its length field
            // still frames the message.
            let outsideHMAC = index >= bytes.count - 8 && index != bytes.count - 6 && index != bytes.count - 5
            #expect(integrity == outsideHMAC, "byte \(index)")
            #expect(!STUNMessage.hasValidFingerprint(tampered), "byte \(index)")
        }
    }

    @Test func errorResponsesCarryTheirCodeAndSignOnlyWithAKey() throws {
        let unsigned = STUNMessage.bindingErrorResponse(transactionID: RFC5769.transactionID, code: 401,
                                                        reason: "Unauthorized", integrityKey: nil, hmacSHA1: toyMAC)
        let message = try STUNMessage.parse(unsigned)
        #expect(message.messageClass == .errorResponse && !message.hasMessageIntegrity && message.hasFingerprint)
        #expect(message.errorCode?.code == 401 && message.errorCode?.reason == "Unauthorized")
        #expect(Array(unsigned[0..<2]) == [0x01, 0x11], "Binding error response type (RFC 8489 §6)")
        #expect(STUNMessage.hasValidFingerprint(unsigned))

        let key = Array("pw".utf8)
        let signed = STUNMessage.bindingErrorResponse(transactionID: RFC5769.transactionID, code: 487,
                                                      reason: String(repeating: "\u{E9}", count: 300), integrityKey: key, hmacSHA1: toyMAC)
        let conflict = try STUNMessage.parse(signed)
        #expect(conflict.errorCode?.code == 487 && conflict.errorCode?.reason.count == 127)
        #expect(STUNMessage.verifyMessageIntegrity(of: signed, key: key, hmacSHA1: toyMAC))
    }

    /// Issue 31, item 4: the screening before parsing finds the local half of a request's USERNAME and nothing else.
    @Test func screeningFindsTheLocalFragmentOfABindingRequestOnly() {
        let bytes = STUNMessage.bindingRequest(transactionID: RFC5769.transactionID, username: "srv1abcd:client99",
                                               priority: 1, role: .controlling(tiebreaker: 7), useCandidate: false,
                                               integrityKey: Array("key".utf8), hmacSHA1: toyMAC)
        let fragment = STUNMessage.bindingRequestLocalFragment(bytes)
        #expect(fragment.map { Array(bytes[$0]) } == Array("srv1abcd".utf8))
        #expect(bytes.withUnsafeBytes { STUNMessage.bindingRequestLocalFragment($0) } == fragment, "the same on a raw buffer")
        var lying = bytes
        lying[3] &+= 4
        #expect(STUNMessage.bindingRequestLocalFragment(lying) == nil, "a length that does not fit")
        var response = bytes
        response[0] = 0x01
        #expect(STUNMessage.bindingRequestLocalFragment(response) == nil, "not a request")
        var cookie = bytes
        cookie[4] ^= 0xFF
        #expect(STUNMessage.bindingRequestLocalFragment(cookie) == nil)
        let noColon = STUNMessage.bindingRequest(transactionID: RFC5769.transactionID, username: "nocolon", priority: 1,
                                                 role: .controlled(tiebreaker: 1), useCandidate: false, integrityKey: [1], hmacSHA1: toyMAC)
        #expect(STUNMessage.bindingRequestLocalFragment(noColon) == nil)
        for length in 0..<bytes.count { #expect(STUNMessage.bindingRequestLocalFragment(bytes.prefix(length)) == nil) }
    }

    @Test func bindingRequestRoundTrips() throws {
        let key = Array("remote-password".utf8)
        let bytes = STUNMessage.bindingRequest(transactionID: RFC5769.transactionID, username: "abcd:efgh",
                                               priority: 0x7E00_00FF, role: .controlling(tiebreaker: 0x0102_0304_0506_0708),
                                               useCandidate: true, integrityKey: key, hmacSHA1: toyMAC)
        let request = try STUNMessage.parse(bytes)
        #expect(Array(bytes[0..<2]) == [0x00, 0x01])
        #expect(request.username == "abcd:efgh" && request.priority == 0x7E00_00FF && request.useCandidate)
        #expect(request.iceControlling == 0x0102_0304_0506_0708 && request.iceControlled == nil)
        #expect(STUNMessage.verifyMessageIntegrity(of: bytes, key: key, hmacSHA1: toyMAC))
        #expect(STUNMessage.hasValidFingerprint(bytes))

        let consent = try STUNMessage.parse(STUNMessage.bindingRequest(
            transactionID: RFC5769.transactionID, username: "a:b", priority: 1, role: .controlled(tiebreaker: 9),
            useCandidate: false, integrityKey: key, hmacSHA1: toyMAC))
        #expect(consent.iceControlled == 9 && consent.iceControlling == nil && !consent.useCandidate)
    }

    @Test(arguments: RFC5769.all) func serializedParsesToTheSameMessage(_ sample: [UInt8]) throws {
        let message = try STUNMessage.parse(sample)
        #expect(try STUNMessage.parse(message.serialized()) == message)
        #expect(message.serialized().count == sample.count)
    }

    @Test(arguments: RFC5769.all) func everyTruncationThrows(_ sample: [UInt8]) {
        for count in 0..<sample.count {
            let prefix = Array(sample[..<count])
            #expect(throws: STUNError.self) { try STUNMessage.parse(prefix) }
            #expect(!STUNMessage.hasValidFingerprint(prefix))
            #expect(!STUNMessage.verifyMessageIntegrity(of: prefix, key: [], hmacSHA1: toyMAC))
        }
    }

    @Test func hostileFramingIsRejected() {
        let sample = RFC5769.ipv4Response
        func parse(_ edit: (inout [UInt8]) -> Void) throws(STUNError) {
            var bytes = sample
            edit(&bytes)
            _ = try STUNMessage.parse(bytes)
        }
        #expect(throws: STUNError.notSTUN) { try parse { $0[0] |= 0x80 } }
        #expect(throws: STUNError.badMagicCookie(0x2112_A443)) { try parse { $0[7] = 0x43 } }
        #expect(throws: STUNError.badLength(0x3D)) { try parse { $0[3] = 0x3D } }
        #expect(throws: STUNError.badLength(0x38)) { try parse { $0[3] = 0x38 } }
        #expect(throws: STUNError.attributeTruncated(type: 0x8022)) { try parse { $0[23] = 0x40 } }
        #expect(throws: STUNError.attributeAfterFingerprint) { try parse { $0 += [0, 0x25, 0, 0]; $0[3] += 4 } }
        #expect(throws: STUNError.tooLong(1504)) {
            try parse { $0 += [UInt8](repeating: 0, count: 1424); $0[2] = 0x05; $0[3] = 0xCC }
        }
        var many = Array(sample[0..<20])
        for _ in 0..<65 { many += [0x80, 0x00, 0, 0] }  // 65 empty comprehension-optional attributes
        #expect(throws: STUNError.tooManyAttributes) { try STUNMessage.parse(many.withLength(65 * 4)) }
        #expect(throws: Never.self) { try STUNMessage.parse(Array(many[..<(20 + 64 * 4)]).withLength(64 * 4)) }
    }

    @Test func attributesAfterIntegrityAreIgnoredAndOddValuesAreNil() throws {
        var message = STUNMessage(method: 1, messageClass: .request, transactionID: RFC5769.transactionID, attributes: [
            STUNAttribute(type: STUNAttribute.priority, value: [1, 2, 3]),
            STUNAttribute(type: STUNAttribute.iceControlling, value: [1]),
            STUNAttribute(type: STUNAttribute.username, value: [0xFF, 0xFE]),
            STUNAttribute(type: STUNAttribute.xorMappedAddress, value: [0, 1, 0, 0, 1]),
            STUNAttribute(type: STUNAttribute.messageIntegrity, value: [UInt8](repeating: 0, count: 20)),
            STUNAttribute(type: STUNAttribute.useCandidate, value: []),
            STUNAttribute(type: STUNAttribute.fingerprint, value: [0, 0, 0, 0]),
        ])
        let parsed = try STUNMessage.parse(message.serialized())
        #expect(parsed.priority == nil && parsed.iceControlling == nil && parsed.username == nil)
        #expect(parsed.xorMappedAddress == nil && parsed.errorCode == nil)
        #expect(!parsed.useCandidate, "USE-CANDIDATE after MESSAGE-INTEGRITY is not vouched for")
        message.attributes.remove(at: 5)
        #expect(parsed == message)
        #expect(!STUNMessage.hasValidFingerprint(message.serialized()))
    }

    @Test func randomBytesNeverTrap() throws {
        var generator = SeededGenerator(seed: 5769)
        for _ in 0..<20_000 {
            var bytes = (0..<Int.random(in: 0..<120, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if bytes.count >= 20 && Bool.random(using: &generator) {
                // Mostly valid headers, so that the attribute walk is what gets exercised.
                bytes[0] &= 0x3F
                bytes.replaceSubrange(4..<8, with: [0x21, 0x12, 0xA4, 0x42])
                bytes = Array(bytes[..<(20 + (bytes.count - 20) / 4 * 4)]).withLength((bytes.count - 20) / 4 * 4)
            }
            if let message = try? STUNMessage.parse(bytes) {
                #expect(try STUNMessage.parse(message.serialized()) == message)
            }
            _ = STUNMessage.hasValidFingerprint(bytes)
            _ = STUNMessage.verifyMessageIntegrity(of: bytes, key: [1], hmacSHA1: toyMAC)
        }
    }

    @Test func multiplexedPacketsAreToldApartByTheirFirstBytes() {
        #expect(MultiplexedPacketKind.classify([]) == .unknown)
        #expect(MultiplexedPacketKind.classify([0x00, 0x01]) == .stun && MultiplexedPacketKind.classify([3]) == .stun)
        #expect(MultiplexedPacketKind.classify([4]) == .unknown && MultiplexedPacketKind.classify([19]) == .unknown)
        #expect(MultiplexedPacketKind.classify([20, 0xFE]) == .dtls && MultiplexedPacketKind.classify([63]) == .dtls)
        #expect(MultiplexedPacketKind.classify([64]) == .unknown && MultiplexedPacketKind.classify([127]) == .unknown)
        #expect(MultiplexedPacketKind.classify([0x80]) == .unknown, "RTP or RTCP, but which needs the second byte")
        #expect(MultiplexedPacketKind.classify([0x80, 96]) == .rtp)
        #expect(MultiplexedPacketKind.classify([0x80, 0x80 | 96]) == .rtp, "marker set, PT 96: 224")
        #expect(MultiplexedPacketKind.classify([0x80, 0x80 | 63]) == .rtp, "marker set, PT 63: 191")
        for type: UInt8 in 192...223 { #expect(MultiplexedPacketKind.classify([0x81, type]) == .rtcp) }
        #expect(MultiplexedPacketKind.classify([0xBF, 200]) == .rtcp)
        #expect(MultiplexedPacketKind.classify([0xC0, 200]) == .unknown)
        #expect(MultiplexedPacketKind.classify(RFC5769.request) == .stun)
    }
}

private extension [UInt8] {
    /// A STUN message with its header's length field set.
    func withLength(_ length: Int) -> [UInt8] {
        var copy = self
        copy[2] = UInt8(length >> 8)
        copy[3] = UInt8(length & 0xFF)
        return copy
    }
}
