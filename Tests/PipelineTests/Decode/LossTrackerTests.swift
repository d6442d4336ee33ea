import Bitstream
@testable import Pipeline
import Testing

@Suite struct LossTrackerTests {
    func unit(at offset: Int64, _ access: RandomAccessKind? = nil, firstSlice: Bool = true, reference: Bool = true,
              recovery: Int? = nil, codec: VideoCodec = .h264, types: [UInt8] = [1]) -> AccessUnit {
        AccessUnit(codec: codec, data: [], nalUnitTypes: types, streamOffset: offset, sliceCount: 1, randomAccess: access,
                   ppsId: 0, format: nil, parameterSets: nil, displayOrientation: nil, end: .explicit,
                   beginsWithFirstSlice: firstSlice, isReference: reference, recoveryFrameCount: recovery)
    }

    func check(_ tracker: inout LossTracker, _ unit: AccessUnit, damaged: Bool, _ comment: Comment? = nil,
               sourceLocation: SourceLocation = #_sourceLocation) {
        let result = tracker.isDamaged(unit)
        #expect(result == damaged, comment, sourceLocation: sourceLocation)
    }

    @Test func aWholeKeyframeAfterTheLossEndsTheDamage() {
        var tracker = LossTracker()
        check(&tracker, unit(at: 0), damaged: false)
        tracker.noteLoss(at: 1000)
        check(&tracker, unit(at: 900), damaged: true, "the picture the loss fell in")
        check(&tracker, unit(at: 950, .idr), damaged: true, "a keyframe that began before the loss lost part of itself")
        check(&tracker, unit(at: 1000, .idr, firstSlice: false), damaged: true, "a keyframe missing its first slice")
        check(&tracker, unit(at: 1000, .idr), damaged: false)
        check(&tracker, unit(at: 2000), damaged: false)
    }

    @Test func aNewStreamIsDamagedUntilItsFirstWholeKeyframe() {
        var tracker = LossTracker()
        tracker.startAfresh()
        #expect(!tracker.needsKeyframe, "nothing asked before the first picture")
        check(&tracker, unit(at: 0), damaged: true, "a stream joined mid-GOP")
        #expect(tracker.needsKeyframe)
        check(&tracker, unit(at: 500, .idr), damaged: false)
    }

    @Test func aCRAHealsButItsRASLPicturesStayDamaged() {
        var tracker = LossTracker()
        tracker.noteLoss(at: 10)
        check(&tracker, unit(at: 100, .cra, codec: .h265, types: [21]), damaged: false)
        check(&tracker, unit(at: 200, codec: .h265, types: [8]), damaged: true, "RASL refers to what the loss damaged")
        check(&tracker, unit(at: 300, codec: .h265, types: [1]), damaged: false, "trailing pictures are whole")
        check(&tracker, unit(at: 400, .idr, codec: .h265, types: [19]), damaged: false)
        check(&tracker, unit(at: 500, codec: .h265, types: [8]), damaged: false, "no loss before this IRAP")
    }

    /// A kernel drop is seen before the place of its gap is known: nothing heals until the window closes.
    @Test func nothingHealsWhileALossWindowIsOpen() {
        var tracker = LossTracker()
        tracker.openLossWindow(at: 100)
        check(&tracker, unit(at: 200, .idr), damaged: true, "the gap may still be ahead of this keyframe")
        tracker.closeLossWindow(at: 300)
        check(&tracker, unit(at: 250, .idr), damaged: true, "began before the window closed")
        check(&tracker, unit(at: 300, .idr), damaged: false)
    }

    /// Intra refresh: the picture with the recovery point SEI is whole only `recovery_frame_cnt` reference
    /// pictures later; non-reference pictures do not count.
    @Test func aRecoveryPointHealsAfterItsCount() {
        var tracker = LossTracker()
        tracker.noteLoss(at: 10)
        // frame_num: f (the SEI picture), f+1 (non-reference), f+1, f+2: the fourth is the first whole picture.
        check(&tracker, unit(at: 100, .recoveryPoint, recovery: 2), damaged: true)
        check(&tracker, unit(at: 200, reference: false), damaged: true)
        check(&tracker, unit(at: 300), damaged: true)
        check(&tracker, unit(at: 400), damaged: false, "recovery_frame_cnt reference pictures after the recovery point")
        tracker.noteLoss(at: 600)
        check(&tracker, unit(at: 700, .recoveryPoint, recovery: 0), damaged: false, "a count of 0: whole at once")
    }
}
