@testable import Pipeline
import Testing

/// The one record of "who sends now" that the TCP, datagram, SRT and WebRTC listeners share.
@Suite struct SenderSlotTests {
    private let second: UInt64 = 1_000_000_000

    private func slot(_ policy: SecondSenderPolicy, idleTimeout: Double = 10) -> (SenderSlot<String>, SenderActivity) {
        let activity = SenderActivity()
        let policy = AdmissionPolicy(secondSender: policy, deadlines: SenderDeadlines(idleTimeoutSeconds: idleTimeout))
        return (SenderSlot(policy: policy, activity: activity), activity)
    }

    @Test func theFirstSenderIsSeatedAndEachGetsItsOwnID() throws {
        var (slot, _) = slot(.refuse)
        guard case .admitted(let first, nil, nil) = slot.admit("a", now: 10 * second) else {
            Issue.record("the first sender was not admitted")
            return
        }
        #expect(slot.occupant?.sender == "a" && slot.occupant?.admittedAt == 10 * second)
        #expect(slot.release(first)?.sender == "a")
        guard case .admitted(let next, nil, nil) = slot.admit("b", now: 11 * second) else {
            Issue.record("the slot was not free after release")
            return
        }
        #expect(next != first, "an id is never given twice: the decode thread tells senders apart by it")
    }

    @Test func withRefuseTheCurrentSenderKeepsTheStreamWhileItDeliversVideo() {
        var (slot, activity) = slot(.refuse)
        guard case .admitted(let id, _, _) = slot.admit("a", now: 10 * second) else { return }
        activity.progressed(id, at: 15 * second)
        guard case .refused(let current) = slot.admit("b", now: 16 * second) else {
            Issue.record("a second sender was let in while the first delivers video")
            return
        }
        #expect(current.id == id && slot.occupant?.sender == "a")
        #expect(slot.decision(now: 16 * second) == .refuse, "deciding changes nothing")
    }

    @Test func aSenderQuietPastTheHoldIsTakenOverAndSaysHowLong() {
        var (slot, activity) = slot(.refuse)
        guard case .admitted(let id, _, _) = slot.admit("a", now: 10 * second) else { return }
        activity.progressed(id, at: 12 * second)
        let now = 15 * second
        guard case .admitted(let newID, let replaced?, let staleFor) = slot.admit("b", now: now) else {
            Issue.record("a sender quiet for 3 s (hold 2 s) was not taken over")
            return
        }
        #expect(replaced.id == id && replaced.sender == "a" && staleFor == 3 * second)
        #expect(slot.occupant?.id == newID && slot.occupant?.sender == "b")
        #expect(slot.release(id) == nil, "the sender taken over no longer holds the slot: its late end frees nothing")
        #expect(slot.occupant?.sender == "b")
    }

    @Test func withTakeoverANewSenderAlwaysWins() {
        var (slot, activity) = slot(.takeover)
        guard case .admitted(let id, _, _) = slot.admit("a", now: 10 * second) else { return }
        activity.progressed(id, at: 10 * second)
        guard case .admitted(_, let replaced?, nil) = slot.admit("b", now: 10 * second + 1) else {
            Issue.record("takeover did not take over")
            return
        }
        #expect(replaced.sender == "a")
    }

    @Test func idleCountsFromAdmissionUntilTheFirstVideoThenFromTheLast() {
        var (slot, activity) = slot(.refuse, idleTimeout: 5)
        guard case .admitted(let id, _, _) = slot.admit("a", now: 10 * second) else { return }
        #expect(slot.idle(now: 15 * second) == nil, "not past 5 s yet")
        #expect(slot.idle(now: 15 * second + 1)?.quiet == 5 * second + 1)
        activity.progressed(id, at: 14 * second)
        #expect(slot.idle(now: 16 * second) == nil)
        #expect(slot.quiet(of: id, now: 16 * second) == 2 * second)
        #expect(slot.quiet(of: id + 1, now: 16 * second) == nil, "only the sender now has a quietness")
        // Progress of another connection id is not this sender's.
        activity.progressed(id + 7, at: 30 * second)
        #expect(slot.idle(now: 30 * second)?.occupant.id == id)
        let (never, _) = self.slot(.refuse, idleTimeout: 0)
        var seated = never
        _ = seated.admit("a", now: 0)
        #expect(seated.idle(now: 1_000 * second) == nil, "idle_timeout = 0: never dropped for silence")
    }
}
