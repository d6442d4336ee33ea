import ArgumentParser
import FrameExport
import Glibc
import SharedFrames

/// `streamrecvctl snapshot NAME out.png`: the newest frame as a PNG.
struct SnapshotCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "snapshot",
        abstract: "Write the stream's newest frame as a PNG (8-bit RGB, converted with libswscale).",
        discussion: """
            Takes the newest published frame; when the stream has none yet, waits up to --timeout seconds for one. \
            Pixels are converted as FFmpeg's CLI converts an untagged frame (bicubic chroma, BT.601, the frame's \
            range); the display rotation is not applied. Exit status: 0 written, 2 no frame within --timeout, \
            5 the daemon stopped.
            """)

    @OptionGroup var stream: StreamLocation

    @Argument(help: "The PNG file to write; - for standard output.")
    var output: String

    @Option(help: "Seconds to wait for a first frame.")
    var timeout: Double = 5

    func validate() throws { try Seconds.validate(timeout, "--timeout") }

    func run() throws {
        let reader = try stream.attach()
        var pixels: [UInt8] = []
        let latest = reader.latestSequence
        let outcome = reader.next(after: latest > 0 ? latest - 1 : 0, into: &pixels, timeoutNanoseconds: Seconds.nanoseconds(timeout))
        let info: FrameInfo
        switch outcome {
        case .frame(let frame): info = frame
        case .timedOut:
            printError("streamrecvctl: no frame within \(timeout) s")
            throw ExitCode(2)
        case .stopped:
            printError("streamrecvctl: the stream's writer is gone")
            throw ExitCode(5)
        case .invalidFrame(let sequence):
            printError("streamrecvctl: frame \(sequence) is not a valid frame (a damaged or forged ring)")
            throw ExitCode(6)
        }
        let png: [UInt8]
        do {
            png = try PNGSnapshot.encode(pixels, layout: info.layout, fullRange: info.colorRange == 2)
        } catch {
            printError("streamrecvctl: \(error)")
            throw ExitCode(1)
        }
        var writer = SegmentWriter(pattern: output == "-" ? nil : output)
        try writer.startSegment()
        try writer.write(png)
        if output != "-" {
            printError("streamrecvctl: frame \(info.sequence) (\(info.layout.width)x\(info.layout.height) \(info.layout.format)) written to \(output)")
        }
    }
}

/// `streamrecvctl wait NAME`: blocks until the stream has a frame, for scripts.
struct WaitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wait",
        abstract: "Wait until the stream has a frame (exit status 0), for scripts.",
        discussion: """
            Waits for the stream's shared-memory ring to exist (the daemon may still be starting) and to hold a \
            frame; with --new, for a frame published after the command started. Prints nothing unless --verbose. \
            Exit status: 0 a frame is there, 1 the object is not a ring, 2 --timeout passed, 5 the daemon stopped \
            (--new only).
            """)

    @OptionGroup var stream: StreamLocation

    @Option(help: "Give up after this many seconds (default: wait forever).")
    var timeout: Double?

    @Flag(help: "Wait for a frame newer than the newest one now.")
    var new = false

    @Flag(help: "Say which frame arrived.")
    var verbose = false

    func validate() throws { try Seconds.validate(timeout, "--timeout") }

    func run() throws {
        let start = MonotonicClock.nanoseconds()
        let deadline = timeout.map { start + UInt64(Seconds.nanoseconds($0)) } ?? UInt64.max
        let ring: FrameRingReader
        do {
            guard let found = try FrameRingReader.waitingForRing(shmName: stream.shmName!, timeoutNanoseconds: timeout.map(Seconds.nanoseconds))
            else { throw ExitCode(2) }
            ring = found
        } catch let error as AttachError {
            if verbose { printError("streamrecvctl: \(StatusCommand.printable("\(error)"))") }
            throw ExitCode(1)
        }
        let after = new ? ring.latestSequence : 0
        if !new && ring.latestSequence > 0 { return report(ring.latestSequence) }
        var pixels: [UInt8] = []
        let now = MonotonicClock.nanoseconds()
        let remaining = deadline == UInt64.max ? Int64.max / 2 : Int64(deadline > now ? deadline - now : 0)
        switch ring.next(after: after, into: &pixels, timeoutNanoseconds: remaining, stopWhenStopped: new) {
        case .frame(let info): report(info.sequence)
        case .timedOut: throw ExitCode(2)
        case .stopped: throw ExitCode(5)
        case .invalidFrame: throw ExitCode(6)
        }
    }

    private func report(_ sequence: UInt64) {
        if verbose { print("frame \(sequence)") }
    }
}
