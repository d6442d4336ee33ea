@testable import Decoding
import Logging
import Synchronization
import Testing

/// One line per key per interval, the suppressed counted in the next; a time older than the last line's is no trap.
struct RateLimitedLoggerTests {
    static let second: UInt64 = 1_000_000_000

    /// The lines a logger wrote.
    final class Lines: Sendable {
        private let lines = Mutex<[String]>([])
        func append(_ line: String) { lines.withLock { $0.append(line) } }
        var all: [String] { lines.withLock { $0 } }
    }

    struct Capture: LogHandler {
        let lines: Lines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) { lines.append(event.message.description) }
    }

    static func logger() -> (RateLimitedLogger, Lines) {
        let lines = Lines()
        return (RateLimitedLogger(logger: Logger(label: "test") { _ in Capture(lines: lines) }, intervalSeconds: 10), lines)
    }

    @Test func oneLinePerKeyPerIntervalAndTheSuppressedCounted() {
        var (log, lines) = Self.logger()
        for index in 0..<50 { log.log(.warning, key: "a", now: UInt64(index) * Self.second / 10, "a \(index)") }
        log.log(.warning, key: "b", now: 1 * Self.second, "b")
        log.log(.warning, key: "a", now: 11 * Self.second, "a again")
        #expect(lines.all == ["a 0", "b", "a again (49 more like this suppressed)"])
    }

    @Test func aTimeOlderThanTheLastLinesIsSuppressedNotATrap() {
        var (log, lines) = Self.logger()
        log.log(.warning, key: "a", now: 100 * Self.second, "late thread first")
        log.log(.warning, key: "a", now: 99 * Self.second, "early thread second")
        log.log(.warning, key: "a", now: 111 * Self.second, "later")
        #expect(lines.all == ["late thread first", "later (1 more like this suppressed)"])
    }

    @Test func keysFromInputAreBounded() {
        var (log, lines) = Self.logger()
        for index in 0..<(RateLimitedLogger.maximumKeys + 10) { log.log(.warning, key: "k\(index)", now: 0, "k\(index)") }
        // Every key is new, so every line is written; the table is emptied when full instead of growing.
        #expect(lines.all.count == RateLimitedLogger.maximumKeys + 10)
        log.log(.warning, key: "k0", now: 1, "k0 again")
        #expect(lines.all.last == "k0 again", "k0 was forgotten when the table was emptied")
    }
}
