import CFFmpeg
import Glibc
import Logging
import Synchronization

/// Routes libavcodec's log (which otherwise writes to stderr, one line per damaged picture) into the daemon's
/// logger: warnings and errors only, limited by kind of message and by stream (`LibraryLogLimiter`), with the count
/// of those suppressed. The `[h264 @ 0x…]` context is dropped; the stream a decoder belongs to is named instead.
public enum FFmpegLog {
    private static let log = Mutex<(logger: Logger, limiter: LibraryLogLimiter)?>(nil)

    /// Installs the routing; libavcodec messages then go to `logger` (label "libavcodec").
    public static func route(to logger: Logger) {
        log.withLock { $0 = (logger, LibraryLogLimiter()) }
        av_log_set_level(AV_LOG_WARNING)
        streamrecv_av_log_route { level, line, context in
            guard let line else { return }
            let stream = context.flatMap { FFmpegLog.noteMessage(from: UInt(bitPattern: $0), isError: level <= AV_LOG_ERROR) }
            FFmpegLog.receive(level: level, line: String(cString: line), stream: stream ?? "")
        }
        routed.withLock { $0 = true }
    }

    // MARK: - Errors per decoder

    /// Errors libavcodec logged, per watched context (a decoder's AVCodecContext and its private context): the only
    /// word it gives of a slice it could not decode while its concealment is off (`VideoDecoder.setChunked`).
    private static let watched = Mutex<[UInt: Watched]>([:])

    private struct Watched {
        var errors = 0
        /// The stream the decoder decodes: its messages are limited apart from other streams'.
        var stream: String
    }
    private static let routed = Mutex(false)

    /// Whether libavcodec's log comes here, so that `errors(of:)` counts anything.
    public static var isRouted: Bool { routed.withLock { $0 } }

    static func watch(_ contexts: [UnsafeMutableRawPointer], stream: String) {
        watched.withLock { table in for context in contexts { table[UInt(bitPattern: context)] = Watched(stream: stream) } }
    }

    static func unwatch(_ contexts: [UnsafeMutableRawPointer]) {
        watched.withLock { table in for context in contexts { table.removeValue(forKey: UInt(bitPattern: context)) } }
    }

    /// Errors logged so far by the watched `contexts`, together.
    static func errors(of contexts: [UnsafeMutableRawPointer]) -> Int {
        watched.withLock { table in contexts.reduce(0) { $0 + (table[UInt(bitPattern: $1)]?.errors ?? 0) } }
    }

    /// Counts an error of a watched context; the stream it belongs to, nil for a context not watched.
    private static func noteMessage(from context: UInt, isError: Bool) -> String? {
        watched.withLock { table in
            guard table[context] != nil else { return nil }
            if isError { table[context]!.errors += 1 }
            return table[context]!.stream
        }
    }

    static func receive(level: Int32, line: String, stream: String = "") {
        let message = line.hasPrefix("[") ? String(line.drop { $0 != "]" }.dropFirst().drop { $0 == " " }) : line
        log.withLock { routing in
            guard let logger = routing?.logger else { return }
            guard let suffix = routing!.limiter.admit(stream: stream, level: level, message: message, now: monotonicNanoseconds()) else { return }
            logger.log(level: level <= AV_LOG_ERROR ? .error : .warning, "\(message)\(suffix)",
                       metadata: stream.isEmpty ? nil : ["stream": "\(stream)"])
        }
    }
}
