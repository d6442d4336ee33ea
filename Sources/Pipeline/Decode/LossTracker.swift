import Bitstream

/// Which pictures are damaged by data lost on the way in (RTP gaps, lost datagrams, a new
/// source that started mid-GOP): from the loss until a picture that is whole again and refers to nothing before
/// it. Only such a picture ends the damage:
/// - an IDR or BLA picture that begins at or after the loss with its picture's first slice (a keyframe missing its
///   first slices is itself damaged);
/// - a CRA picture the same way, except that its RASL pictures refer to pictures before it and stay damaged;
/// - a recovery point SEI picture, `recovery_frame_cnt` reference pictures later (intra refresh: the picture is
///   being rebuilt until then).
/// Pure: the decode thread feeds it losses and access units in decoding order.
struct LossTracker: Sendable, Equatable {
    /// Pictures decoded now are damaged.
    private(set) var damaged = false
    /// Where (splitter or depacketizer offset) data was last lost.
    private var offset: Int64 = -1
    /// Reference pictures still to come before a recovery point's picture is whole.
    private var recoveryCountdown: Int?
    /// A CRA ended the damage; its RASL pictures did not escape it.
    private var raslDamaged = false
    /// No picture seen since `startAfresh`: the stream may well begin with a whole one.
    private var beforeFirstPicture = false
    /// Data was lost somewhere from `offset` on, and where the gap ends is not known yet: nothing heals.
    private var windowOpen = false

    /// Worth asking the sender for a keyframe: damaged by a loss, or a stream that began with a picture that
    /// refers to what it never sent.
    var needsKeyframe: Bool { damaged && !beforeFirstPicture }

    /// Data was lost just before stream offset `offset`.
    mutating func noteLoss(at offset: Int64) {
        damaged = true
        beforeFirstPicture = false
        self.offset = max(self.offset, offset)
        recoveryCountdown = nil
    }

    /// Data was lost somewhere after stream offset `offset`, at a place known only later (`closeLossWindow`).
    mutating func openLossWindow(at offset: Int64) {
        noteLoss(at: offset)
        windowOpen = true
    }

    /// The gap of the open window lies before stream offset `offset`.
    mutating func closeLossWindow(at offset: Int64) {
        guard windowOpen else { return }
        windowOpen = false
        self.offset = max(self.offset, offset)
    }

    /// A new byte stream whose first pictures may refer to what it never sent (a new connection or RTP source
    /// joining mid-GOP): damaged until its first whole random-access point.
    mutating func startAfresh() {
        self = LossTracker()
        damaged = true
        offset = 0
        beforeFirstPicture = true
    }

    /// Whether the picture of `unit` is damaged; ends the damage where `unit` allows.
    mutating func isDamaged(_ unit: AccessUnit) -> Bool {
        if unit.hasPicture { beforeFirstPicture = false }
        let whole = !windowOpen && unit.streamOffset >= offset && (offset < 0 || unit.beginsWithFirstSlice)
        switch unit.randomAccess {
        case .idr, .bla:
            raslDamaged = false
            if whole { heal() }
        case .cra:
            raslDamaged = damaged && whole
            if whole { heal() }
        case .recoveryPoint:
            if damaged && whole && recoveryCountdown == nil { recoveryCountdown = max(0, unit.recoveryFrameCount ?? 0) }
        case nil:
            break
        }
        if let countdown = recoveryCountdown {
            if countdown == 0 {
                heal()
            } else if unit.isReference {
                recoveryCountdown = countdown - 1
            }
        }
        let rasl = unit.codec == .h265 && unit.nalUnitTypes.contains { $0 == 8 || $0 == 9 }
        return damaged || (raslDamaged && rasl)
    }

    private mutating func heal() {
        damaged = false
        recoveryCountdown = nil
    }
}
