import Bitstream
import Foundation
import StreamrecvTestSupport
@testable import streamrecvctl
import Testing

/// The records a hand-made stream gives, by label ("sps 0 0", "au 1 …", "summary", see StreamInspectorTests).
private func records(_ units: [[UInt8]]) -> [StreamInspector.Record] {
    inspected(annexB(units)).records
}

private func record(_ prefix: String, in records: [StreamInspector.Record]) throws -> StreamInspector.Record {
    try #require(records.first { $0.label.hasPrefix(prefix) }, "no record \(prefix) in \(records.map(\.label))")
}

/// An access unit with nothing but what the formatter reads.
private func unit(_ types: [UInt8], randomAccess: RandomAccessKind? = nil, orientation: DisplayOrientation?? = nil)
    -> AccessUnit
{
    AccessUnit(codec: .h264, data: [], nalUnitTypes: types, streamOffset: 0, sliceCount: 1, randomAccess: randomAccess,
               ppsId: 3, format: nil, parameterSets: nil, displayOrientation: orientation, end: .endOfSequence)
}

private func summary(codec: VideoCodec?, discarded: Int64 = 0, sliceHeaderErrors: Int = 0) -> StreamInspector.Summary {
    var splitter = AnnexBSplitter.Statistics()
    splitter.discardedBytes = discarded
    var assembler = AccessUnitAssembler.Statistics()
    assembler.nalUnits = 12
    assembler.parameterSetRepeats = 2
    assembler.sliceHeaderErrors = sliceHeaderErrors
    return StreamInspector.Summary(codec: codec, bytes: 4321, accessUnits: 9, keyframes: 1, splitter: splitter, assembler: assembler)
}

@Suite struct InspectFormatterTests {
    let json = InspectFormatter(json: true, summaryOnly: false)
    let table = InspectFormatter(json: false, summaryOnly: false)

    // MARK: JSON (docs/inspect.md documents the key order)

    @Test func anAccessUnitIsOneJSONObjectWithTheDocumentedKeysInOrder() {
        let line = json.jsonLine(.accessUnit(index: 4, offset: 1000, size: 250, unit: unit([6, 1], randomAccess: .recoveryPoint)))
        #expect(line == #"{"type":"au","index":4,"offset":1000,"size":250,"nal_types":[6,1],"keyframe":true,"#
            + #""random_access":"recovery_point","slices":1,"pps":3,"end":"end_of_sequence"}"#)
    }

    @Test func aPictureThatIsNoRandomAccessPointHasNullRandomAccess() throws {
        let line = try #require(json.jsonLine(.accessUnit(index: 0, offset: 0, size: 1, unit: unit([1]))))
        #expect(line.contains(#""keyframe":false,"random_access":null,"#))
        #expect(!line.contains("orientation"), "no orientation key without a display orientation SEI")
    }

    /// A cancelling SEI (`.some(nil)`) still writes an orientation: the picture is shown unrotated and unflipped.
    @Test func aCancelledOrientationIsWrittenAsNoRotationAndNoFlip() throws {
        let line = try #require(json.jsonLine(.accessUnit(index: 0, offset: 0, size: 1, unit: unit([6, 1], orientation: .some(nil)))))
        #expect(line.hasSuffix(#","orientation":{"rotation":0.0,"hflip":false,"vflip":false}}"#), "\(line)")
    }

    @Test func anOrientationSEIIsWrittenInDegrees() throws {
        let all = records([HandBuilt.sps(), HandBuilt.pps(), HandBuilt.orientationSEI(hflip: true, vflip: false, rotation: 16384),
                           HandBuilt.slice(idr: true, frameNum: 0)])
        let line = try #require(json.jsonLine(try record("au 0", in: all)))
        #expect(line.hasSuffix(#","orientation":{"rotation":90.0,"hflip":true,"vflip":false}}"#), "\(line)")
    }

    @Test func anSPSIsWrittenWithItsFormat() throws {
        let all = records([HandBuilt.sps(cropBottom: 4, timing: (1, 50)), HandBuilt.pps(), HandBuilt.slice(idr: true, frameNum: 0)])
        let line = try #require(json.jsonLine(try record("sps 0", in: all)))
        // Cropping 4 pairs of rows off the bottom: 320x240 coded, 320x232 shown; 50 / (2 × 1) frames a second.
        #expect(line.hasPrefix(#"{"type":"parameter_set","kind":"sps","id":0,"codec":"h264","offset":0,"#
            + #""width":320,"height":232,"coded_width":320,"coded_height":240,"bit_depth":8,"bit_depth_chroma":8,"#
            + #""chroma_format":"4:2:0","profile":66,"level":30,"fps":25.0,"reorder":"#), "\(line)")
        #expect(line.hasSuffix(#","changed":false}"#), "\(line)")
        #expect(!line.contains("vps_id") && !line.contains("sps_id"), "an H.264 SPS names no VPS")
    }

