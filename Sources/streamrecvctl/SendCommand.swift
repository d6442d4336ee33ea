import ArgumentParser
import StreamSending

/// `streamrecvctl send SOURCE URL`: a file sent as a live encoder would, to test the whole chain without one.
struct SendCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send a video file's H.264/H.265 stream to a receiver over tcp://, udp:// or rtp://, paced.",
        discussion: """
            SOURCE is an MP4/MOV/MKV file (demuxed with libavformat; AVCC/HVCC converted to Annex B with the \
            parameter sets in front of every keyframe) or an Annex B .h264/.h265 file. tcp:// and udp:// carry raw \
            Annex B (udp: 1316-byte datagrams); rtp:// carries RTP (RFC 6184/7798, payload type 96, 1200-byte \
            packets). --to-file writes the Annex B stream instead of sending it.
            Examples: streamrecvctl send clip.mp4 tcp://127.0.0.1:5000
                      streamrecvctl send clip.mp4 --to-file clip.h264
            """)

    @Argument(help: "The video file.")
    var source: String

    @Argument(help: "tcp://HOST:PORT, udp://HOST:PORT or rtp://HOST:PORT.")
    var url: String?

    @Option(help: "realtime (the file's own timing), max (as fast as possible) or a number of frames per second.")
    var rate: String = "realtime"

    @Flag(help: "Send the file again and again until interrupted (or --duration).")
    var loop = false

    @Option(help: "Stop after this many seconds.")
    var duration: Double?

    @Option(name: .customLong("to-file"), help: "Write the Annex B stream to this file instead of sending it (rate defaults to max).")
    var toFile: String?

    func validate() throws {
        guard (url == nil) != (toFile == nil) else { throw ValidationError("give either a URL or --to-file FILE") }
        if let url, !["tcp://", "udp://", "rtp://"].contains(where: url.hasPrefix) {
            throw ValidationError("the URL must start with tcp://, udp:// or rtp://")
        }
        _ = try parsedRate()
        try Seconds.validate(duration, "--duration")
    }

    private func parsedRate() throws -> SendRate {
        switch rate {
        case "realtime": return toFile != nil ? .maximum : .realtime
        case "max": return .maximum
        default:
            guard let fps = Double(rate), fps > 0, fps <= 10000 else { throw ValidationError("--rate must be realtime, max or a number of frames per second") }
            return .framesPerSecond(fps)
        }
    }

    func run() throws {
        let sender = ElementaryStreamSender(
            source: source, destination: toFile ?? url!, rate: try parsedRate(), loops: loop ? 0 : 1, duration: duration)
        do {
            let summary = try sender.run()
            printError("streamrecvctl: sent \(summary.accessUnits) \(summary.codec) access units (\(summary.bytes) bytes) to \(toFile ?? url!)")
        } catch {
            printError("streamrecvctl: \(error)")
            throw ExitCode(1)
        }
    }
}
