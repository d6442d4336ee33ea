import CFFmpeg
import Glibc
import Logging
import Synchronization

/// Routes libavcodec's log (which otherwise writes to stderr, one line per damaged picture) into the daemon's
/// logger: warnings and errors only, at most one line per distinct message per 10 s, with the count of those
/// suppressed. The `[h264 @ 0x…]` context is dropped so that repeats from different decoders are one message.
public enum FFmpegLog {
    private static let log = Mutex<RateLimitedLogger?>(nil)

    /// Installs the routing; libavcodec messages then go to `logger` (label "libavcodec").
    public static func route(to logger: Logger) {
        log.withLock { $0 = RateLimitedLogger(logger: logger) }
        av_log_set_level(AV_LOG_WARNING)
        streamrecv_av_log_route { level, line, context in
            guard let line else { return }
            if level <= AV_LOG_ERROR, let context { FFmpegLog.countError(from: UInt(bitPattern: context)) }
            FFmpegLog.receive(level: level, line: String(cString: line))
        }
        routed.withLock { $0 = true }
    }

    // MARK: - Errors per decoder

    /// Errors libavcodec logged, per watched context (a decoder's AVCodecContext and its private context): the only
    /// word it gives of a slice it could not decode while its concealment is off (`VideoDecoder.setChunked`).
    private static let errors = Mutex<[UInt: Int]>([:])
    private static let routed = Mutex(false)

    /// Whether libavcodec's log comes here, so that `errors(of:)` counts anything.
    public static var isRouted: Bool { routed.withLock { $0 } }

    static func watch(_ contexts: [UnsafeMutableRawPointer]) {
        errors.withLock { table in for context in contexts { table[UInt(bitPattern: context)] = 0 } }
    }

    static func unwatch(_ contexts: [UnsafeMutableRawPointer]) {
        errors.withLock { table in for context in contexts { table.removeValue(forKey: UInt(bitPattern: context)) } }
    }

    /// Errors logged so far by the watched `contexts`, together.
    static func errors(of contexts: [UnsafeMutableRawPointer]) -> Int {
        errors.withLock { table in contexts.reduce(0) { $0 + (table[UInt(bitPattern: $1)] ?? 0) } }
    }

    private static func countError(from context: UInt) {
        errors.withLock { table in
            if let count = table[context] { table[context] = count + 1 }
        }
    }

    static func receive(level: Int32, line: String) {
        let message = line.hasPrefix("[") ? String(line.drop { $0 != "]" }.dropFirst().drop { $0 == " " }) : line
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let nanoseconds = UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
        log.withLock { $0?.log(level <= AV_LOG_ERROR ? .error : .warning, key: message, now: nanoseconds, message) }
    }
}
