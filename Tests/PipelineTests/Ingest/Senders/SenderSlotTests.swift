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
        guard case .admitted(let first, nil, nil) = slot.admit("a", from: "a", now: 10 * second) else {
            Issue.record("the first sender was not admitted")
            return
        }
        #expect(slot.occupant?.sender == "a" && slot.occupant?.admittedAt == 10 * second)
        #expect(slot.release(first, now: 10 * second)?.sender == "a")
        guard case .admitted(let next, nil, nil) = slot.admit("b", from: "b", now: 11 * second) else {
            Issue.record("the slot was not free after release")
            return
        }
        #expect(next != first, "an id is never given twice: the decode thread tells senders apart by it")
    }

    @Test func withRefuseTheCurrentSenderKeepsTheStreamWhileItDeliversVideo() {
        var (slot, activity) = slot(.refuse)
        guard case .admitted(let id, _, _) = slot.admit("a", from: "a", now: 10 * second) else { return }
        activity.progressed(id, at: 15 * second)
        guard case .refused(let current) = slot.admit("b", from: "b", now: 16 * second) else {
            Issue.record("a second sender was let in while the first delivers video")
            return
        }
        #expect(current.id == id && slot.occupant?.sender == "a")
        #expect(slot.decision(now: 16 * second, from: "b") == .refuse, "deciding changes nothing")
    }

    @Test func aSenderQuietPastTheHoldIsTakenOverAndSaysHowLong() {
        var (slot, activity) = slot(.refuse)
        guard case .admitted(let id, _, _) = slot.admit("a", from: "a", now: 10 * second) else { return }
        activity.progressed(id, at: 12 * second)
        let now = 15 * second
        guard case .admitted(let newID, let replaced?, let staleFor) = slot.admit("b", from: "b", now: now) else {
            Issue.record("a sender quiet for 3 s (hold 2 s) was not taken over")
            return
        }
        #expect(replaced.id == id && replaced.sender == "a" && staleFor == 3 * second)
        #expect(slot.occupant?.id == newID && slot.occupant?.sender == "b")
        #expect(slot.release(id, now: now) == nil, "the sender taken over no longer holds the slot: its late end frees nothing")
        #expect(slot.occupant?.sender == "b")
    }

    @Test func withTakeoverANewSenderAlwaysWins() {
        var (slot, activity) = slot(.takeover)
        guard case .admitted(let id, _, _) = slot.admit("a", from: "a", now: 10 * second) else { return }
        activity.progressed(id, at: 10 * second)
        guard case .admitted(_, let replaced?, nil) = slot.admit("b", from: "b", now: 10 * second + 1) else {
            Issue.record("takeover did not take over")
            return
        }
        #expect(replaced.sender == "a")
    }

    @Test func idleCountsFromAdmissionUntilTheFirstVideoThenFromTheLast() {
        var (slot, activity) = slot(.refuse, idleTimeout: 5)
        guard case .admitted(let id, _, _) = slot.admit("a", from: "a", now: 10 * second) else { return }
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
        _ = seated.admit("a", from: "a", now: 0)
        #expect(seated.idle(now: 1_000 * second) == nil, "idle_timeout = 0: never dropped for silence")
    }

    /// A stranger that replaces itself (a new connection just before the last one goes stale, or a new UDP port
    /// every datagram) must not get a fresh hold each time: the real sender would only get in during the moment
    /// between one stranger going stale and the next arriving.
    @Test func senderAfterSendersThatDeliveredNoVideoGetsNoFreshHold() {
        var (slot, activity) = slot(.refuse)
        guard case .admitted(let stranger, nil, nil) = slot.admit("stranger-1", from: "stranger", now: 10 * second) else { return }
        // 2.05 s later the next stranger connection takes over the stale first (nothing delivered).
        guard case .admitted(let next, let replaced?, _) = slot.admit("stranger-2", from: "stranger", now: 12 * second + 50_000_000) else {
            Issue.record("a sender that delivered nothing for 2.05 s was not taken over")
            return
        }
        #expect(replaced.id == stranger && slot.occupant?.silentSince == 10 * second)
        // The real sender arrives 0.3 s later: the stream has had no video for 2.35 s, so it is let in at once.
        guard case .admitted(let real, let replacedAgain?, let staleFor) = slot.admit("real", from: "real", now: 12 * second + 350_000_000) else {
            Issue.record("the real sender was refused: the stranger's second connection got a fresh hold")
            return
        }
        #expect(replacedAgain.id == next && staleFor == 2 * second + 350_000_000)
        // From another host, it gets the full hold: ffmpeg with x264 connects a second or more before its first
        // frame, and neither the stranger's next connection nor one from a third host may take its place then.
        #expect(slot.occupant?.silentSince == 12 * second + 350_000_000)
        guard case .refused = slot.admit("stranger-3", from: "stranger", now: 13 * second + 500_000_000),
              case .refused = slot.admit("sniper", from: "elsewhere", now: 14 * second) else {
            Issue.record("a real sender was displaced before its first video, within its hold")
            return
        }
        // Once its video is counted it holds the stream against the next stranger connection.
        activity.progressed(real, at: 14 * second + 100_000_000)
        guard case .refused = slot.admit("stranger-4", from: "stranger", now: 16 * second) else {
            Issue.record("a sender that delivers video lost the stream to a stranger")
            return
        }
        // idle_timeout still counts a sender's own silence, from its own admission.
        #expect(slot.quiet(of: real, now: 12 * second + 350_000_000) == 0)
    }

    @Test func strangerThatClosesBeforeReconnectingCarriesItsSilenceOn() {
        var (slot, _) = slot(.refuse)
        guard case .admitted(let first, _, _) = slot.admit("stranger-1", from: "stranger", now: 10 * second) else { return }
        _ = slot.release(first, now: 11 * second + 900_000_000)
        // Back 0.1 s later from the same host: the silence since 10 s goes on, and anyone may take the stream.
        guard case .admitted(_, nil, nil) = slot.admit("stranger-2", from: "stranger", now: 12 * second) else { return }
        #expect(slot.occupant?.silentSince == 10 * second)
        guard case .admitted(_, _?, let staleFor) = slot.admit("real", from: "real", now: 12 * second + 300_000_000) else {
            Issue.record("the reconnected stranger got a fresh hold")
            return
        }
        #expect(staleFor == 2 * second + 300_000_000)
    }

    @Test func senderAfterOneThatDeliveredVideoOrLongAfterASilentOneIsHeld() {
        var (slot, activity) = slot(.refuse)
        // A real sender that restarted: its old connection delivered video, so the new one gets the full hold.
        guard case .admitted(let old, _, _) = slot.admit("real", from: "real", now: 10 * second) else { return }
        activity.progressed(old, at: 11 * second)
        guard case .admitted(let restarted, _?, _) = slot.admit("real-restarted", from: "real-restarted", now: 13 * second + 500_000_000) else { return }
        #expect(slot.occupant?.silentSince == 13 * second + 500_000_000)
        guard case .refused = slot.admit("other", from: "other", now: 14 * second) else {
            Issue.record("a restarted sender after one that delivered video was not held")
            return
        }
        // A silent sender that left more than the hold ago: the next one starts afresh.
        _ = slot.release(restarted, now: 15 * second)
        guard case .admitted(_, nil, nil) = slot.admit("later", from: "later", now: 17 * second + 1) else { return }
        #expect(slot.occupant?.silentSince == 17 * second + 1)
        #expect(slot.decision(now: 18 * second, from: "other") == .refuse)
    }

    /// Only the hosts of a silent run carry it on: a sender from another host gets its full hold.
    @Test func aSilentRunIsCarriedOnOnlyByItsOwnHosts() {
        var (slot, _) = slot(.refuse)
        guard case .admitted(let first, _, _) = slot.admit("stranger-1", from: "stranger", now: 10 * second) else { return }
        _ = slot.release(first, now: 11 * second + 900_000_000)
        #expect(slot.silentRun?.origins == ["stranger"] && slot.silentRun?.since == 10 * second)
        guard case .admitted(_, nil, nil) = slot.admit("real", from: "real", now: 12 * second) else { return }
        #expect(slot.occupant?.silentSince == 12 * second)
        guard case .refused = slot.admit("stranger-2", from: "stranger", now: 13 * second) else {
            Issue.record("a sender from a new host got no hold")
            return
        }
    }

    /// A real UDP sender that came in mid-GOP stays silent past its hold and joins the run beside the stranger's
    /// host: from then on the two hosts take turns, but no faster than every 0.25 s (the tenure), so that the real
    /// sender's next keyframe can arrive whole. The stranger's own ports replacing one another keep its tenure.
    @Test func twoHostsOfARunTakeTurnsNoFasterThanTheTenure() {
        var (slot, activity) = slot(.refuse)
        let ms: UInt64 = 1_000_000
        _ = slot.admit("stranger-1", from: "stranger", now: 10 * second)
        guard case .admitted(_, _?, _) = slot.admit("stranger-2", from: "stranger", now: 12 * second + 50 * ms),
              case .admitted(_, _?, _) = slot.admit("real-1", from: "real", now: 12 * second + 100 * ms) else {
            Issue.record("the real sender did not take over the stranger's stale run")
            return
        }
        #expect(slot.occupant?.silentSince == 12 * second + 100 * ms, "a new host: a full hold")
        // Nothing of its counted for 2 s: the stranger's next port takes over, and the real host joins the run.
        guard case .admitted(_, _?, _) = slot.admit("stranger-3", from: "stranger", now: 14 * second + 200 * ms) else {
            Issue.record("a silent real sender held past its hold")
            return
        }
        #expect(slot.silentRun?.origins == ["stranger", "real"])
        _ = slot.admit("stranger-4", from: "stranger", now: 14 * second + 300 * ms)
        #expect(slot.occupant?.hostSince == 14 * second + 200 * ms, "its own new port keeps the host's tenure")
        guard case .refused = slot.admit("real-2", from: "real", now: 14 * second + 400 * ms),
              case .admitted(let real, _?, _) = slot.admit("real-3", from: "real", now: 14 * second + 460 * ms) else {
            Issue.record("the hosts did not take turns at the tenure")
            return
        }
        guard case .refused = slot.admit("stranger-5", from: "stranger", now: 14 * second + 500 * ms) else {
            Issue.record("the stranger took the slot back within the real sender's tenure")
            return
        }
        // Its keyframe counted within the tenure: it holds.
        activity.progressed(real, at: 14 * second + 600 * ms)
        guard case .refused = slot.admit("stranger-6", from: "stranger", now: 15 * second) else {
            Issue.record("a sender that delivers video lost the stream")
            return
        }
    }
}
