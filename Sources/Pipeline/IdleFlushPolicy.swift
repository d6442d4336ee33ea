/// How long a byte-stream transport (tcp://, udp://) must stay quiet after a complete-looking NAL unit before the
/// access unit in progress is closed (shared/DESIGN.md "Latency"). Annex B has no end-of-unit marker: without
/// this the last NAL unit of a frame waits for the next frame's start code, a whole frame interval.
///
/// The interval adapts to the sender's path. It is three times the largest gap seen lately *inside* a NAL unit
/// (bytes that continued a complete-looking unit before the interval ran out), never below `minimum` nor above
/// `maximum`. Such gaps decay by 1/32 with every access unit, so a burst of jitter is forgotten within a few
/// seconds of frames. A flush that proves premature (its unit went on) sets a floor from the gap that caught it
/// out, which decays 8 times slower: a sender that stalls mid-frame only now and then (a keyframe every two
/// seconds over Wi-Fi) is not caught out at every keyframe. Both decay per access unit, not per flush: an
/// interval that has grown past the frame interval (so that nothing is flushed) still comes back down.
/// Pure arithmetic on nanosecond durations; the decode thread owns it.
struct IdleFlushPolicy: Sendable, Equatable {
    /// Past this, waiting for the next frame's first NAL unit closes the access unit about as soon.
    static let maximum: UInt64 = 50_000_000
    /// Where an unknown sender starts: loopback and LAN gaps are a few microseconds, so this shrinks to
    /// `minimum` within the first few seconds of frames.
    static let initialGap: UInt64 = 1_000_000

    let minimum: UInt64
    /// Decaying maximum of the gaps seen inside NAL units.
    private(set) var recentGap: UInt64
    /// Decaying maximum of the gaps that made a flush premature.
    private(set) var prematureFloor: UInt64 = 0
    private(set) var interval: UInt64
    private(set) var premature = 0
    private(set) var right = 0

    init(minimum: UInt64) {
        precondition(minimum > 0 && minimum <= Self.maximum, "minimum must be in 1...maximum nanoseconds")
        self.minimum = minimum
        recentGap = Self.initialGap
        interval = 0
        update()
    }

    /// Bytes that continued a complete-looking NAL unit arrived `gap` after the previous ones, with no flush.
    mutating func continued(afterGap gap: UInt64) {
        guard gap > recentGap else { return }
        recentGap = gap
        update()
    }

    /// The bytes after a flush began a new NAL unit.
    mutating func flushWasRight() {
        right += 1
    }

    /// An access unit was closed, by a flush or by the next one's first NAL unit: time to forget a little.
    mutating func accessUnitCompleted() {
        recentGap -= recentGap >> 5
        prematureFloor -= prematureFloor >> 8
        update()
    }

    /// The bytes after a flush continued the flushed unit, `gap` after the bytes before it.
    mutating func flushWasPremature(gap: UInt64) {
        premature += 1
        prematureFloor = max(prematureFloor, gap, interval)
        recentGap = max(recentGap, gap)
        update()
    }

    private mutating func update() {
        let gap = max(recentGap, prematureFloor)
        let scaled = gap > Self.maximum ? Self.maximum : gap * 3
        interval = min(Self.maximum, max(minimum, scaled))
    }
}
