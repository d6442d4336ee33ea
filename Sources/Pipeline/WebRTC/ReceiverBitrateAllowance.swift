/// What a sender that follows only REMB (draft-alvestrand-rmcat-remb-03; no transport-cc) is told it may send,
/// once a second. It never caps a clean link for long: the allowance grows by half each second the sender uses
/// more than half of it, and does not shrink while the sender sends less (a still screen sends little, and the
/// next scroll needs the room at once). Losses that NACK could not repair bring it down to 85 % of what arrived.
/// Sans-IO: what arrived and the losses are inputs.
struct ReceiverBitrateAllowance {
    /// Where a session starts: above the 2.5 Mbit/s Chromium's encoder allows itself for a 1080p screen.
    static let initial: UInt64 = 4_000_000
    static let floor: UInt64 = 300_000
    /// The ceiling without `max_bitrate`.
    static let defaultCeiling: UInt64 = 50_000_000

    let ceiling: UInt64
    private(set) var current: UInt64

    init(ceiling: UInt64?) {
        self.ceiling = max(ceiling ?? Self.defaultCeiling, Self.floor)
        current = min(Self.initial, self.ceiling)
    }

    /// The next allowance, from the bits per second that arrived since the last and whether packets were lost
    /// beyond repair meanwhile.
    mutating func update(receivedBitrate: UInt64, unrecoveredLosses: Bool) -> UInt64 {
        if unrecoveredLosses {
            current = max(receivedBitrate / 100 * 85, Self.floor)
        } else if receivedBitrate >= current / 2 {
            current = max(current, receivedBitrate) / 2 * 3
        }
        current = min(current, ceiling)
        return current
    }
}
