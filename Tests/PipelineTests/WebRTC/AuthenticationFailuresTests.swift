@testable import Pipeline
import Testing

/// Issue 31, item 6: online guessing of the bearer token.
@Suite struct AuthenticationFailuresTests {
    static let second: UInt64 = 1_000_000_000
    static let guesser = ConnectionParty.remote([192, 0, 2, 9])

    @Test func afterFiveFailuresEachWaitDoubles() {
        var failures = AuthenticationFailures()
        for index in 0..<AuthenticationFailures.free {
            #expect(failures.failed(Self.guesser, now: UInt64(index)) == nil)
            #expect(failures.blocked(Self.guesser, now: UInt64(index)) == nil)
        }
        var now: UInt64 = 10
        for expected in [1, 2, 4, 8, 16] as [UInt64] {
            #expect(failures.failed(Self.guesser, now: now) == expected * Self.second)
            #expect(failures.blocked(Self.guesser, now: now + 1) == expected * Self.second - 1)
            now += expected * Self.second
            #expect(failures.blocked(Self.guesser, now: now) == nil)
        }
        #expect(failures.blocked(.remote([192, 0, 2, 10]), now: now) == nil, "another address is not slowed")
    }

    @Test func theWaitStopsGrowingAndIsForgottenAfterQuiet() {
        var failures = AuthenticationFailures()
        var now: UInt64 = 0
        var last: UInt64 = 0
        for _ in 0..<60 {
            last = failures.failed(Self.guesser, now: now) ?? 0
            now += last
        }
        #expect(last == AuthenticationFailures.longestBlock)
        #expect(failures.failed(Self.guesser, now: now + AuthenticationFailures.forgetAfter) == nil, "a fresh start")
    }

    @Test func aRightTokenForgivesAndMemoryIsBounded() {
        var failures = AuthenticationFailures()
        for index in 0..<8 { _ = failures.failed(Self.guesser, now: UInt64(index)) }
        failures.succeeded(Self.guesser)
        #expect(failures.blocked(Self.guesser, now: 8) == nil)
        for index in 0..<(AuthenticationFailures.maximumParties + 100) {
            _ = failures.failed(.localUser(UInt32(index)), now: UInt64(index))
        }
        #expect(failures.count == AuthenticationFailures.maximumParties)
    }
}
