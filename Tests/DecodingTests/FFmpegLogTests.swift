import CFFmpeg
import Foundation
@testable import Decoding
import Logging
import StreamrecvTestSupport
import Testing

/// libavcodec's log routed into a Logger: levels mapped, the `[h264 @ 0x…]` prefix dropped, the stream named,
/// repeats limited with the count of those left out, errors counted per decoder.
/// Routing is process-wide and cannot be undone (the daemon routes once at start), so it is done once for every
/// test here, and each test reads only the lines of a stream name of its own: other suites' decoders log too.
@Suite struct FFmpegLogTests {
    struct Line: Equatable, CustomStringConvertible {
        var level: Logger.Level
        var message: String
        var stream: String?
        var description: String { "\(level) \(message) [\(stream ?? "-")]" }
    }

    static let captured: CapturedLines = {
        let lines = CapturedLines()
        FFmpegLog.route(to: lines.logger(label: "libavcodec"))
        return lines
    }()

    static func lines(of stream: String) -> [Line] {
        captured.all.map { Line(level: $0.level, message: $0.message, stream: $0.metadata["stream"]?.description) }
            .filter { $0.stream == stream }
    }

    /// av_log through libavutil itself (its C variadic form cannot be called from Swift).
    static func log(_ context: UnsafeMutableRawPointer?, _ level: Int32, _ format: String, _ arguments: CVarArg...) {
        withVaList(arguments) { av_vlog(context, level, format, $0) }
    }

