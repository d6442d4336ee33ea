import Bitstream
import Testing

@Suite struct RTCPFeedbackTests {
    @Test func pictureLossIndicationFollowsAnEmptyReceiverReport() {
        let bytes = RTCPFeedback.keyframeRequest(.pictureLossIndication, senderSSRC: 0x0102_0304, mediaSSRC: 0xA0B0_C0D0)
        #expect(bytes == [
            0x80, 201, 0, 1, 1, 2, 3, 4,                          // RR, RC=0, length 1
            0x81, 206, 0, 2, 1, 2, 3, 4, 0xA0, 0xB0, 0xC0, 0xD0,  // PSFB FMT=1 (PLI), length 2
        ])
    }

    @Test func fullIntraRequestCarriesTheSSRCAndSequenceNumberInItsFCI() {
        let bytes = RTCPFeedback.keyframeRequest(.fullIntraRequest(sequenceNumber: 7), senderSSRC: 0x11, mediaSSRC: 0x2233_4455)
        #expect(bytes.count == 28)
        #expect(Array(bytes[8..<12]) == [0x84, 206, 0, 4], "PSFB FMT=4 (FIR), length 4 words after the first")
        #expect(Array(bytes[16..<20]) == [0, 0, 0, 0], "media source field unused for FIR")
        #expect(Array(bytes[20..<28]) == [0x22, 0x33, 0x44, 0x55, 7, 0, 0, 0])
        // Each RTCP length field counts 32-bit words minus one: the compound packet is exactly the two packets.
        #expect((Int(bytes[3]) + 1) * 4 + (Int(bytes[11]) + 1) * 4 == bytes.count)
    }
}
