@testable import Decoding
import Logging
import StreamrecvTestSupport
import Testing

/// One line per key per interval, the suppressed counted in the next; a time older than the last line's is no trap.
struct RateLimitedLoggerTests {
    static let second: UInt64 = 1_000_000_000

    /// The lines a logger wrote.
    static func logger() -> (RateLimitedLogger, CapturedLines) {
        let lines = CapturedLines()
        return (RateLimitedLogger(logger: lines.logger(label: "test"), intervalSeconds: 10), lines)
    }

    @Test func oneLinePerKeyPerIntervalAndTheSuppressedCounted() {
        var (log, lines) = Self.logger()
        for index in 0..<50 { log.log(.warning, key: "a", now: UInt64(index) * Self.second / 10, "a \(index)") }
        log.log(.warning, key: "b", now: 1 * Self.second, "b")
        log.log(.warning, key: "a", now: 11 * Self.second, "a again")
        #expect(lines.all.map(\.message) == ["a 0", "b", "a again (49 more like this suppressed)"])
    }

    @Test func aTimeOlderThanTheLastLinesIsSuppressedNotATrap() {
        var (log, lines) = Self.logger()
        log.log(.warning, key: "a", now: 100 * Self.second, "late thread first")
        log.log(.warning, key: "a", now: 99 * Self.second, "early thread second")
        log.log(.warning, key: "a", now: 111 * Self.second, "later")
        #expect(lines.all.map(\.message) == ["late thread first", "later (1 more like this suppressed)"])
    }

    @Test func keysFromInputAreBounded() {
        var (log, lines) = Self.logger()
        for index in 0..<(RateLimitedLogger.maximumKeys + 10) { log.log(.warning, key: "k\(index)", now: 0, "k\(index)") }
        // Every key is new, so every line is written; the table is emptied when full instead of growing.
        #expect(lines.all.count == RateLimitedLogger.maximumKeys + 10)
        log.log(.warning, key: "k0", now: 1, "k0 again")
        #expect(lines.all.last?.message == "k0 again", "k0 was forgotten when the table was emptied")
    }
}
