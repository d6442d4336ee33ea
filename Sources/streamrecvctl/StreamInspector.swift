import Bitstream

/// Runs an Annex B stream through the splitter and the access-unit assembler and describes what it sees:
/// one record per access unit and per new or changed parameter set, then a summary.
struct StreamInspector {
    enum Record {
        case accessUnit(index: Int, offset: Int64, size: Int64, unit: AccessUnit)
        case parameterSet(offset: Int64, ParameterSetEvent)
        case problem(AssemblerProblem)
        case summary(Summary)
    }

    struct Summary {
        var codec: VideoCodec?
        var bytes: Int64
        var accessUnits: Int
        var keyframes: Int
        var splitter: AnnexBSplitter.Statistics
        var assembler: AccessUnitAssembler.Statistics
    }

    private var splitter: AnnexBSplitter
    private var assembler: AccessUnitAssembler
    /// An access unit is described once the next one's offset (or the end of input) gives its size.
    private var waiting: AccessUnit?
    /// Parameter sets and problems seen while an access unit waits: they lie after it in the stream, so they are
    /// written after it (the assembler hands out an access unit only once the next one has begun).
    private var followingWaiting: [Record] = []
    private var accessUnits = 0
    private var keyframes = 0
    private let output: (Record) -> Void

    init(codec: VideoCodec?, maximumNALUnitSize: Int, output: @escaping (Record) -> Void) {
        splitter = AnnexBSplitter(maximumNALUnitSize: maximumNALUnitSize)
        assembler = AccessUnitAssembler(codec: codec)
        self.output = output
    }

    mutating func append(_ chunk: ArraySlice<UInt8>) {
        var units: [NALUnit] = []
        splitter.append(chunk) { units.append($0) }
        for unit in units { push(unit) }
    }

    mutating func finish() -> Summary {
        var units: [NALUnit] = []
        splitter.flush { units.append($0) }
        for unit in units { push(unit) }
        var events: [AssemblerEvent] = []
        assembler.endAccessUnit { events.append($0) }
        for event in events { handle(event, at: splitter.statistics.bytesIn) }
        describeWaiting(endingAt: splitter.statistics.bytesIn)
        let summary = Summary(
            codec: assembler.codec, bytes: splitter.statistics.bytesIn, accessUnits: accessUnits,
            keyframes: keyframes, splitter: splitter.statistics, assembler: assembler.statistics)
        output(.summary(summary))
        return summary
    }

    private mutating func push(_ unit: NALUnit) {
        var events: [AssemblerEvent] = []
        assembler.push(unit) { events.append($0) }
        for event in events { handle(event, at: unit.startCodeOffset) }
    }

    private mutating func handle(_ event: AssemblerEvent, at offset: Int64) {
        switch event {
        case .codecDetected:
            break
        case .parameterSet(let parameterSet):
            inStreamOrder(.parameterSet(offset: offset, parameterSet))
        case .accessUnit(let unit):
            describeWaiting(endingAt: unit.streamOffset)
            waiting = unit
        case .problem(let problem):
            inStreamOrder(.problem(problem))
        }
    }

    private mutating func inStreamOrder(_ record: Record) {
        if waiting == nil { output(record) } else { followingWaiting.append(record) }
    }

    private mutating func describeWaiting(endingAt end: Int64) {
        guard let unit = waiting else { return }
        waiting = nil
        if unit.isKeyframe { keyframes += 1 }
        output(.accessUnit(index: accessUnits, offset: unit.streamOffset, size: end - unit.streamOffset, unit: unit))
        accessUnits += 1
        for record in followingWaiting { output(record) }
        followingWaiting.removeAll()
    }
}
