@testable import Pipeline
import Testing

/// The DTLS certificate (valid 30 days) is made anew after 20 days of uptime (issue 31's leftovers).
@Suite struct DTLSIdentityRenewalTests {
    @Test func renewedAfterTwentyDaysAndRetriedHourlyOnFailure() {
        var renewal = DTLSIdentityRenewal()
        let (start, interval, retry) = (UInt64(5_000_000_000), DTLSIdentityRenewal.interval, DTLSIdentityRenewal.retry)
        var due = [renewal.isDue(now: start), renewal.isDue(now: start + interval - 1), renewal.isDue(now: start + interval)]
        #expect(due == [false, false, true], "the first tick starts the count")
        let failedAt = start + interval
        renewal.failed(now: failedAt)
        due = [renewal.isDue(now: failedAt + retry - 1), renewal.isDue(now: failedAt + retry)]
        #expect(due == [false, true], "a failure is tried again an hour later")
        renewal.renewed(now: failedAt + retry)
        due = [renewal.isDue(now: failedAt + retry + interval - 1), renewal.isDue(now: failedAt + retry + interval)]
        #expect(due == [false, true])
        #expect(interval < 29 * 86_400 * 1_000_000_000, "well before the 30 days run out")
    }
}
