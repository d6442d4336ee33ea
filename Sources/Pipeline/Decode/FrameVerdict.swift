import SharedFrames

/// What becomes of a frame out of the decoder: withheld, or published with which flags, and what its damage means
/// for the pictures after it. The stage between `StreamDecoder` and `FramePublisher`, pure: the session gathers
/// the facts (`FrameVerdict.Facts`), carries the verdict out, and nothing else decides whether a frame is marked
/// corrupt.
struct FrameVerdict: Equatable {
    enum Decision: Equatable {
        /// loss_policy = keyframe: a frame after lost data is not published (counted as withheld).
        case withhold
        case publish(FrameFlags)
    }

    /// The access unit being decoded right now (`DecodeSession.decode`), and the errors libavcodec had logged before it.
    struct DecodeCall: Equatable {
        var pts: Int64
        var errorsBefore: Int
    }

    /// What is known of one frame when it comes out of the decoder.
    struct Facts {
        /// The metadata its access unit left (nil: forgotten, or the frame was never asked for).
        var pending: PendingFrame?
        /// libavcodec's own marks on the frame.
        var markedKeyframe: Bool
        var markedCorrupt: Bool
        /// The frame's pts, and the errors libavcodec has logged for the stream so far.
        var pts: Int64
        var loggedErrors: Int
        /// Nil between decode calls (frames put out by a drain, or while a picture is decoded in parts).
        var decoding: DecodeCall?
        /// Decoded in parts, it skipped macroblock rows (`StreamDecoder.pictureMissesRows`): slices are missing.
        var rowsMissing = false
    }

    var decision: Decision
    /// libavcodec found the picture damaged: slices are decoded as whole access units (with FFmpeg's concealment)
    /// until a keyframe.
    var suspendsParts = false
    /// It was decoded in parts, where the damage is not concealed as FFmpeg conceals it: every picture that refers
    /// to it differs from FFmpeg's too, so they are flagged as after a loss until a keyframe heals the stream.
    var damagesLaterPictures = false
}

extension FrameVerdict {
    /// The rules, in order: lost data before it (the policy), then every sign of damage libavcodec gave.
    init(_ facts: Facts, lossPolicy: LossPolicy) {
        let pending = facts.pending
        if pending?.afterLoss == true && lossPolicy == .keyframe {
            self.init(decision: .withhold)
            return
        }
        var flags: FrameFlags = []
        if pending?.afterLoss == true { flags.insert(.corrupt) }
        if pending?.keyframe ?? facts.markedKeyframe { flags.insert(.keyframe) }
        // Decoded in parts, with concealment off, a damaged slice shows only in libavcodec's log.
        // So does a slice that never came, where libavcodec's rows show it.
        let damagedInParts = pending?.errorsBeforeParts.map { facts.loggedErrors > $0 || facts.rowsMissing } ?? false
        // A whole access unit: libavcodec logged errors while decoding it (now, or when it was decoded).
        let damagedNow = facts.decoding.map { $0.pts == facts.pts && facts.loggedErrors > $0.errorsBefore } ?? false
        if pending?.damagedInDecoder == true || damagedNow { flags.insert(.corrupt) }
        guard facts.markedCorrupt || damagedInParts else {
            self.init(decision: .publish(flags))
            return
        }
        flags.insert(.corrupt)
        self.init(decision: .publish(flags), suspendsParts: true, damagesLaterPictures: pending?.errorsBeforeParts != nil)
    }
}
