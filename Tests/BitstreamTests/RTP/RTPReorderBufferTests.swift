import Bitstream
import Testing

@Suite struct RTPReorderBufferTests {
    @Test func reorderBufferPutsPacketsBackInOrder() {
        func packet(_ sequence: UInt16) -> RTPPacket {
            RTPPacket(marker: false, payloadType: 96, sequenceNumber: sequence, timestamp: 0, ssrc: 1, payload: [0x41][...])
        }
        var buffer = RTPReorderBuffer(window: 4)
        var released: [UInt16] = []
        for sequence: UInt16 in [65534, 0, 65535, 1, 3, 4, 5, 6, 7, 2, 8] {
            buffer.push(packet(sequence)) { released.append($0.sequenceNumber) }
        }
        buffer.flush { released.append($0.sequenceNumber) }
        // 65535 overtaken by 0 (across the wrap) is put back; 2 arrives after four later packets filled the window,
        // so the buffer moved on without it and releases it late (the depacketizer drops it as late).
        #expect(released == [65534, 65535, 0, 1, 3, 4, 5, 6, 7, 2, 8])
    }
}