    @Test func anSPSWithoutTimingHasNullFPS() throws {
        let all = records([HandBuilt.sps(), HandBuilt.pps(), HandBuilt.slice(idr: true, frameNum: 0)])
        let line = try #require(json.jsonLine(try record("sps 0", in: all)))
        #expect(line.contains(#""fps":null,"#), "\(line)")
    }

    @Test func aPPSNamesItsSPSAndHasNoFormat() throws {
        let all = records([HandBuilt.sps(id: 2), HandBuilt.pps(id: 5, spsId: 2), HandBuilt.slice(idr: true, frameNum: 0)])
        let sps = HandBuilt.sps(id: 2)
        let line = json.jsonLine(try record("pps 5", in: all))
        #expect(line == #"{"type":"parameter_set","kind":"pps","id":5,"codec":"h264","offset":\#(4 + sps.count),"sps_id":2,"changed":false}"#)
    }

    @Test func aChangedSPSListsWhatChanged() throws {
        let all = records([HandBuilt.sps(), HandBuilt.pps(), HandBuilt.slice(idr: true, frameNum: 0),
                           HandBuilt.sps(widthInMbs: 40, heightInMbs: 30), HandBuilt.pps(), HandBuilt.slice(idr: true, frameNum: 0)])
        let changed = try #require(all.compactMap { if case .parameterSet(_, let event) = $0, event.isChange { $0 } else { nil } }.first)
        let line = try #require(json.jsonLine(changed))
        #expect(line.hasSuffix(#","changed":true,"changes":["size"]}"#), "\(line)")
        #expect(line.contains(#""width":640,"height":480,"#))
    }

    @Test func aProblemHasItsKindOffsetAndDetail() throws {
        let all = records([HandBuilt.sps(), HandBuilt.pps(), [0xC1, 0x00, 0x01]])
        let offset = 8 + HandBuilt.sps().count + HandBuilt.pps().count
        let line = try #require(json.jsonLine(try record("problem", in: all)))
        #expect(line.hasPrefix(#"{"type":"problem","kind":"forbidden_bit","offset":\#(offset),"detail":""#), "\(line)")
    }

    @Test func theSummaryHasTheDocumentedKeysInOrder() {
        let line = json.jsonLine(.summary(summary(codec: .h265, discarded: 7, sliceHeaderErrors: 1)))
        #expect(line == #"{"type":"summary","codec":"h265","bytes":4321,"access_units":9,"keyframes":1,"nal_units":12,"#
            + #""parameter_set_repeats":2,"discarded_bytes":7,"oversized_nal_units":0,"empty_nal_units":0,"#
            + #""forbidden_bit_nal_units":0,"nal_units_before_codec":0,"rejected_parameter_sets":0,"#
            + #""slice_header_errors":1,"oversized_access_units":0}"#)
    }

    @Test func aStreamWithNoCodecHasANullCodec() throws {
        let line = try #require(json.jsonLine(.summary(summary(codec: nil))))
        #expect(line.hasPrefix(#"{"type":"summary","codec":null,"bytes":4321,"#))
    }

