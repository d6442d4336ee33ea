import Bitstream
import StreamrecvTestSupport
@testable import streamrecvctl
import Testing

/// Hand-made H.264 NAL units (no encoder needed; `Build` in Tests/Support): Baseline SPS (POC type 2, 4-bit
/// frame_num), PPS, slices, and an orientation SEI.
enum HandBuilt {
    /// 320x240 unless cropped; `timing` is (num_units_in_tick, time_scale).
    static func sps(id: UInt64 = 0, widthInMbs: UInt64 = 20, heightInMbs: UInt64 = 15, cropBottom: UInt64 = 0,
                    timing: (UInt32, UInt32)? = nil) -> [UInt8] {
        Build.h264SPS(id: id, widthInMbs: widthInMbs, heightInMapUnits: heightInMbs,
                      crop: cropBottom > 0 ? (0, 0, 0, cropBottom) : nil, timing: timing)
    }

    static func pps(id: UInt64 = 0, spsId: UInt64 = 0) -> [UInt8] { Build.h264PPS(id: id, spsId: spsId) }

    /// One slice, with filler after its header (the inspector never decodes it).
    static func slice(idr: Bool, frameNum: UInt64, firstMb: UInt64 = 0) -> [UInt8] {
        Build.h264Slice(idr: idr, frameNum: frameNum, firstMb: firstMb)
    }

    /// A display orientation SEI (payload type 47): flips, and rotation anticlockwise in 1/65536 of a turn.
    static func orientationSEI(hflip: Bool, vflip: Bool, rotation: UInt64) -> [UInt8] {
        var w = BitWriter()
        w.flag(false)  // display_orientation_cancel_flag
        w.flag(hflip)
        w.flag(vflip)
        w.u(16, rotation)
        w.ue(0)  // display_orientation_repetition_period
        w.flag(false)  // display_orientation_extension_flag
        w.trailingBits()
        return Build.sei(codec: .h264, type: 47, payload: w.bytes)
    }

    /// SPS, PPS, an IDR picture, then `pictures - 1` P pictures.
    static func stream(pictures: Int) -> [UInt8] {
        annexB([sps(), pps()] + (0..<pictures).map { slice(idr: $0 == 0, frameNum: UInt64($0)) })
    }
}

/// Runs `stream` through an inspector, `chunk` bytes at a time, and returns what it wrote and its summary.
func inspected(_ stream: [UInt8], codec: VideoCodec? = nil, chunk: Int = 1 << 20, maximumNALUnitSize: Int = 1 << 20)
    -> (records: [StreamInspector.Record], summary: StreamInspector.Summary)
{
    var records: [StreamInspector.Record] = []
    var inspector = StreamInspector(codec: codec, maximumNALUnitSize: maximumNALUnitSize) { records.append($0) }
    var offset = 0
    while offset < stream.count {
        inspector.append(stream[offset..<min(stream.count, offset + chunk)])
        offset += chunk
    }
    let summary = inspector.finish()
    return (records, summary)
}

extension StreamInspector.Record {
    /// A short, comparable description: "au index offset size", "sps id offset", "problem kind offset", "summary".
    var label: String {
        switch self {
        case .accessUnit(let index, let offset, let size, _): return "au \(index) \(offset) \(size)"
        case .parameterSet(let offset, let event): return "\(event.kind.rawValue) \(event.id) \(offset)"
        case .problem(let problem): return "problem \(problem.kind.rawValue) \(problem.streamOffset)"
        case .summary: return "summary"
        }
    }

    var unit: AccessUnit? { if case .accessUnit(_, _, _, let unit) = self { unit } else { nil } }
}

