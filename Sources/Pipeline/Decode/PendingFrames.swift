import Bitstream

/// Metadata of an access unit kept until its frame comes out of the decoder (matched by pts).
struct PendingFrame: Equatable {
    var timeFirstByte: UInt64
    var timeComplete: UInt64
    var keyframe: Bool
    var orientation: DisplayOrientation?
    var format: SequenceFormat?
    /// Data was lost before it: it follows `loss_policy`.
    var afterLoss: Bool
    /// rtp://: the access unit's RTP timestamp, unwrapped.
    var mediaTimestamp: Int64?
    /// Its slices were decoded as they arrived (DecodeSession+Parts.swift), with concealment off: then the errors
    /// libavcodec had logged for the stream before its first slice (more when it comes out: damaged).
    var errorsBeforeParts: Int?
    /// libavcodec logged errors while decoding it (a whole access unit): the picture is damaged.
    var damagedInDecoder = false
}

/// The access units given to the decoder whose frames have not come out yet, by the pts each was given (their
/// decoding order). The decoder reorders frames and drops undecodable ones, so an entry may never be taken: once a
/// frame `reorderLimit` access units later has come out, or the decoder was drained, it never will, and it is
/// counted in `abandoned` (the frames that could not be output).
struct PendingFrames {
    /// Entries more than this many pts behind the newest are forgotten, once there are twice as many.
    static let horizon: Int64 = 256
    /// No decoder outputs a frame this many access units after a later one: H.264 and H.265 reorder at most 16
    /// frames, and frame threads add their count (at most 16 here) of delay, not reordering.
    static let reorderLimit: Int64 = 34
    private var frames: [Int64: PendingFrame] = [:]
    /// The pts the next access unit gets (decoder input order).
    private(set) var nextPTS: Int64 = 0
    /// Entries that were dropped without their frame coming out, since the last `takeAbandoned`.
    private var abandoned = 0

    var count: Int { frames.count }

    /// Keeps `frame` under a new pts, which it returns.
    mutating func add(_ frame: PendingFrame) -> Int64 {
        let pts = nextPTS
        nextPTS += 1
        frames[pts] = frame
        if frames.count > 2 * Int(Self.horizon) { abandon(before: pts - Self.horizon) }
        return pts
    }

    /// The entry of a frame that came out of the decoder; nil if there is none (forgotten, or never kept). Entries
    /// `reorderLimit` or more access units before it will not come out any more.
    mutating func take(_ pts: Int64) -> PendingFrame? {
        let frame = frames.removeValue(forKey: pts)
        if frame != nil { abandon(before: pts - Self.reorderLimit) }
        return frame
    }

    /// The access unit `pts` was found damaged while it was decoded (libavcodec logged errors for it).
    mutating func markDamaged(_ pts: Int64) { frames[pts]?.damagedInDecoder = true }

    /// How many entries were dropped without their frame coming out since the last call.
    mutating func takeAbandoned() -> Int {
        defer { abandoned = 0 }
        return abandoned
    }

    private mutating func abandon(before limit: Int64) {
        for key in frames.keys where key < limit {
            frames.removeValue(forKey: key)
            abandoned += 1
        }
    }

    /// More of the access unit reached the decoder at `time` (a picture decoded in parts).
    mutating func completed(_ pts: Int64, at time: UInt64) { frames[pts]?.timeComplete = time }

    /// The decoder was drained: nothing more will come out for these.
    mutating func removeAll() {
        abandoned += frames.count
        frames.removeAll(keepingCapacity: true)
    }
}
