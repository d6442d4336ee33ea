import NIOCore
@testable import Pipeline
import Testing

@Suite struct SenderAdmissionTests {
    /// One host connecting in a loop uses up its own allowance, not the real sender's.
    @Test func theConnectionRateIsLimitedPerSourceAddress() throws {
        var limiter = PerSourceRateLimiter(perSecond: 2)
        let flood = try SocketAddress(ipAddress: "127.0.0.2", port: 40000)
        let sender = try SocketAddress(ipAddress: "127.0.0.1", port: 40001)
        let now: UInt64 = 5_000_000_000
        let flooded = (0..<100).map { limiter.admit(flood, now: now + UInt64($0)) }
        #expect(flooded.filter { $0 }.count == 2)
        let senderAdmitted = limiter.admit(sender, now: now + 200)
        #expect(senderAdmitted)
        // The IPv4-mapped form of an address is the same source.
        let mappedAdmitted = limiter.admit(try SocketAddress(ipAddress: "::ffff:127.0.0.2", port: 1), now: now + 300)
        #expect(!mappedAdmitted)
    }

    @Test func theSourceTableStaysBounded() throws {
        var limiter = PerSourceRateLimiter(perSecond: 1)
        for index in 0..<(PerSourceRateLimiter.maximumSources + 10) {
            let address = try SocketAddress(ipAddress: "10.\(index >> 16).\((index >> 8) & 255).\(index & 255)", port: 1)
            let admitted = limiter.admit(address, now: UInt64(index + 1))
            #expect(admitted)
        }
    }

    /// A sender is "quiet" from its admission until its first video, then from its latest video.
    @Test func quietnessCountsFromAdmissionOrLastVideo() {
        let second: UInt64 = 1_000_000_000
        #expect(SenderDeadlines.quiet(admittedAt: 10 * second, lastProgress: nil, now: 13 * second) == 3 * second)
        #expect(SenderDeadlines.quiet(admittedAt: 10 * second, lastProgress: 12 * second, now: 13 * second) == second)
        #expect(SenderDeadlines.quiet(admittedAt: 10 * second, lastProgress: 9 * second, now: 13 * second) == 3 * second,
                "progress of an earlier connection does not count")
        #expect(SenderDeadlines(idleTimeoutSeconds: 10).hold == 2 * second)
        #expect(SenderDeadlines(idleTimeoutSeconds: 1).hold == second)
        #expect(SenderDeadlines(idleTimeoutSeconds: 0).idleTimeout == 0)
    }

    @Test func activityBelongsToOneConnection() {
        let activity = SenderActivity()
        activity.progressed(7, at: 100)
        #expect(activity.lastProgress(of: 7) == 100 && activity.lastProgress(of: 8) == nil)
    }
}
