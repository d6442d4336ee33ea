@testable import Pipeline
import Testing

@Suite struct AdmissionPolicyTests {
    private let deadlines = SenderDeadlines(idleTimeoutSeconds: 10)

    @Test func oneDecisionForEveryTransport() {
        let refuse = AdmissionPolicy(secondSender: .refuse, deadlines: deadlines)
        #expect(refuse.decide(currentQuietFor: nil) == .admit)
        #expect(refuse.decide(currentQuietFor: deadlines.hold) == .refuse, "still delivering video")
        #expect(refuse.decide(currentQuietFor: deadlines.hold + 1) == .takeOver(staleFor: deadlines.hold + 1))
        let takeover = AdmissionPolicy(secondSender: .takeover, deadlines: deadlines)
        #expect(takeover.decide(currentQuietFor: 0) == .takeOver(staleFor: nil))
        #expect(takeover.decide(currentQuietFor: nil) == .admit)
    }
}