    @Test func errorsAndWorseAreErrorsWarningsAreWarnings() {
        _ = Self.captured
        let stream = "levels"
        for (level, message) in [(AV_LOG_PANIC, "panic"), (AV_LOG_FATAL, "fatal"), (AV_LOG_ERROR, "error"), (AV_LOG_WARNING, "warning")] {
            FFmpegLog.receive(level: level, line: message, stream: stream)
        }
        #expect(Self.lines(of: stream) == [
            Line(level: .error, message: "panic", stream: stream), Line(level: .error, message: "fatal", stream: stream),
            Line(level: .error, message: "error", stream: stream), Line(level: .warning, message: "warning", stream: stream),
        ])
    }

    /// The context prefix names a pointer, not a stream: it goes, the spaces after it too, the rest is kept as is.
    @Test func theContextPrefixIsDroppedAndTheStreamNamed() {
        _ = Self.captured
        let stream = "prefix"
        FFmpegLog.receive(level: AV_LOG_ERROR, line: "[h264 @ 0x55d0c8a0]   error while decoding MB 3 4, bytestream 9", stream: stream)
        FFmpegLog.receive(level: AV_LOG_WARNING, line: "no prefix [kept] here", stream: stream)
        // A message of no context that begins with a bracket is no prefix: it used to lose "[tag]", or all of it.
        FFmpegLog.receive(level: AV_LOG_WARNING, line: "[tag] no context here", stream: stream)
        FFmpegLog.receive(level: AV_LOG_WARNING, line: "[unterminated context", stream: stream)
        #expect(Self.lines(of: stream).map(\.message) == ["error while decoding MB 3 4, bytestream 9", "no prefix [kept] here",
                                                           "[tag] no context here", "[unterminated context"])
    }

    /// One line per kind (numbers aside); the next line admitted says how many were left out; at most four lines
    /// per stream per interval; another stream has its own budget.
    @Test func repeatsAreLimitedAndTheNextLineCountsThem() {
        _ = Self.captured
        let stream = "limited"
        for row in 0..<3 {
            FFmpegLog.receive(level: AV_LOG_ERROR, line: "[h264 @ 0x\(row)1f] error while decoding MB \(row) 7", stream: stream)
        }
        let kinds = ["cbp too large (3) at 1 1", "mb_type 40 in P slice too large at 2 3", "out of range intra chroma pred mode",
                     "negative number of zero coeffs at 1 2"]
        for kind in kinds {
            FFmpegLog.receive(level: AV_LOG_ERROR, line: kind, stream: stream)
        }
        FFmpegLog.receive(level: AV_LOG_ERROR, line: "error while decoding MB 1 1", stream: "limited-other")
        #expect(Self.lines(of: stream).map(\.message) == [
            "error while decoding MB 0 7", "cbp too large (3) at 1 1 (2 more libavcodec messages suppressed)",
            "mb_type 40 in P slice too large at 2 3", "out of range intra chroma pred mode",
        ])
        #expect(Self.lines(of: "limited-other").map(\.message) == ["error while decoding MB 1 1"])
    }

    /// Lines libavutil formats for a watched context: no prefix, the stream named, errors (not warnings) counted for
    /// that context; below the routed level nothing arrives; unwatched, nothing is counted.
    @Test func libavutilsLinesForAWatchedContextAreNamedAndItsErrorsCounted() throws {
        _ = Self.captured
        #expect(FFmpegLog.isRouted)
        var context: UnsafeMutablePointer<AVCodecContext>? = try #require(avcodec_alloc_context3(nil))
        defer { avcodec_free_context(&context) }
        let watched = [UnsafeMutableRawPointer(context!)]
        let stream = "watched"
        FFmpegLog.watch(watched, stream: stream)
        Self.log(watched[0], AV_LOG_ERROR, "bad slice %d\n", Int32(3))
        Self.log(watched[0], AV_LOG_WARNING, "odd thing\r\n")
        Self.log(watched[0], AV_LOG_INFO, "chatter\n")
        #expect(Self.lines(of: stream) == [Line(level: .error, message: "bad slice 3", stream: stream),
                                           Line(level: .warning, message: "odd thing", stream: stream)])
        #expect(FFmpegLog.errors(of: watched) == 1)
        FFmpegLog.unwatch(watched)
        Self.log(watched[0], AV_LOG_ERROR, "after unwatching\n")
        #expect(FFmpegLog.errors(of: watched) == 0)
        #expect(Self.lines(of: stream).count == 2, "an unwatched context's lines name no stream")
    }

    /// A decoder fed an IDR slice header followed by noise: libavcodec's complaints come out under the decoder's
    /// stream, and count for that decoder only (another decoding a clean clip meanwhile counts none).
    @Test func aDecoderCountsTheErrorsLibavcodecLogsForIt() throws {
        _ = Self.captured
        let inputs = decoderInputs(try encode("h264", size: "64x48", frames: 2, parameters: "bframes=0"))
        func decoder(_ stream: String) throws -> VideoDecoder {
            try VideoDecoder(codec: .h264, configuration: DecoderConfiguration(hardware: .none), parameterSets: inputs[0].parameterSets,
                             reorderDepth: 0, lowDelay: true, assumedReorderDepth: 0, hardware: nil, stream: stream)
        }
        let damaged = try decoder("decoder-damaged")
        let clean = try decoder("decoder-clean")
        var generator = SeededGenerator(seed: 11)
        let slice: [UInt8] = [0, 0, 0, 1, 0x65, 0x88, 0x84] + (0..<300).map { _ in UInt8.random(in: 0...255, using: &generator) }
        _ = slice.withUnsafeBytes { damaged.send($0, pts: 0) }
        for input in inputs {
            _ = input.data.withUnsafeBytes { clean.send($0, pts: input.pts) }
            _ = clean.receive { _ in }
        }
        #expect(damaged.loggedErrors > 0)
        #expect(clean.loggedErrors == 0)
        let lines = Self.lines(of: "decoder-damaged")
        #expect(!lines.isEmpty && lines.allSatisfy { $0.level == .error && !$0.message.hasPrefix("[") }, "\(lines)")
    }

    /// With frame threads libavcodec decodes, and logs, through copies of the decoder's context that only it knows:
    /// those lines are still the decoder's (found by the context's `opaque`), counted and named. They were neither.
    @Test func aFrameThreadedDecoderCountsWhatItsThreadsLog() throws {
        _ = Self.captured
        let inputs = decoderInputs(try encode("h264", size: "64x48", frames: 4, parameters: "bframes=0"))
        let decoder = try VideoDecoder(
            codec: .h264, configuration: DecoderConfiguration(threading: .frame, threads: 2, hardware: .none),
            parameterSets: inputs[0].parameterSets, reorderDepth: 0, lowDelay: false, assumedReorderDepth: 0,
            hardware: nil, stream: "decoder-frame-threads")
        var generator = SeededGenerator(seed: 12)
        let noise: [UInt8] = [0, 0, 0, 1, 0x65, 0x88, 0x84] + (0..<300).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for (pts, data) in inputs.map({ ($0.pts, $0.data) }) + [(Int64(99), noise), (Int64(100), noise)] {
            _ = data.withUnsafeBytes { decoder.send($0, pts: pts) }
            _ = decoder.receive { _ in }
        }
        _ = decoder.sendEndOfStream()
        var outcome = ReceiveOutcome.frame
        while case .frame = outcome { outcome = decoder.receive { _ in } }
        #expect(decoder.activeThreading.hasPrefix("frame threads"), "\(decoder.activeThreading)")
        #expect(decoder.loggedErrors > 0)
        #expect(!Self.lines(of: "decoder-frame-threads").isEmpty)
    }
    /// Hardware probing silences its own thread's lines only, and leaves the process's level alone: it used to set
    /// the level to QUIET and back, and two probes at once could leave it at QUIET, every decoder's errors uncounted.
    @Test func quietlySilencesItsOwnThreadOnly() throws {
        _ = Self.captured
        var context: UnsafeMutablePointer<AVCodecContext>? = try #require(avcodec_alloc_context3(nil))
        defer { avcodec_free_context(&context) }
        let watched = UnsafeMutableRawPointer(context!)
        let stream = "quiet-probe"
        FFmpegLog.watch([watched], stream: stream)
        defer { FFmpegLog.unwatch([watched]) }
        let level = av_log_get_level()
        FFmpegLog.quietly {
            #expect(av_log_get_level() == level)
            Self.log(watched, AV_LOG_ERROR, "dropped while quiet\n")
            // Another thread meanwhile is heard.
            let address = UInt(bitPattern: watched)
            let other = Thread { Self.log(UnsafeMutableRawPointer(bitPattern: address), AV_LOG_ERROR, "another thread is heard\n") }
            other.start()
            while !other.isFinished { usleep(1000) }
        }
        Self.log(watched, AV_LOG_ERROR, "heard again\n")
        #expect(Self.lines(of: stream).map(\.message) == ["another thread is heard", "heard again"])
        #expect(FFmpegLog.errors(of: [watched]) == 2)
        #expect(av_log_get_level() == level)
    }
}
