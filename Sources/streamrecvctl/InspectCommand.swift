import ArgumentParser
import Bitstream
#if canImport(Glibc)
import Glibc
#endif

/// `streamrecvctl inspect FILE|-`: what is this sender sending?
struct InspectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Describe the access units and parameter sets of an Annex B H.264/H.265 stream.",
        discussion: "Reads FILE, or standard input for '-'. The --json format is documented in docs/inspect.md."
    )

    @Argument(help: "An Annex B elementary stream file, or '-' for standard input.")
    var input: String

    @Option(help: "h264, h265, or auto (recognised from the first parameter set).")
    var codec: String = "auto"

    @Flag(help: "One JSON object per line instead of a table.")
    var json = false

    @Option(help: "Largest NAL unit accepted, in bytes; larger ones are discarded and counted.")
    var maxNalSize: Int = 16 << 20

    @Flag(help: "Leave out the per-access-unit records (parameter sets, problems and the summary remain).")
    var summaryOnly = false

    func validate() throws {
        guard codec == "auto" || VideoCodec(rawValue: codec) != nil else {
            throw ValidationError("--codec must be h264, h265 or auto, not '\(codec)'")
        }
        guard maxNalSize > 0 else { throw ValidationError("--max-nal-size must be positive") }
    }

    func run() throws {
        let descriptor: Int32 = input == "-" ? 0 : open(input, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw ValidationError("cannot open \(input): \(String(cString: strerror(errno)))")
        }
        defer { if descriptor != 0 { close(descriptor) } }
        let formatter = InspectFormatter(json: json, summaryOnly: summaryOnly)
        var inspector = StreamInspector(codec: VideoCodec(rawValue: codec), maximumNALUnitSize: maxNalSize) {
            formatter.write($0)
        }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw ValidationError("cannot read \(input): \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            inspector.append(buffer[0..<count])
        }
        _ = inspector.finish()
    }
}
