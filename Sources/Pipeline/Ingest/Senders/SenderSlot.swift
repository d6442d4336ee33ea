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
        /// The host it sends from (an IP address); nil when unknown.
        let origin: String?
        let admittedAt: UInt64
        /// When its host took the slot: its admission, or the first of the host's senders that replaced one
        /// another since (a stranger's new UDP port each datagram).
        let hostSince: UInt64
        /// Where its hold counts from until its first video: its admission, or, when its host is one of a run of
        /// senders that delivered none, that run's start. Without it a stranger that keeps replacing itself (a new
        /// connection every 2 s, a new UDP port every datagram) gets a fresh hold each time and keeps the real
        /// sender out.
        let silentSince: UInt64
    }

    /// Senders that followed one another, each within the hold of the last one's end, and delivered no video.
    struct SilentRun {
        /// Where the last one's hold counted from.
        var since: UInt64
        /// Their hosts, newest last; at most `maximumOrigins`.
        var origins: [String]
        var endedAt: UInt64

        static var maximumOrigins: Int { 16 }
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
    private(set) var silentRun: SilentRun?
    private var nextID: ConnectionID = 1

    init(policy: AdmissionPolicy, activity: SenderActivity) {
        self.policy = policy
        self.activity = activity
    }

    /// Nanoseconds `id` has delivered no video (since its admission if it never did); nil once it is not the sender.
    /// What `idle_timeout` is measured by: a sender's own silence.
    func quiet(of id: ConnectionID, now: UInt64) -> UInt64? {
        guard let occupant, occupant.id == id else { return nil }
        return quiet(occupant, since: occupant.admittedAt, now: now)
    }

    private func quiet(_ occupant: Occupant, since start: UInt64, now: UInt64) -> UInt64 {
        SenderDeadlines.quiet(admittedAt: start, lastProgress: activity.lastProgress(of: occupant.id), now: now)
    }

    /// What the policy would answer a new sender from `origin` now; nothing changes. The hold is measured from
    /// `silentSince`; a sender from another host waits out the current host's `tenure` besides.
    func decision(now: UInt64, from origin: String?) -> AdmissionPolicy.Decision {
        guard let occupant else { return policy.decide(currentQuietFor: nil) }
        let tenured = (origin == nil || origin != occupant.origin) && now &- occupant.hostSince < Self.tenure
        return policy.decide(currentQuietFor: tenured ? 0 : quiet(occupant, since: occupant.silentSince, now: now))
    }

    /// How long a host that took the slot keeps it against other hosts, even when it carries a silent run on. When
    /// a real sender whose video has not been counted yet (a UDP sender that came in mid-GOP) and a stranger both
    /// belong to the run, they would otherwise take turns with every datagram, and the real sender's keyframe,
    /// cut by the stranger's datagrams, would never count; with it they take turns every 0.25 s at most.
    static var tenure: UInt64 { 250_000_000 }

    /// Decides for a new sender from host `origin`, and seats it unless refused.
    mutating func admit(_ sender: Sender, from origin: String?, now: UInt64) -> Admission {
        switch (decision(now: now, from: origin), occupant) {
        case (.refuse, let current?):
            return .refused(current: current)
        case (.takeOver(let staleFor), let current?):
            ended(current, now: now)
            return seat(sender, from: origin, now: now, replacing: current, staleFor: staleFor)
        default:
            return seat(sender, from: origin, now: now, replacing: nil, staleFor: nil)
        }
    }

    /// A host seen in a silent run that is still warm carries the run on; any other sender gets a full hold, so
    /// that a real sender which takes a second to send its first frame (ffmpeg with x264 does) is not taken over
    /// meanwhile.
    private mutating func seat(_ sender: Sender, from origin: String?, now: UInt64, replacing: Occupant?, staleFor: UInt64?) -> Admission {
        let id = nextID
        nextID += 1
        var silentSince = now
        if let run = silentRun {
            if now &- run.endedAt > policy.deadlines.hold {
                silentRun = nil
            } else if let origin, run.origins.contains(origin) {
                silentSince = min(run.since, now)
            }
        }
        let hostSince = replacing.flatMap { origin != nil && $0.origin == origin ? $0.hostSince : nil } ?? now
        occupant = Occupant(id: id, sender: sender, origin: origin, admittedAt: now, hostSince: hostSince,
                            silentSince: silentSince)
        return .admitted(id: id, replacing: replacing, staleFor: staleFor)
    }

    /// `sender` stopped being the sender at `now`: one that delivered video ends any silent run, one that did not
    /// extends it.
    private mutating func ended(_ sender: Occupant, now: UInt64) {
        guard activity.lastProgress(of: sender.id) == nil else {
            silentRun = nil
            return
        }
        var origins = (silentRun?.origins ?? []).filter { $0 != sender.origin }
        if let origin = sender.origin { origins.append(origin) }
        silentRun = SilentRun(since: sender.silentSince, origins: Array(origins.suffix(SilentRun.maximumOrigins)), endedAt: now)
    }

    /// The sender, when it has delivered no video for longer than `idle_timeout` (never with 0), and for how long.
    func idle(now: UInt64) -> (occupant: Occupant, quiet: UInt64)? {
        let timeout = policy.deadlines.idleTimeout
        guard timeout > 0, let occupant, case let quiet = quiet(occupant, since: occupant.admittedAt, now: now), quiet > timeout else { return nil }
        return (occupant, quiet)
    }

    /// `id` stops being the sender at `now`: the occupant it was, or nil when it no longer was (taken over, or
    /// released).
    @discardableResult
    mutating func release(_ id: ConnectionID, now: UInt64) -> Occupant? {
        guard let current = occupant, current.id == id else { return nil }
        occupant = nil
        ended(current, now: now)
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
        let origin = channel.remoteAddress?.ipAddress
        let admission = slot.withLockedValue { $0.admit(channel, from: origin, now: now) }
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
