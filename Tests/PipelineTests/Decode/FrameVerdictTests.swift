@testable import Pipeline
import SharedFrames
import Testing

/// The rules that decide whether a frame is published and whether it is flagged corrupt, without a decoder: the
/// daemon must never hand out a damaged frame unflagged (docs/reliability.md).
@Suite struct FrameVerdictTests {
    static func pending(afterLoss: Bool = false, keyframe: Bool = false, errorsBeforeParts: Int? = nil,
                        damagedInDecoder: Bool = false) -> PendingFrame {
        PendingFrame(timeFirstByte: 1, timeComplete: 2, keyframe: keyframe, afterLoss: afterLoss,
                     errorsBeforeParts: errorsBeforeParts, damagedInDecoder: damagedInDecoder)
    }

    static func verdict(_ pending: PendingFrame?, keyframe: Bool = false, corrupt: Bool = false, pts: Int64 = 7, errors: Int = 0,
                        decoding: FrameVerdict.DecodeCall? = nil, rowsMissing: Bool = false, policy: LossPolicy = .conceal) -> FrameVerdict {
        FrameVerdict(.init(pending: pending, markedKeyframe: keyframe, markedCorrupt: corrupt, pts: pts, loggedErrors: errors,
                           decoding: decoding, rowsMissing: rowsMissing), lossPolicy: policy)
    }

    @Test func aCleanFrameIsPublishedUnflaggedAndItsKeyframeMarkComesFromItsAccessUnit() {
        #expect(Self.verdict(Self.pending()) == FrameVerdict(decision: .publish([])))
        #expect(Self.verdict(Self.pending(keyframe: true)) == FrameVerdict(decision: .publish(.keyframe)))
        // The access unit's own analysis wins over libavcodec's mark; without it, the mark is all there is.
        #expect(Self.verdict(Self.pending(keyframe: false), keyframe: true) == FrameVerdict(decision: .publish([])))
        #expect(Self.verdict(nil, keyframe: true) == FrameVerdict(decision: .publish(.keyframe)))
    }

    @Test func afterLostDataTheLossPolicyDecides() {
        let afterLoss = Self.pending(afterLoss: true, keyframe: true)
        #expect(Self.verdict(afterLoss, policy: .conceal) == FrameVerdict(decision: .publish([.corrupt, .keyframe])))
        #expect(Self.verdict(afterLoss, policy: .keyframe) == FrameVerdict(decision: .withhold))
        // Withheld, it changes nothing else, whatever libavcodec found.
        #expect(Self.verdict(afterLoss, corrupt: true, errors: 9, policy: .keyframe) == FrameVerdict(decision: .withhold))
    }

    @Test func errorsLoggedWhileItsAccessUnitWasDecodedFlagIt() {
        // Now: libavcodec logged errors during the decode call that put this very frame out.
        #expect(Self.verdict(Self.pending(), pts: 7, errors: 3, decoding: .init(pts: 7, errorsBefore: 2)) == FrameVerdict(decision: .publish(.corrupt)))
        // Another access unit's errors, or none during this one, do not.
        #expect(Self.verdict(Self.pending(), pts: 7, errors: 3, decoding: .init(pts: 8, errorsBefore: 2)) == FrameVerdict(decision: .publish([])))
        #expect(Self.verdict(Self.pending(), pts: 7, errors: 3, decoding: .init(pts: 7, errorsBefore: 3)) == FrameVerdict(decision: .publish([])))
        // Earlier: marked when it was decoded, out only now (reordered).
        #expect(Self.verdict(Self.pending(damagedInDecoder: true)) == FrameVerdict(decision: .publish(.corrupt)))
    }

    @Test func aFrameLibavcodecMarkedCorruptSuspendsDecodingInParts() {
        #expect(Self.verdict(Self.pending(), corrupt: true) == FrameVerdict(decision: .publish(.corrupt), suspendsParts: true))
        #expect(Self.verdict(nil, corrupt: true) == FrameVerdict(decision: .publish(.corrupt), suspendsParts: true))
    }

    /// Decoded in parts, concealment is off: a damaged slice shows only as more errors logged since its first part,
    /// and the pictures after it differ from FFmpeg's, so they count as after a loss.
    @Test func aPictureDecodedInPartsIsDamagedByErrorsSinceItsFirstPart() {
        let parts = Self.pending(errorsBeforeParts: 3)
        #expect(Self.verdict(parts, errors: 3) == FrameVerdict(decision: .publish([])))
        #expect(Self.verdict(parts, errors: 4)
            == FrameVerdict(decision: .publish(.corrupt), suspendsParts: true, damagesLaterPictures: true))
        #expect(Self.verdict(parts, corrupt: true, errors: 3)
            == FrameVerdict(decision: .publish(.corrupt), suspendsParts: true, damagesLaterPictures: true))
        // A slice that never came: no error logged, but macroblock rows skipped.
        #expect(Self.verdict(parts, errors: 3, rowsMissing: true)
            == FrameVerdict(decision: .publish(.corrupt), suspendsParts: true, damagesLaterPictures: true))
        // Rows matter only for a picture decoded in parts.
        #expect(Self.verdict(Self.pending(), rowsMissing: true) == FrameVerdict(decision: .publish([])))
    }
}
