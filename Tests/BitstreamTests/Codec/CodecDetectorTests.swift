import Bitstream
import Testing

@Suite struct CodecDetectorTests {
    @Test func codecIsDetectedFromTheFirstParameterSet() {
        #expect(CodecDetector.codec(ofFirstParameterSet: [0x40, 0x01, 0x0C][...]) == .h265)
        #expect(CodecDetector.codec(ofFirstParameterSet: [0x42, 0x01, 0x01][...]) == .h265)
        #expect(CodecDetector.codec(ofFirstParameterSet: [0x67, 0x42][...]) == .h264)
        #expect(CodecDetector.codec(ofFirstParameterSet: [0x28, 0xCE][...]) == .h264)
        // An H.264 SPS with nal_ref_idc 0 is not a valid parameter set; a slice is not a parameter set.
        #expect(CodecDetector.codec(ofFirstParameterSet: [0x07, 0x42][...]) == nil)
        #expect(CodecDetector.codec(ofFirstParameterSet: [0x65, 0x88][...]) == nil)
        // H.265 VPS with a temporal id other than 0 is invalid.
        #expect(CodecDetector.codec(ofFirstParameterSet: [0x40, 0x02][...]) == nil)
    }
}