    /// Every record of a whole stream is one line that a JSON parser reads back.
    @Test func everyRecordOfAStreamIsValidJSON() throws {
        let all = records([HandBuilt.sps(timing: (1, 60)), HandBuilt.pps(), HandBuilt.orientationSEI(hflip: false, vflip: true, rotation: 100),
                           HandBuilt.slice(idr: true, frameNum: 0), [0xE1, 0x02], HandBuilt.slice(idr: false, frameNum: 1)])
        #expect(all.map(\.label).map { $0.prefix(2) } == ["sp", "pp", "pr", "au", "au", "su"], "\(all.map(\.label))")
        for record in all {
            let line = try #require(json.jsonLine(record))
            #expect(!line.contains("\n"))
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["type"] as? String != nil, "\(line)")
        }
    }

    @Test func summaryOnlyLeavesOutAccessUnitsAndNothingElse() throws {
        let all = records([HandBuilt.sps(), HandBuilt.pps(), HandBuilt.slice(idr: true, frameNum: 0), [0xC1, 0x00]])
        for format in [InspectFormatter(json: true, summaryOnly: true), InspectFormatter(json: false, summaryOnly: true)] {
            let lines = all.map { format.json ? format.jsonLine($0) : format.tableLine($0) }
            #expect(zip(all, lines).allSatisfy { ($0.0.unit == nil) == ($0.1 != nil) }, "\(lines)")
            #expect(lines.compactMap { $0 }.count == all.count - 1)
        }
    }

    // MARK: Table

    /// Columns as in the table's heading: AU 7, OFFSET 12, SIZE 9, KEY 16, SLICES 7, then the NAL types.
    @Test func anAccessUnitRowHasFixedWidthColumns() {
        let line = table.tableLine(.accessUnit(index: 12, offset: 3456, size: 78, unit: unit([9, 7, 8, 5], randomAccess: .idr)))
        #expect(line == "12     3456        78       idr             1      9 7 8 5")
    }

    /// A value as wide as its column keeps one space before the next: columns never run together.
    @Test func aValueWiderThanItsColumnIsStillSeparated() {
        let line = table.tableLine(.accessUnit(index: 1, offset: 123_456_789_012, size: 123_456_789, unit: unit([1])))
        #expect(line == "1      123456789012 123456789 -               1      1")
    }

    @Test func anSPSRowShowsTheFormatAndTheCodedSizeWhenCropped() throws {
        let all = records([HandBuilt.sps(cropBottom: 4, timing: (1, 50)), HandBuilt.pps(), HandBuilt.slice(idr: true, frameNum: 0)])
        let line = try #require(table.tableLine(try record("sps 0", in: all)))
        #expect(line.hasPrefix("SPS 0 (h264) at 0: 320x232 (coded 320x240) 4:2:0 8-bit profile 66 level 30 fps 25 reorder "), "\(line)")
        let uncropped = try #require(table.tableLine(try record("sps 0", in: records([HandBuilt.sps(), HandBuilt.pps()]))))
        #expect(uncropped.hasPrefix("SPS 0 (h264) at 0: 320x240 4:2:0 8-bit profile 66 level 30 fps ? reorder "), "\(uncropped)")
    }

    @Test func aPPSRowPointsAtItsSPS() throws {
        let all = records([HandBuilt.sps(id: 1), HandBuilt.pps(id: 4, spsId: 1)])
        let line = table.tableLine(try record("pps 4", in: all))
        #expect(line == "PPS 4 (h264) at \(4 + HandBuilt.sps(id: 1).count) -> SPS 1")
    }

    @Test func aChangedSPSRowSaysWhatChanged() throws {
        let all = records([HandBuilt.sps(), HandBuilt.pps(), HandBuilt.slice(idr: true, frameNum: 0),
                           HandBuilt.sps(widthInMbs: 40, heightInMbs: 30)])
        let lines = all.compactMap { if case .parameterSet(_, let event) = $0, event.kind == .sps { table.tableLine($0) } else { nil } }
        #expect(lines.count == 2)
        #expect(lines.first?.hasSuffix("]") == false)
        #expect(lines.last?.hasSuffix(" [changed: size]") == true, "\(lines)")
    }

    @Test func aProblemRowDescribesIt() throws {
        let all = records([HandBuilt.sps(), HandBuilt.pps(), [0xC1, 0x00, 0x01]])
        let line = try #require(table.tableLine(try record("problem", in: all)))
        #expect(line.hasPrefix("problem: forbidden_bit at byte \(8 + HandBuilt.sps().count + HandBuilt.pps().count)"), "\(line)")
    }

    @Test func theSummaryRowListsOnlyTheProblemsThatOccurred() {
        let clean = table.tableLine(.summary(summary(codec: .h264)))
        #expect(clean == "\nh264: 4321 bytes, 9 access units (1 random-access), 12 NAL units, 2 repeated parameter sets")
        let damaged = table.tableLine(.summary(summary(codec: nil, discarded: 5, sliceHeaderErrors: 2)))
        #expect(damaged == "\nunknown codec: 4321 bytes, 9 access units (1 random-access), 12 NAL units, 2 repeated parameter sets"
            + "\nproblems: 5 discarded bytes, 2 slice header errors")
    }
}
