@testable import Pipeline
import Testing

/// What REMB tells a sender that has no transport-cc, second by second.
@Suite struct ReceiverBitrateAllowanceTests {
    @Test func aSenderUsingItsAllowanceIsGivenMoreEachSecondUpToTheCeiling() {
        var allowance = ReceiverBitrateAllowance(ceiling: 20_000_000)
        #expect(allowance.current == 4_000_000)
        var told: [UInt64] = []
        for _ in 0..<6 { told.append(allowance.update(receivedBitrate: allowance.current * 9 / 10, unrecoveredLosses: false)) }
        #expect(told == [6_000_000, 9_000_000, 13_500_000, 20_000_000, 20_000_000, 20_000_000])
    }

    @Test func aQuietSenderKeepsItsRoom() {
        var allowance = ReceiverBitrateAllowance(ceiling: nil)
        _ = allowance.update(receivedBitrate: 5_000_000, unrecoveredLosses: false)
        let room = allowance.current
        // A still screen: 100 kbit/s for a minute. The next scroll finds the same allowance, not 2 x 100 kbit/s.
        for _ in 0..<60 { #expect(allowance.update(receivedBitrate: 100_000, unrecoveredLosses: false) == room) }
    }

    @Test func lossesBeyondRepairBringItToWhatArrivedLessFifteenPercent() {
        var allowance = ReceiverBitrateAllowance(ceiling: nil)
        #expect(allowance.update(receivedBitrate: 3_000_000, unrecoveredLosses: true) == 2_550_000)
        #expect(allowance.update(receivedBitrate: 100_000, unrecoveredLosses: true) == ReceiverBitrateAllowance.floor)
        // And it grows again once the link is clean.
        #expect(allowance.update(receivedBitrate: 290_000, unrecoveredLosses: false) == 450_000)
    }

    @Test func theCeilingHoldsFromTheStart() {
        var allowance = ReceiverBitrateAllowance(ceiling: 1_000_000)
        #expect(allowance.current == 1_000_000)
        #expect(allowance.update(receivedBitrate: 30_000_000, unrecoveredLosses: false) == 1_000_000)
        #expect(ReceiverBitrateAllowance(ceiling: nil).ceiling == ReceiverBitrateAllowance.defaultCeiling)
    }
}
