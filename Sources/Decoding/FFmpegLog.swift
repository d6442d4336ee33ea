import CFFmpeg
import Glibc
import Logging
import Synchronization

/// Routes libavcodec's log (which otherwise writes to stderr, one line per damaged picture) into the daemon's
/// logger: warnings and errors only, limited by kind of message and by stream (`LibraryLogLimiter`), with the count
/// of those suppressed. The `[h264 @ 0x…]` context is dropped; the stream a decoder belongs to is named instead.
public enum FFmpegLog {
    /// Where the lines go, once `route(to:)` was called.
    private struct Routing {
        var logger: Logger
        var limiter: LibraryLogLimiter
    }

    private static let log = Mutex<Routing?>(nil)

    /// Installs the routing; libavcodec messages then go to `logger` (label "libavcodec").
    public static func route(to logger: Logger) {
        log.withLock { $0 = Routing(logger: logger, limiter: LibraryLogLimiter()) }
        av_log_set_level(AV_LOG_WARNING)
        streamrecv_av_log_route { level, line, context, owner in
            guard let line else { return }
            let stream = FFmpegLog.noteMessage(from: UInt(bitPattern: context), owner: UInt(bitPattern: owner),
                                               isError: level <= AV_LOG_ERROR)
            FFmpegLog.receive(level: level, line: String(cString: line), stream: stream ?? "")
        }
        routed.withLock { $0 = true }
    }

    /// Runs `body` with libavcodec's lines from this thread left out (hardware probing: its attempts are summed
    /// up in one line of ours). The process's log level is not touched.
    static func quietly<T>(_ body: () -> T) -> T {
        streamrecv_av_log_set_quiet(1)
        defer { streamrecv_av_log_set_quiet(0) }
        return body()
    }

    // MARK: - Errors per decoder

    /// Errors libavcodec logged, per watched context (a decoder's AVCodecContext, its private context, and the
    /// `opaque` its frame threads' copies of the context log with): the only word it gives of a slice it could not
    /// decode while its concealment is off (`VideoDecoder.setChunked`).
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

    /// Counts an error of a watched context, or else of a watched owner (0: none); the stream it belongs to, nil
    /// for a context not watched.
    private static func noteMessage(from context: UInt, owner: UInt, isError: Bool) -> String? {
        watched.withLock { table in
            let key = table[context] != nil ? context : owner
            guard key != 0, table[key] != nil else { return nil }
            if isError { table[key]!.errors += 1 }
            return table[key]!.stream
        }
    }

    static func receive(level: Int32, line: String, stream: String = "") {
        // Only av_log's own "[name @ 0x…] " goes: a message that merely begins with a bracket keeps it.
        var message = line
        if line.hasPrefix("["), let close = line.firstIndex(of: "]"), line[..<close].contains(" @ 0x") {
            message = String(line[line.index(after: close)...].drop { $0 == " " })
        }
        log.withLock { routing in
            // Mutated in place (`routing!`): a copy would copy the limiter's tables at every line.
            guard routing != nil,
                  let suffix = routing!.limiter.admit(stream: stream, level: level, message: message, now: monotonicNanoseconds())
            else { return }
            routing!.logger.log(level: level <= AV_LOG_ERROR ? .error : .warning, "\(message)\(suffix)",
                       metadata: stream.isEmpty ? nil : ["stream": "\(stream)"])
        }
    }
}
