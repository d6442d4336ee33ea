import Bitstream
import Testing

@Suite struct RTPPacketTests {
    @Test func parsesHeaderCSRCsExtensionAndPadding() throws {
        var datagram: [UInt8] = [0xB1, 0xE0, 0x12, 0x34, 0, 0, 0x03, 0xE8, 1, 2, 3, 4]  // padding, extension, 1 CSRC, marker, PT 96
        datagram += [9, 9, 9, 9]                    // CSRC
        datagram += [0xBE, 0xDE, 0, 1, 7, 7, 7, 7]  // one-word extension
        datagram += [0x65, 0xAA, 0xBB]              // payload
        datagram += [0, 0, 3]                       // 3 bytes of padding
        let packet = try RTPPacket(parsing: datagram[...])
        #expect(packet.marker && packet.payloadType == 96 && packet.sequenceNumber == 0x1234 && packet.timestamp == 1000)
        #expect(Array(packet.payload) == [0x65, 0xAA, 0xBB])
    }

    @Test func hostileHeadersAreRejected() {
        #expect(throws: RTPError.truncated) { try RTPPacket(parsing: [0x80, 0x60, 0, 1][...]) }
        #expect(throws: RTPError.unsupportedVersion(1)) { try RTPPacket(parsing: ([0x40] + [UInt8](repeating: 0, count: 12))[...]) }
        #expect(throws: RTPError.truncated) { try RTPPacket(parsing: ([0x8F] + [UInt8](repeating: 0, count: 20))[...]) }  // 15 CSRCs
        #expect(throws: RTPError.truncated) {
            try RTPPacket(parsing: ([0x90, 0x60] + [UInt8](repeating: 0, count: 10) + [0xBE, 0xDE, 0xFF, 0xFF, 0x65])[...])
        }
        #expect(throws: RTPError.badPadding) { try RTPPacket(parsing: ([0xA0, 0x60] + [UInt8](repeating: 0, count: 10) + [0x65, 200])[...]) }
        #expect(throws: RTPError.emptyPayload) { try RTPPacket(parsing: ([0x80, 0x60] + [UInt8](repeating: 0, count: 10))[...]) }
    }
}
