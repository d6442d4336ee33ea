/// RTP with `keyframe_request`: whether the decoder wants a keyframe after a loss. The stream's RTP receiver, on the
/// network side, asks the sender and asks again every `keyframe_request_interval`; it is told only when this
/// changes, so the decode thread sends nothing per packet.
struct KeyframeWish {
    /// What the receiver is told.
    enum Signal: Sendable, Equatable {
        /// A keyframe of this source is wanted.
        case wanted(UInt32)
        /// It came: the next loss is asked for at once.
        case arrived
        /// Moot (the source or sender changed): no more requests, the next still paced from the last.
        case dropped
    }

    /// False where `keyframe_request = "none"`.
    let enabled: Bool
    /// The source the receiver was last told a keyframe is wanted of.
    private(set) var told: UInt32?

    init(enabled: Bool) {
        self.enabled = enabled
    }

    /// The decoder needs a keyframe of `source`: `tell` is called when the receiver does not know it yet, and
    /// returns whether anything listened (if not, it is told at the next call).
    mutating func want(_ source: UInt32, telling tell: (UInt32) -> Bool) {
        guard enabled, told != source, tell(source) else { return }
        told = source
    }

    /// The stream healed, or what was wanted is moot (the source or sender changed): `tell` is called when the
    /// receiver must stop asking. Left asking, it would ask a new source for a keyframe of one gone, for ever.
    mutating func settle(telling tell: () -> Void) {
        guard told != nil else { return }
        told = nil
        tell()
    }
}