@Suite struct StreamInspectorTests {
    @Test func accessUnitsTileTheInputAndParameterSetsAreReportedAtTheirStartCodes() throws {
        let units = [HandBuilt.sps(), HandBuilt.pps(), HandBuilt.slice(idr: true, frameNum: 0),
                     HandBuilt.slice(idr: false, frameNum: 1), HandBuilt.slice(idr: false, frameNum: 2)]
        let stream = annexB(units)
        // Start-code offsets of each NAL unit (4-byte start codes).
        var starts: [Int] = []
        var position = 0
        for unit in units {
            starts.append(position)
            position += 4 + unit.count
        }
        let (records, summary) = inspected(stream)
        #expect(records.map(\.label) == [
            "sps 0 0", "pps 0 \(starts[1])",
            "au 0 0 \(starts[3])", "au 1 \(starts[3]) \(starts[4] - starts[3])",
            "au 2 \(starts[4]) \(stream.count - starts[4])", "summary",
        ])
        let accessUnits = records.compactMap(\.unit)
        #expect(accessUnits.map(\.nalUnitTypes) == [[7, 8, 5], [1], [1]])
        #expect(accessUnits.map(\.randomAccess) == [.idr, nil, nil])
        // Only the last one is ended by the end of input.
        #expect(accessUnits.map(\.end) == [.nextAccessUnit, .nextAccessUnit, .explicit])
        #expect(summary.codec == .h264 && summary.bytes == Int64(stream.count))
        #expect(summary.accessUnits == 3 && summary.keyframes == 1)
        #expect(summary.assembler.nalUnits == 5)
    }

    /// The splitter keeps state across chunks: what is reported must not depend on how the input was read.
    @Test(arguments: [1, 3, 7, 64])
    func chunkSizeDoesNotChangeTheRecords(chunk: Int) {
        let stream = HandBuilt.stream(pictures: 6)
        let whole = inspected(stream)
        let pieces = inspected(stream, chunk: chunk)
        #expect(pieces.records.map(\.label) == whole.records.map(\.label))
        #expect(pieces.summary.bytes == whole.summary.bytes && pieces.summary.accessUnits == 6)
    }

    @Test func theSummaryIsTheLastRecordAndEqualsWhatFinishReturns() throws {
        let (records, summary) = inspected(HandBuilt.stream(pictures: 4))
        guard case .summary(let written) = try #require(records.last) else {
            Issue.record("the last record is \(records.last!.label), not the summary")
            return
        }
        #expect(written.bytes == summary.bytes && written.accessUnits == summary.accessUnits)
        #expect(written.assembler == summary.assembler && written.splitter == summary.splitter)
        #expect(records.dropLast().allSatisfy { $0.label != "summary" })
    }

    @Test func emptyInputWritesOnlyASummaryWithNoCodec() {
        let (records, summary) = inspected([])
        #expect(records.map(\.label) == ["summary"])
        #expect(summary.codec == nil && summary.bytes == 0 && summary.accessUnits == 0 && summary.keyframes == 0)
    }

    /// Bytes before the first start code belong to no access unit: the first one begins after them.
    @Test func leadingGarbageIsDiscardedAndTheFirstAccessUnitStartsAfterIt() {
        let garbage: [UInt8] = [0xFF, 0x12, 0x34, 0x56, 0x78]
        let stream = garbage + HandBuilt.stream(pictures: 2)
        let (records, summary) = inspected(stream)
        #expect(summary.splitter.discardedBytes == Int64(garbage.count))
        #expect(records.first?.label == "sps 0 \(garbage.count)")
        let first = records.first { $0.unit != nil }
        #expect(first?.label.hasPrefix("au 0 \(garbage.count) ") == true, "\(first?.label ?? "none")")
    }

    @Test func aNALUnitWithTheForbiddenBitIsAProblemAtItsStartCode() {
        let bad: [UInt8] = [0x80 | 0x41, 0x9A, 0xBC]
        let units = [HandBuilt.sps(), HandBuilt.pps(), HandBuilt.slice(idr: true, frameNum: 0), bad]
        let offset = units.dropLast().reduce(0) { $0 + 4 + $1.count }
        let (records, summary) = inspected(annexB(units))
        #expect(records.contains { $0.label == "problem forbidden_bit \(offset)" }, "\(records.map(\.label))")
        #expect(summary.assembler.forbiddenBitNALUnits == 1)
    }

    @Test func nalUnitsLargerThanTheLimitAreDiscardedAndCounted() {
        let big = HandBuilt.slice(idr: false, frameNum: 1) + [UInt8](repeating: 0x5A, count: 200)
        let stream = annexB([HandBuilt.sps(), HandBuilt.pps(), HandBuilt.slice(idr: true, frameNum: 0), big,
                             HandBuilt.slice(idr: false, frameNum: 2)])
        let (records, summary) = inspected(stream, maximumNALUnitSize: 100)
        #expect(summary.splitter.oversizedNALUnits == 1)
        #expect(summary.splitter.discardedBytes >= 200)
        // The oversized picture is gone: the IDR and frame 2 are left.
        #expect(records.compactMap(\.unit).map(\.nalUnitTypes) == [[7, 8, 5], [1]])
    }

    /// An identical repeat of a parameter set writes nothing; a different one with the same id is a change.
    @Test func repeatedParameterSetsAreCountedAndChangedOnesReported() {
        let stream = annexB([
            HandBuilt.sps(), HandBuilt.pps(), HandBuilt.slice(idr: true, frameNum: 0),
            HandBuilt.sps(), HandBuilt.pps(), HandBuilt.slice(idr: true, frameNum: 0),
            HandBuilt.sps(widthInMbs: 40, heightInMbs: 30), HandBuilt.pps(), HandBuilt.slice(idr: true, frameNum: 0),
        ])
        let (records, summary) = inspected(stream)
        let events = records.compactMap { if case .parameterSet(_, let event) = $0 { event } else { nil } }
        #expect(events.map { "\($0.kind.rawValue)\($0.id)" } == ["sps0", "pps0", "sps0"])
        #expect(events.map(\.isChange) == [false, false, true])
        #expect(events.last?.changes?.contains(.size) == true)
        #expect(events.last?.format.map { "\($0.width)x\($0.height)" } == "640x480")
        #expect(summary.assembler.parameterSetRepeats == 3)
        #expect(summary.accessUnits == 3 && summary.keyframes == 3)
    }

    /// docs/inspect.md: records are in stream order, an access unit's written once its size is known "when the
    /// next access unit begins". The P picture ends where the changed SPS begins, so its record comes before that
    /// SPS's, although the assembler hands the P picture out only once the SPS has begun the next access unit.
    @Test func anAccessUnitIsReportedBeforeTheParameterSetThatEndsIt() {
        let stream = annexB([
            HandBuilt.sps(), HandBuilt.pps(), HandBuilt.slice(idr: true, frameNum: 0),
            HandBuilt.slice(idr: false, frameNum: 1),
            HandBuilt.sps(widthInMbs: 40, heightInMbs: 30), HandBuilt.pps(), HandBuilt.slice(idr: true, frameNum: 0),
        ])
        let labels = inspected(stream).records.map { $0.label.split(separator: " ").prefix(2).joined(separator: " ") }
        #expect(labels == ["sps 0", "pps 0", "au 0", "au 1", "sps 0", "au 2", "summary"])
    }
}
