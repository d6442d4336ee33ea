import Bitstream
@testable import Pipeline
import Testing

/// H.264 reference pictures that never arrived (a frame_num gap after a loss) are counted.
@Suite struct MissingReferencesTests {
    static func unit(frameNum: Int, reference: Bool = true, idr: Bool = false) -> AccessUnit {
        AccessUnit(codec: .h264, data: [], nalUnitTypes: [idr ? 5 : 1], streamOffset: 0, sliceCount: 1,
                   randomAccess: idr ? .idr : nil, ppsId: 0, format: nil, parameterSets: nil, displayOrientation: nil,
                   end: .nextAccessUnit, beginsWithFirstSlice: true, isReference: reference, frameNum: (frameNum, 16))
    }

    @Test func aFrameNumGapAfterALossCountsTheMissingReferencesOnce() {
        var missing = MissingReferences()
        #expect(missing.missing(before: Self.unit(frameNum: 0, idr: true), afterLoss: false) == 0)
        #expect(missing.missing(before: Self.unit(frameNum: 1), afterLoss: false) == 0)
        // frame_num 2 and 3 never came; a non-reference picture after them, then another.
        #expect(missing.missing(before: Self.unit(frameNum: 4, reference: false), afterLoss: true) == 2)
        #expect(missing.missing(before: Self.unit(frameNum: 4, reference: false), afterLoss: true) == 0)
        #expect(missing.missing(before: Self.unit(frameNum: 4), afterLoss: true) == 0)
        // A picture that arrived without its slices is part of the next gap, counted once.
        missing.lostPicture()
        #expect(missing.missing(before: Self.unit(frameNum: 6), afterLoss: true) == 0)
        // Wrapping around MaxFrameNum (16).
        for value in 7..<16 { _ = missing.missing(before: Self.unit(frameNum: value), afterLoss: true) }
        #expect(missing.missing(before: Self.unit(frameNum: 1), afterLoss: true) == 1)
        // Without a loss, a gap is the stream's own (gaps_in_frame_num allowed): not counted.
        #expect(missing.missing(before: Self.unit(frameNum: 5), afterLoss: false) == 0)
        // A step back (6 after 5 is none missing; then 3): not 13 missing pictures.
        #expect(missing.missing(before: Self.unit(frameNum: 6), afterLoss: true) == 0)
        #expect(missing.missing(before: Self.unit(frameNum: 3), afterLoss: true) == 0)
    }
}
