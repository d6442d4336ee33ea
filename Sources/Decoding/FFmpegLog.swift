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
        streamrecv_av_log_route { level, line in
            guard let line else { return }
            FFmpegLog.receive(level: level, line: String(cString: line))
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
