import Bitstream
import Glibc
import StreamrecvTestSupport

/// Reads a whole file (corpus or generated stream).
func readBytes(_ path: String) -> [UInt8] {
    guard let file = fopen(path, "rb") else { return [] }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while case let count = fread(&buffer, 1, buffer.count, file), count > 0 { bytes += buffer[0..<count] }
    return bytes
}

/// Everything the splitter and assembler produce for a stream.
struct Assembled {
    var accessUnits: [AccessUnit] = []
    var parameterSets: [ParameterSetEvent] = []
    var problems: [AssemblerProblem] = []
    var codec: VideoCodec?
    var statistics = AccessUnitAssembler.Statistics()
    var splitterStatistics = AnnexBSplitter.Statistics()
}

func assemble(
    _ stream: [UInt8], codec: VideoCodec? = nil, chunkSize: Int = 4096,
    maximumNALUnitSize: Int = 1 << 20, maximumAccessUnitSize: Int = 8 << 20
) -> Assembled {
    var splitter = AnnexBSplitter(maximumNALUnitSize: maximumNALUnitSize)
    var assembler = AccessUnitAssembler(codec: codec, maximumAccessUnitSize: maximumAccessUnitSize)
    var result = Assembled()
    let collect: (AssemblerEvent) -> Void = { event in
        switch event {
        case .accessUnit(let unit): result.accessUnits.append(unit)
        case .parameterSet(let set): result.parameterSets.append(set)
        case .problem(let problem): result.problems.append(problem)
        case .codecDetected(let codec): result.codec = codec
        }
    }
    var offset = 0
    while offset < stream.count {
        let end = min(stream.count, offset + chunkSize)
        var units: [NALUnit] = []
        splitter.append(stream[offset..<end]) { units.append($0) }
        for unit in units { assembler.push(unit, collect) }
        offset = end
    }
    var units: [NALUnit] = []
    splitter.flush { units.append($0) }
    for unit in units { assembler.push(unit, collect) }
    assembler.endAccessUnit(collect)
    result.statistics = assembler.statistics
    result.splitterStatistics = splitter.statistics
    return result
}

