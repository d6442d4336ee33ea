import ArgumentParser
import FrameFormats
import Glibc
import SharedFrames

/// `streamrecvctl cat NAME`: decoded frames to standard output (or files) as y4m or raw video.
struct CatCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cat",
        abstract: "Write a stream's frames as y4m (planar) or raw video.",
        discussion: """
            Starts with the next frame published; waits for the ring when the daemon has not made it yet. A y4m stream cannot change size or pixel format: at such a change \
            writing to standard output ends with exit status 3, while --output PATTERN (e.g. seg%d.y4m) starts a new \
            file per format segment. Frames skipped because this reader fell behind are reported on standard error.
            Exit status: 0 after --frames frames, 1 when the object is not a ring, 2 on --timeout (no ring, or no \
            frame, for that long), 3 at a format \
            change on standard output, 4 when the format cannot be written as y4m, 5 when the daemon stopped, \
            6 when a slot holds no valid frame (a damaged or forged ring).
            """)

    /// `yuv` is `raw` under the name ffplay users look for (`ffplay -f rawvideo -pix_fmt nv12 -video_size WxH`).
    enum Format: String, ExpressibleByArgument { case y4m, raw, yuv }

    @OptionGroup var stream: StreamLocation

    @Option(help: "Stop after this many frames.")
    var frames: Int?

    @Option(help: "y4m (planar, for ffmpeg/ffplay -f yuv4mpegpipe), or raw / yuv: the published layout (e.g. nv12) with no header, as ffplay -f rawvideo -pix_fmt FORMAT -video_size WxH plays it.")
    var format: Format = .y4m

    @Option(help: "Give up when the ring does not appear, or no frame arrives, for this many seconds (default: wait for ever).")
    var timeout: Double?

    @Option(help: "Write to files instead of standard output; %d is replaced by the format segment (0, 1, …).")
    var output: String?

    func validate() throws { try Seconds.validate(timeout, "--timeout") }

    func run() throws {
        signal(SIGPIPE, SIG_IGN)  // a closed pipe ends the output with EPIPE, handled below
        let reader = try stream.attach(waitingUpTo: timeout)
        var writer = SegmentWriter(pattern: output)
        var previous = reader.latestSequence
        // The frame as it goes out, made from the slot where the frame lies (no copy of the slot first), and
        // written only once the frame was seen whole: a frame the writer overtook is made again from the next.
        var outgoing: [UInt8] = []
        var written = 0
        var header: FrameLayout?
        printError("streamrecvctl: reading /dev/shm/\(StatusCommand.printable(reader.shmName)) after frame \(previous)")
        let timeoutNanoseconds = timeout.map(Seconds.nanoseconds) ?? Int64.max / 2
        while frames.map({ written < $0 }) ?? true {
            var skipped: UInt64 = 0
            let outcome = reader.nextBorrowed(after: previous, timeoutNanoseconds: timeoutNanoseconds, stopWhenStopped: false, skipped: &skipped) { info, pixels in
                if format == .y4m {
                    PlanarConversion.planar(pixels, layout: info.layout, into: &outgoing)
                } else {
                    PlanarConversion.packed(pixels, layout: info.layout, into: &outgoing)
                }
            }
            switch outcome {
            case .timedOut:
                printError("streamrecvctl: no frame for \(timeout ?? 0) s")
                throw ExitCode(2)
            case .stopped:
                printError("streamrecvctl: the stream's writer is gone")
                throw ExitCode(5)
            case .invalidFrame(let sequence):
                let why = reader.objectShrank ? "the object shrank under the reader: truncated by its owner or root" : "a damaged or forged ring"
                printError("streamrecvctl: frame \(sequence) of /dev/shm/\(StatusCommand.printable(reader.shmName)) is not a valid frame (\(why))")
                throw ExitCode(6)
            case .frame(let info):
                if skipped > 0 { printError("streamrecvctl: lapped: \(skipped) frame(s) skipped before frame \(info.sequence)") }
                previous = info.sequence
                let layout = info.layout
                if header.map({ $0.format != layout.format || $0.width != layout.width || $0.height != layout.height }) ?? true {
                    if header != nil && output == nil && format == .y4m {
                        printError("streamrecvctl: format changed to \(layout.width)x\(layout.height) \(layout.format) at frame \(info.sequence); y4m on standard output ends here (use --output PATTERN)")
                        throw ExitCode(3)
                    }
                    try writer.startSegment()
                    if format == .y4m {
                        guard let colourSpace = PlanarConversion.y4mColourSpace(layout.format) else {
                            printError("streamrecvctl: \(layout.format) cannot be written as y4m; use --format raw")
                            throw ExitCode(4)
                        }
                        let sar = info.sarNumerator > 0 ? "\(info.sarNumerator):\(info.sarDenominator)" : "0:0"
                        try writer.write(Array("YUV4MPEG2 W\(layout.width) H\(layout.height) F25:1 Ip A\(sar) C\(colourSpace)\n".utf8))
                    }
                    header = layout
                }
                if format == .y4m { try writer.write(Array("FRAME\n".utf8)) }
                try writer.write(outgoing)
                written += 1
            }
        }
    }
}

/// Standard output, or one file per format segment.
struct SegmentWriter {
    let pattern: String?
    private var descriptor: Int32 = 1
    private var segment = -1

    init(pattern: String?) { self.pattern = pattern }

    mutating func startSegment() throws {
        segment += 1
        guard let pattern else { return }
        if descriptor != 1 { close(descriptor) }
        let path = pattern.replacingOccurrences(of: "%d", with: String(segment))
        descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw ValidationError("cannot create \(path): \(String(cString: strerror(errno)))") }
    }

    func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                if errno == EPIPE { throw ExitCode(0) }
                throw ValidationError("write failed: \(String(cString: strerror(errno)))")
            }
            offset += written
        }
    }
}

extension String {
    func replacingOccurrences(of target: String, with replacement: String) -> String {
        split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}

func printError(_ text: String) {
    let line = text + "\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
}
