import Logging

/// Logs the first occurrence of a repeated warning, then at most one line per `interval` per key, saying how
/// many were suppressed: a hostile stream cannot flood the journal, and never one line per frame.
struct RateLimitedLogger {
    let logger: Logger
    let intervalNanoseconds: UInt64
    private var lastLogged: [String: UInt64] = [:]
    private var suppressed: [String: Int] = [:]

    init(logger: Logger, intervalSeconds: Double = 10) {
        self.logger = logger
        intervalNanoseconds = UInt64(intervalSeconds * 1e9)
    }

    mutating func log(_ level: Logger.Level, key: String, now: UInt64, _ message: @autoclosure () -> String) {
        if let last = lastLogged[key], now - last < intervalNanoseconds {
            suppressed[key, default: 0] += 1
            return
        }
        let skipped = suppressed.removeValue(forKey: key) ?? 0
        let suffix = skipped > 0 ? " (\(skipped) more like this suppressed)" : ""
        logger.log(level: level, "\(message())\(suffix)")
        lastLogged[key] = now
    }
}
