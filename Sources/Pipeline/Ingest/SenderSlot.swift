import NIOConcurrencyHelpers
import NIOCore
import SharedFrames

/// The stream's current sender and the `second_sender` decision against it: the one record of "who sends now"
/// that every listener keeps (TCP connections, datagram sources, SRT callers, WebRTC sessions). A value: each
/// listener keeps it where its own confinement is (a lock, its event loop, its thread). `Sender` is what that
/// listener needs to reach or end the sender: a channel, an address, a socket, a session's id.
struct SenderSlot<Sender> {
    struct Occupant {
        let id: ConnectionID
        let sender: Sender
        let admittedAt: UInt64
        /// Where its hold counts from until its first video: its admission, or, when it came straight after senders
        /// that delivered none, the first of those one's. A stranger that keeps replacing itself (a new connection
        /// every 2 s, a new UDP port every datagram) would otherwise get a fresh hold each time and keep the real
        /// sender out.
        let silentSince: UInt64
    }

    enum Admission {
        /// The new sender holds the stream as `id`. `replacing`: the sender it took over from, for the caller to
        /// end; `staleFor`: how long that one had delivered no video, when that is why (nil: second_sender =
        /// takeover).
        case admitted(id: ConnectionID, replacing: Occupant?, staleFor: UInt64?)
        /// `current` holds the stream and keeps it.
        case refused(current: Occupant)
    }

    let policy: AdmissionPolicy
    /// What the decode thread reports of each sender's video: a sender's quietness is read from it.
    let activity: SenderActivity
    private(set) var occupant: Occupant?
    private var nextID: ConnectionID = 1
    /// The last sender, when it left without having delivered video: a newcomer within the hold of its leaving
    /// carries on its silence (a stranger that closes before it reconnects).
    private var silentLeaver: (silentSince: UInt64, leftAt: UInt64)?

    init(policy: AdmissionPolicy, activity: SenderActivity) {
        self.policy = policy
        self.activity = activity
    }

    /// Nanoseconds `id` has delivered no video (since its admission if it never did); nil once it is not the sender.
    /// What `idle_timeout` is measured by: a sender's own silence.
    func quiet(of id: ConnectionID, now: UInt64) -> UInt64? {
        guard let occupant, occupant.id == id else { return nil }
        return quiet(occupant, now: now)
    }

    private func quiet(_ occupant: Occupant, now: UInt64) -> UInt64 {
        SenderDeadlines.quiet(admittedAt: occupant.admittedAt, lastProgress: activity.lastProgress(of: occupant.id), now: now)
    }

    /// What the hold is measured by: the same, but counted from `silentSince`; 0 in a sender's first
    /// `newcomerGrace`, so that its first video can be counted (the decode thread's lag) before anyone else may
    /// take its place: without it, a real sender and a stranger that sprays from new ports took turns.
    private func unheldFor(_ occupant: Occupant, now: UInt64) -> UInt64 {
        guard now &- occupant.admittedAt >= Self.newcomerGrace else { return 0 }
        return SenderDeadlines.quiet(admittedAt: occupant.silentSince, lastProgress: activity.lastProgress(of: occupant.id), now: now)
    }

    static var newcomerGrace: UInt64 { 250_000_000 }

    /// What the policy would answer a new sender now; nothing changes.
    func decision(now: UInt64) -> AdmissionPolicy.Decision {
        policy.decide(currentQuietFor: occupant.map { unheldFor($0, now: now) })
    }

    /// Decides for a new sender, and seats it unless refused.
    mutating func admit(_ sender: Sender, now: UInt64) -> Admission {
        switch (decision(now: now), occupant) {
        case (.refuse, let current?):
            return .refused(current: current)
        case (.takeOver(let staleFor), let current?):
            return seat(sender, now: now, replacing: current, staleFor: staleFor)
        default:
            return seat(sender, now: now, replacing: nil, staleFor: nil)
        }
    }

    private mutating func seat(_ sender: Sender, now: UInt64, replacing: Occupant?, staleFor: UInt64?) -> Admission {
        let id = nextID
        nextID += 1
        var silentSince = now
        if let replacing {
            if activity.lastProgress(of: replacing.id) == nil { silentSince = replacing.silentSince }
        } else if let leaver = silentLeaver, now &- leaver.leftAt <= policy.deadlines.hold {
            silentSince = leaver.silentSince
        }
        silentLeaver = nil
        occupant = Occupant(id: id, sender: sender, admittedAt: now, silentSince: min(silentSince, now))
        return .admitted(id: id, replacing: replacing, staleFor: staleFor)
    }

    /// The sender, when it has delivered no video for longer than `idle_timeout` (never with 0), and for how long.
    func idle(now: UInt64) -> (occupant: Occupant, quiet: UInt64)? {
        let timeout = policy.deadlines.idleTimeout
        guard timeout > 0, let occupant, case let quiet = quiet(occupant, now: now), quiet > timeout else { return nil }
        return (occupant, quiet)
    }

    /// `id` stops being the sender at `now`: the occupant it was, or nil when it no longer was (taken over, or
    /// released).
    @discardableResult
    mutating func release(_ id: ConnectionID, now: UInt64) -> Occupant? {
        guard let current = occupant, current.id == id else { return nil }
        occupant = nil
        silentLeaver = activity.lastProgress(of: id) == nil ? (current.silentSince, now) : nil
        return current
    }
}

extension SenderSlot: Sendable where Sender: Sendable {}
extension SenderSlot.Occupant: Sendable where Sender: Sendable {}
extension SenderSlot.Admission: Sendable where Sender: Sendable {}

/// A TCP stream's sender slot, shared by the accepting loop and each connection's loop. An admitted sender holds
/// the stream until its channel closes (not merely until it is active: a second connection can arrive before the
/// first one's channel becomes active).
final class SenderRegistry: Sendable {
    private let slot: NIOLockedValueBox<SenderSlot<Channel>>
    let deadlines: SenderDeadlines

    init(policy: AdmissionPolicy, activity: SenderActivity) {
        slot = NIOLockedValueBox(SenderSlot(policy: policy, activity: activity))
        deadlines = policy.deadlines
    }

    /// Decides for a new connection. A refusal's `current` may already be gone without its channel knowing yet: a
    /// sender that closed and reconnected at once is accepted before its old connection's end has been read.
    func admit(_ channel: Channel, now: UInt64) -> SenderSlot<Channel>.Admission {
        let admission = slot.withLockedValue { $0.admit(channel, now: now) }
        if case .admitted(let id, _, _) = admission {
            channel.closeFuture.whenComplete { [self] _ in release(id) }
        }
        return admission
    }

    /// Nanoseconds the sender `id` has gone without delivering video; nil once it is no longer the sender.
    func quiet(_ id: ConnectionID, now: UInt64) -> UInt64? {
        slot.withLockedValue { $0.quiet(of: id, now: now) }
    }

    /// True while `id` is the sender: false once it was released or taken over.
    func holds(_ id: ConnectionID) -> Bool {
        slot.withLockedValue { $0.occupant?.id == id }
    }

    func release(_ id: ConnectionID) {
        let now = MonotonicClock.nanoseconds()
        slot.withLockedValue { _ = $0.release(id, now: now) }
    }

    func closeActive() {
        slot.withLockedValue { $0.occupant?.sender }?.close(promise: nil)
    }
}
