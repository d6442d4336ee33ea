@testable import Pipeline
import Testing

/// Whom a decode thread takes input from: only a connected sender counts bytes and reports progress, at most every
/// 50 ms.
@Suite struct SenderPhaseTests {
    @Test func onlyAConnectedSenderCountsAndReportsProgress() {
        var phase = SenderPhase.none
        phase.received(bytes: 10)
        #expect(phase.connection == nil && phase.progressDue(now: 1_000_000_000) == nil)
        phase = .connected(SenderConnection(id: 7))
        phase.received(bytes: 10)
        phase.received(bytes: 5)
        guard case .connected(let sender) = phase else { Issue.record("\(phase)"); return }
        #expect(sender.bytes == 15 && phase.connection == 7)
        #expect(phase.progressDue(now: 100_000_000) == 7)
        #expect(phase.progressDue(now: 149_999_999) == nil, "within 50 ms of the last")
        #expect(phase.progressDue(now: 150_000_000) == 7)
        phase = .gone(since: 200_000_000)
        phase.received(bytes: 10)
        #expect(phase.connection == nil && phase.progressDue(now: 300_000_000) == nil)
    }
}
