import Bitstream
import Testing

/// RTP header extension elements (RFC 8285) found by id in both forms, and nothing read past a packet.
@Suite struct RTPHeaderExtensionsTests {
    /// An RTP packet with the X bit, `profile` and `elements` (padded by the caller to whole words), and a payload.
    static func packet(profile: [UInt8], _ elements: [UInt8], csrcs: Int = 0) -> [UInt8] {
        precondition(elements.count % 4 == 0)
        var bytes: [UInt8] = [0x90 | UInt8(csrcs), 96, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3]
        bytes += [UInt8](repeating: 0xEE, count: 4 * csrcs)
        bytes += profile + [0, UInt8(elements.count / 4)] + elements
        return bytes + [0x65, 0x88]
    }

    @Test func oneByteElementsAreFoundPastPaddingAndOthers() {
        // id 2 (3 bytes of abs-send-time), a padding byte, id 4 (2 bytes: transport-wide sequence 0x1234), padding.
        let packet = Self.packet(profile: [0xBE, 0xDE], [0x22, 1, 2, 3, 0, 0x41, 0x12, 0x34], csrcs: 1)
        #expect(RTPHeaderExtensions.element(id: 2, in: packet[...]) == [1, 2, 3][...])
        #expect(RTPHeaderExtensions.transportSequenceNumber(id: 4, in: packet[...]) == 0x1234)
        #expect(RTPHeaderExtensions.element(id: 5, in: packet[...]) == nil)
        #expect(RTPHeaderExtensions.element(id: 0, in: packet[...]) == nil)
    }

    @Test func twoByteElementsAreFound() {
        // id 4, length 2; id 200, length 0; padding.
        let packet = Self.packet(profile: [0x10, 0x00], [4, 2, 0xAB, 0xCD, 200, 0, 0, 0])
        #expect(RTPHeaderExtensions.transportSequenceNumber(id: 4, in: packet[...]) == 0xABCD)
        #expect(RTPHeaderExtensions.element(id: 200, in: packet[...])?.isEmpty == true)
    }

    @Test func malformedBlocksYieldNothing() {
        // An element longer than its block; the id 15 that ends a one-byte block; an unknown profile; no X bit;
        // a block longer than the packet.
        let overlong = Self.packet(profile: [0xBE, 0xDE], [0x4F, 1, 2, 3])
        #expect(RTPHeaderExtensions.element(id: 4, in: overlong[...]) == nil)
        let stopped = Self.packet(profile: [0xBE, 0xDE], [0xF0, 0x41, 0x12, 0x34])
        #expect(RTPHeaderExtensions.element(id: 4, in: stopped[...]) == nil)
        let unknown = Self.packet(profile: [0x12, 0x34], [0x41, 0x12, 0x34, 0])
        #expect(RTPHeaderExtensions.element(id: 4, in: unknown[...]) == nil)
        var plain = Self.packet(profile: [0xBE, 0xDE], [0x41, 0x12, 0x34, 0])
        plain[0] = 0x80
        #expect(RTPHeaderExtensions.element(id: 4, in: plain[...]) == nil)
        var claimed = Self.packet(profile: [0xBE, 0xDE], [0x41, 0x12, 0x34, 0])
        claimed[15] = 200
        #expect(RTPHeaderExtensions.element(id: 4, in: claimed[...]) == nil)
        // Every prefix of a good packet: nil or the element, never a trap.
        let good = Self.packet(profile: [0xBE, 0xDE], [0x41, 0x12, 0x34, 0])
        for end in 0..<good.count {
            _ = RTPHeaderExtensions.element(id: 4, in: good[0..<end])
        }
        // A slice that does not start at 0.
        let shifted = [0xFF, 0xFF] + good
        #expect(RTPHeaderExtensions.transportSequenceNumber(id: 4, in: shifted[2...]) == 0x1234)
    }
}
