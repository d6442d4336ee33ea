import Bitstream
import StreamrecvTestSupport
import Testing

@Suite struct H264SequenceParameterSetTests {
    @Test func parsesCroppingAndTiming() throws {
        let unit = Build.h264SPS(widthInMbs: 120, heightInMapUnits: 68, crop: (0, 0, 0, 4), timing: (1001, 60000))
        let sps = try H264SequenceParameterSet(payload: unit.dropFirst())
        #expect(sps.format.codedWidth == 1920 && sps.format.codedHeight == 1088)
        #expect(sps.format.width == 1920 && sps.format.height == 1080)
        #expect(sps.format.frameRate == FrameRate(numerator: 30000, denominator: 1001))
        #expect(sps.format.reorderDepth == 0)
    }

    @Test func rejectsAbsurdDimensions() {
        // 2^20 macroblocks wide.
        let unit = Build.h264SPS(widthInMbs: 1 << 20)
        #expect(throws: BitstreamError.self) { try H264SequenceParameterSet(payload: unit.dropFirst()) }
        let tall = Build.h264SPS(widthInMbs: 1000, heightInMapUnits: 1000)
        #expect(throws: BitstreamError.self) { try H264SequenceParameterSet(payload: tall.dropFirst()) }
        let overCropped = Build.h264SPS(widthInMbs: 2, crop: (8, 8, 0, 0))
        #expect(throws: BitstreamError.self) { try H264SequenceParameterSet(payload: overCropped.dropFirst()) }
    }

    @Test func rejectsTruncatedSPSAtEveryLength() {
        let full = Build.h264SPS(profile: 100, crop: (0, 0, 0, 4), timing: (1, 50))
        for length in 1..<(full.count - 1) {
            #expect(throws: BitstreamError.self, "length \(length)") {
                try H264SequenceParameterSet(payload: full[1..<length])
            }
        }
    }
}
