import Bitstream
import Testing

/// The codec names that configuration files and `streamrecvctl inspect --codec` accept, and JSON reports print.
@Suite struct VideoCodecTests {
    @Test func theTwoCodecsAreNamedAsConfigurationSpellsThem() {
        #expect(VideoCodec.allCases.map(\.rawValue) == ["h264", "h265"])
        #expect(VideoCodec(rawValue: "h264") == .h264)
        #expect(VideoCodec(rawValue: "h265") == .h265)
    }

    @Test(arguments: ["hevc", "avc", "H264", "h265 ", "", "auto", "h266"])
    func otherNamesAreNotACodec(name: String) {
        // Names are exact: "auto" is the configuration's own word, handled before a codec is looked up.
        #expect(VideoCodec(rawValue: name) == nil)
    }
}
