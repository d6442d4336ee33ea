import Bitstream
import StreamrecvTestSupport
import Testing

/// Transport-wide feedback messages (draft-holmer-rmcat-transport-wide-cc-extensions-01 §3.1), written byte by
/// byte as the draft lays them out, and read back.
@Suite struct TransportWideFeedbackTests {
    typealias Arrival = TransportWideFeedback.Arrival

    static func message(base: UInt16, count: UInt16, _ received: [Arrival]) -> TransportWideFeedback {
        TransportWideFeedback(senderSSRC: 0x0102_0304, mediaSSRC: 0xA0B0_C0D0, baseSequenceNumber: base, statusCount: count,
                              referenceTime: 0x12_3456, feedbackCount: 7, received: received)
    }

    static let header: [UInt8] = [1, 2, 3, 4, 0xA0, 0xB0, 0xC0, 0xD0]

    @Test func aSmallALostAndALargeDeltaTakeATwoBitVector() {
        let message = Self.message(base: 10, count: 3, [Arrival(sequenceNumber: 10, delta: 4), Arrival(sequenceNumber: 12, delta: 300)])
        #expect(message.bytes() == [0xAF, 205, 0, 6] + Self.header + [
            0, 10, 0, 3,              // base 10, 3 statuses
            0x12, 0x34, 0x56, 7,      // reference time, feedback count
            0xD2, 0x00,               // 1 1 | 01 00 10 00 00 00 00: two-bit vector, small, lost, large
            4, 0x01, 0x2C,            // deltas: 4 (1 byte), 300 (2 bytes)
            0, 0, 3,                  // padding, its length last (P set in the first byte)
        ])
    }

    @Test func aLongRunTakesOneRunLengthChunk() {
        let received = (0..<20).map { Arrival(sequenceNumber: 65530 &+ UInt16($0), delta: 1) }
        let bytes = Self.message(base: 65530, count: 20, received).bytes()
        #expect(Array(bytes[20..<22]) == [0x20, 20])  // 0 01 0000000010100: a run of 20 small deltas
        #expect(Array(bytes[22..<42]) == [UInt8](repeating: 1, count: 20))
        // 42 bytes: two of padding, P set.
        #expect(bytes.count == 44 && bytes[0] == 0xAF && Array(bytes[42...]) == [0, 2])
    }

    @Test func smallAndLostAlternatingTakeOneBitVectors() {
        // 16 statuses: received at even offsets.
        let received = stride(from: 0, to: 16, by: 2).map { Arrival(sequenceNumber: 100 + UInt16($0), delta: 2) }
        let bytes = Self.message(base: 100, count: 16, received).bytes()
        // First chunk: 14 one-bit symbols 10101010101010; second: the last 2 (1 then 0), left-aligned.
        #expect(Array(bytes[20..<24]) == [0xAA, 0xAA, 0xA0, 0x00])
        #expect(Array(bytes[24..<32]) == [UInt8](repeating: 2, count: 8))
    }

    @Test func whatIsWrittenIsReadBackInsideACompoundPacket() throws {
        var generator = SeededGenerator(seed: 42)
        for _ in 0..<200 {
            let count = UInt16.random(in: 1...400, using: &generator)
            let base = UInt16.random(in: 0...UInt16.max, using: &generator)
            var received: [Arrival] = []
            for offset in 0..<count where Int.random(in: 0..<10, using: &generator) < 7 {
                let delta: Int16 = Bool.random(using: &generator) ? Int16.random(in: 0...255, using: &generator) : Int16.random(in: .min ... .max, using: &generator)
                received.append(Arrival(sequenceNumber: base &+ offset, delta: delta))
            }
            let message = Self.message(base: base, count: count, received)
            let datagram = RTCPTransportFeedback.transportWide(message)
            #expect(datagram.count % 4 == 0)
            let packets = try RTCPPacketSummary.parseCompound(datagram)
            #expect(packets.count == 2)
            #expect(packets.last == .transportWideFeedback(message))
        }
    }

    @Test func aMessageThatDoesNotHoldWhatItsCountsNeedIsRefused() {
        let whole = Self.message(base: 10, count: 3, [Arrival(sequenceNumber: 10, delta: 4), Arrival(sequenceNumber: 12, delta: 300)]).bytes()
        // Without its last delta byte (the padding recounted so the packet stays aligned).
        var short = Array(whole[0..<20]) + [0xD2, 0x00, 4, 0x01]
        short[0] = 0x8F
        short[3] = 5
        #expect(throws: RTCPError.malformed(payloadType: 205)) { try RTCPPacketSummary.parseCompound(short) }
        // The reserved symbol 11.
        var reserved = whole
        reserved[20] = 0xDE
        #expect(throws: RTCPError.malformed(payloadType: 205)) { try RTCPPacketSummary.parseCompound(reserved) }
        // A run of 8191 received claims 8191 deltas a 24-byte packet cannot hold: refused, nothing allocated for it.
        var claim = whole
        claim[14] = 0x1F
        claim[15] = 0xFF
        claim[20] = 0x3F
        claim[21] = 0xFF
        #expect(throws: RTCPError.malformed(payloadType: 205)) { try RTCPPacketSummary.parseCompound(claim) }
    }
}
