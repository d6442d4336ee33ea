import Testing

@testable import Bitstream

/// Generic NACK's bookkeeping for WHIP sessions, on a virtual clock: what is asked for, when again, when given up.
struct LossRecoveryTests {
    static let ms: UInt64 = 1_000_000

    @Test func aGapIsAskedForAtOnceThenEvery40MsAtMostFourTimes() {
        var loss = LossRecovery()
        loss.received(100, now: 0)
        loss.received(103, now: 1 * Self.ms)
        #expect(loss.isMissing(101) && loss.isMissing(102) && !loss.isMissing(103))
        #expect(loss.due(now: 1 * Self.ms) == [101, 102])
        #expect(loss.due(now: 20 * Self.ms) == [], "not again within 40 ms")
        #expect(loss.due(now: 41 * Self.ms) == [101, 102])
        #expect(loss.due(now: 81 * Self.ms) == [101, 102])
        #expect(loss.due(now: 121 * Self.ms) == [101, 102])
        // Four requests made: given up, counted once each.
        #expect(loss.due(now: 161 * Self.ms) == [])
        #expect(!loss.isMissing(101) && loss.takeUnrecoveredCount() == 2 && loss.takeUnrecoveredCount() == 0)
    }

    @Test func aRetransmissionRecoversItsNumberAndIsCounted() {
        var loss = LossRecovery()
        loss.received(10, now: 0)
        loss.received(13, now: 0)
        _ = loss.due(now: 0)
        loss.received(11, now: 5 * Self.ms)
        #expect(!loss.isMissing(11) && loss.isMissing(12))
        #expect(loss.due(now: 50 * Self.ms) == [12])
        // A duplicate of a number that was never missing is not a recovery.
        loss.received(13, now: 51 * Self.ms)
        #expect(loss.takeRecoveredCount() == 1 && loss.takeRecoveredCount() == 0)
    }

    @Test func numbersWrapAroundTheSixteenBits() {
        var loss = LossRecovery()
        loss.received(65534, now: 0)
        loss.received(1, now: 0)
        #expect(loss.due(now: 0) == [65535, 0], "in sequence order across the wrap")
    }

    @Test func aHugeJumpIsARestartNotLoss() {
        var loss = LossRecovery()
        loss.received(1000, now: 0)
        loss.received(1000 &+ UInt16(LossRecovery.largestGap + 1), now: 0)
        #expect(loss.due(now: 0) == [])
        // After the jump the new numbering is followed: its own gaps are asked for.
        loss.received(1000 &+ UInt16(LossRecovery.largestGap + 3), now: 0)
        #expect(loss.due(now: 0) == [1000 &+ UInt16(LossRecovery.largestGap + 2)])
    }

    @Test func aBurstIsTrackedUpToItsBound() {
        var loss = LossRecovery()
        for start in stride(from: 0, to: 4000, by: 500) {
            loss.received(UInt16(start), now: 0)
        }
        #expect(loss.due(now: 0).count == LossRecovery.maximumTracked)
    }

    @Test func lossOlderThanTheHorizonIsGivenUpWhateverItsRequests() {
        var loss = LossRecovery()
        loss.received(1, now: 0)
        loss.received(3, now: 0)
        #expect(loss.due(now: 0) == [2])
        #expect(loss.due(now: LossRecovery.giveUpAfter + 1) == [])
        #expect(loss.takeUnrecoveredCount() == 1)
    }

    @Test func aNewSourceForgetsTheOldOnesGapsUncounted() {
        var loss = LossRecovery()
        loss.received(1, now: 0)
        loss.received(5, now: 0)
        loss.restart()
        #expect(!loss.isMissing(2))
        loss.received(40000, now: 0)
        #expect(loss.due(now: 0) == [] && loss.takeUnrecoveredCount() == 0)
    }

    @Test func theNextDeadlineIsTheNextRequestOrGivingUp() {
        var loss = LossRecovery()
        #expect(loss.nextDeadline == nil)
        loss.received(10, now: 0)
        loss.received(12, now: 3 * Self.ms)
        #expect(loss.nextDeadline == 3 * Self.ms, "never asked: at once")
        _ = loss.due(now: 5 * Self.ms)
        #expect(loss.nextDeadline == 45 * Self.ms, "asked: again after 40 ms")
        for at: UInt64 in [45, 85, 125] { _ = loss.due(now: at * Self.ms) }
        #expect(loss.nextDeadline == 165 * Self.ms, "four requests made: dropped at the next call")
        #expect(loss.due(now: 165 * Self.ms).isEmpty && loss.nextDeadline == nil)
    }
}

