@testable import Decoding
import Testing

/// What a hardware decoder's fallback replays: the access units since the last random-access point, bounded in
/// bytes, and the pts already handed out, withheld only during the replay.
@Suite struct GroupOfPicturesRecordTests {
    static func unit(_ pts: Int64, bytes: Int = 10, keyframe: Bool = false) -> DecoderInput {
        DecoderInput(codec: .h264, data: [UInt8](repeating: UInt8(truncatingIfNeeded: pts), count: bytes), pts: pts,
                     isRandomAccess: keyframe, parameterSets: nil, reorderDepth: nil)
    }

    @Test func keepsEveryAccessUnitFromTheLastKeyframeOn() {
        var record = GroupOfPicturesRecord(maximumBytes: 1000)
        for pts: Int64 in 0..<3 { record.remember(Self.unit(pts, keyframe: pts == 0), keeping: true) }
        #expect(record.isComplete && record.holdsInputs)
        #expect(record.inputs.map(\.pts) == [0, 1, 2])
        // The next keyframe starts a new group: the old one can no longer be needed.
        for pts: Int64 in 3..<5 { record.remember(Self.unit(pts, keyframe: pts == 3), keeping: true) }
        #expect(record.inputs.map(\.pts) == [3, 4])
        #expect(record.inputs.map(\.data) == [Self.unit(3).data, Self.unit(4).data], "the bytes kept are the unit's own")
    }

    /// Joined mid-GOP: a replay from there could not be decoded, so nothing is kept until a keyframe.
    @Test func nothingIsKeptBeforeTheFirstKeyframe() {
        var record = GroupOfPicturesRecord(maximumBytes: 1000)
        record.remember(Self.unit(0), keeping: true)
        record.remember(Self.unit(1), keeping: true)
        #expect(!record.isComplete && !record.holdsInputs)
        record.remember(Self.unit(2, keyframe: true), keeping: true)
        record.remember(Self.unit(3), keeping: true)
        #expect(record.isComplete && record.inputs.map(\.pts) == [2, 3])
    }

    /// Exactly `maximumBytes` fit; one byte more forgets the group, which stays incomplete until the next keyframe.
    @Test func aGroupOverTheByteBoundIsForgottenUntilTheNextKeyframe() {
        var record = GroupOfPicturesRecord(maximumBytes: 100)
        record.remember(Self.unit(0, bytes: 60, keyframe: true), keeping: true)
        record.remember(Self.unit(1, bytes: 40), keeping: true)
        #expect(record.isComplete && record.inputs.count == 2, "100 bytes: at the bound, not over it")
        record.noteHandedOut(pts: 0)
        record.remember(Self.unit(2, bytes: 1), keeping: true)
        #expect(!record.isComplete && !record.holdsInputs)
        record.isReplaying = true
        #expect(record.shouldHandOut(pts: 0), "the pts handed out were forgotten with the group")
        record.isReplaying = false
        // Small units after the overflow are not kept either: the group they belong to is already incomplete.
        record.remember(Self.unit(3, bytes: 1), keeping: true)
        #expect(!record.holdsInputs)
        record.remember(Self.unit(4, bytes: 90, keyframe: true), keeping: true)
        #expect(record.isComplete && record.inputs.map(\.pts) == [4])
    }

    /// A keyframe larger than the bound on its own cannot be replayed either.
    @Test func aKeyframeLargerThanTheBoundIsNotKept() {
        var record = GroupOfPicturesRecord(maximumBytes: 100)
        record.remember(Self.unit(0, bytes: 101, keyframe: true), keeping: true)
        #expect(!record.isComplete && !record.holdsInputs)
    }

    /// No fallback possible any more (software for good): everything is let go of, pts included.
    @Test func notKeepingForgetsEverything() {
        var record = GroupOfPicturesRecord(maximumBytes: 1000)
        record.remember(Self.unit(0, keyframe: true), keeping: true)
        record.noteHandedOut(pts: 0)
        record.remember(Self.unit(1), keeping: false)
        #expect(!record.isComplete && !record.holdsInputs)
        record.isReplaying = true
        #expect(record.shouldHandOut(pts: 0))
        // Later keyframes, still not keeping, are not kept.
        record.remember(Self.unit(2, keyframe: true), keeping: false)
        #expect(!record.holdsInputs)
    }

    /// Only the replay withholds frames, and only those handed out since the group's keyframe.
    @Test func theReplayWithholdsExactlyTheFramesHandedOutBefore() {
        var record = GroupOfPicturesRecord(maximumBytes: 1000)
        record.remember(Self.unit(0, keyframe: true), keeping: true)
        record.noteHandedOut(pts: 0)
        record.noteHandedOut(pts: 2)
        #expect(record.shouldHandOut(pts: 0) && record.shouldHandOut(pts: 1), "not replaying: everything goes out")
        record.isReplaying = true
        #expect(!record.shouldHandOut(pts: 0) && !record.shouldHandOut(pts: 2))
        #expect(record.shouldHandOut(pts: 1), "never handed out: the replay brings it")
        // A new keyframe starts afresh: the old group's pts are no longer withheld.
        record.remember(Self.unit(5, keyframe: true), keeping: true)
        #expect(record.shouldHandOut(pts: 0) && record.shouldHandOut(pts: 2))
    }

    /// On the software path (nothing kept) frames handed out are not recorded: the set would otherwise grow with
    /// every frame of the stream, for a replay that can never come.
    @Test func framesHandedOutAreNotRecordedWhileNoReplayIsPossible() {
        var record = GroupOfPicturesRecord(maximumBytes: 1000)
        for pts in 0..<100 {
            record.remember(Self.unit(Int64(pts), keyframe: pts % 10 == 0), keeping: false)
            record.noteHandedOut(pts: Int64(pts))
        }
        record.isReplaying = true
        #expect((0..<100).allSatisfy { record.shouldHandOut(pts: Int64($0)) })
    }
}
