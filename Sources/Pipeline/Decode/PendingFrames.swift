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
}

/// The access units given to the decoder whose frames have not come out yet, by the pts each was given. The
/// decoder reorders frames and drops undecodable ones, so an entry may never be taken: old ones are forgotten.
struct PendingFrames {
    /// Entries more than this many pts behind the newest are forgotten, once there are twice as many.
    static let horizon: Int64 = 256
    private var frames: [Int64: PendingFrame] = [:]
    /// The pts the next access unit gets (decoder input order).
    private(set) var nextPTS: Int64 = 0

    var count: Int { frames.count }

    /// Keeps `frame` under a new pts, which it returns.
    mutating func add(_ frame: PendingFrame) -> Int64 {
        let pts = nextPTS
        nextPTS += 1
        frames[pts] = frame
        if frames.count > 2 * Int(Self.horizon) {
            for key in frames.keys where key < pts - Self.horizon { frames.removeValue(forKey: key) }
        }
        return pts
    }

    /// The entry of a frame that came out of the decoder; nil if there is none (forgotten, or never kept).
    mutating func take(_ pts: Int64) -> PendingFrame? { frames.removeValue(forKey: pts) }

    /// More of the access unit reached the decoder at `time` (a picture decoded in parts).
    mutating func completed(_ pts: Int64, at time: UInt64) { frames[pts]?.timeComplete = time }

    /// The decoder was drained: nothing more will come out for these.
    mutating func removeAll() { frames.removeAll(keepingCapacity: true) }
}
