import Logging

/// Logs the first occurrence of a repeated warning, then at most one line per `interval` per key, saying how
/// many were suppressed: a hostile stream cannot flood the journal, and never one line per frame. Keys may come
/// from input (libavcodec's messages), so at most `maximumKeys` are remembered.
public struct RateLimitedLogger: Sendable {
    public let logger: Logger
    public let intervalNanoseconds: UInt64
    static let maximumKeys = 1000
    private var lastLogged: [String: UInt64] = [:]
    private var suppressed: [String: Int] = [:]

    public init(logger: Logger, intervalSeconds: Double = 10) {
        self.logger = logger
        intervalNanoseconds = UInt64(intervalSeconds * 1e9)
    }

    public mutating func log(_ level: Logger.Level, key: String, now: UInt64, _ message: @autoclosure () -> String) {
        // A time older than the last line's is within its interval: callers that share one logger behind a lock read
        // the clock before taking it, so a thread that lost the race brings an earlier time (UInt64 would trap).
        if let last = lastLogged[key], now < last || now - last < intervalNanoseconds {
            suppressed[key, default: 0] += 1
            return
        }
        if lastLogged.count >= Self.maximumKeys {
            lastLogged.removeAll(keepingCapacity: true)
            suppressed.removeAll(keepingCapacity: true)
        }
        let skipped = suppressed.removeValue(forKey: key) ?? 0
        let suffix = skipped > 0 ? " (\(skipped) more like this suppressed)" : ""
        logger.log(level: level, "\(message())\(suffix)")
        lastLogged[key] = now
    }
}
