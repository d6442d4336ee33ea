/// RTP with `keyframe_request`: whether the decoder wants a keyframe after a loss. The stream's RTP receiver, on the
/// network side, asks the sender and asks again every `keyframe_request_interval`; it is told only when this
/// changes, so the decode thread sends nothing per packet.
struct KeyframeWish {
    /// False where `keyframe_request = "none"`.
    let enabled: Bool
    /// The source the receiver was last told a keyframe is wanted of.
    private(set) var told: UInt32?

    init(enabled: Bool) {
        self.enabled = enabled
    }

    /// The decoder needs a keyframe of `source`: true when the receiver must be told (it was not, or of another).
    mutating func want(_ source: UInt32) -> Bool {
        guard enabled, told != source else { return false }
        told = source
        return true
    }

    /// The stream healed: true when the receiver must be told to stop asking.
    mutating func healed() -> Bool {
        guard told != nil else { return false }
        told = nil
        return true
    }

    /// A new sender (connection, session): its receiver is new and has been told nothing.
    mutating func forget() { told = nil }
}
