import Bitstream
@testable import Pipeline
import Testing

@Suite struct AnnexBIngestTests {
    private func events(_ chunks: [[UInt8]], maximum: Int = 1 << 20, flush: Bool = false) -> (units: [[UInt8]], other: [String]) {
        var ingest = AnnexBIngest(maximumNALUnitSize: maximum)
        var units: [[UInt8]] = []
        var other: [String] = []
        let record: (AnnexBIngest.Event) -> Void = { event in
            switch event {
            case .nalUnit(let unit): units.append(Array(unit.bytes))
            case .discarded(let bytes, let total, let oversized): other.append("discarded \(bytes)/\(total) oversized \(oversized)")
            case .defect(let defect, let count, let total): other.append("\(defect.label) \(count)/\(total)")
            }
        }
        for chunk in chunks { ingest.append(chunk[...], record) }
        if flush { ingest.flush(record) }
        return (units, other)
    }

    @Test func unitsComeOutWhenTheNextStartCodeIsIn() {
        let result = events([[0, 0, 0, 1, 0x09, 0xF0, 0, 0, 1], [0x67, 0x42, 0, 0, 1, 0x68]])
        #expect(result.units == [[0x09, 0xF0], [0x67, 0x42]] && result.other.isEmpty)
        var ingest = AnnexBIngest(maximumNALUnitSize: 1 << 20)
        ingest.append([0, 0, 1, 0x09, 0xF0, 0, 0, 1, 0x65, 0x88]) { _ in }
        #expect(ingest.unitInProgress == [0x65, 0x88][...] && ingest.bytesIn == 10)
        #expect(events([[0, 0, 1, 0x65, 0x88]], flush: true).units == [[0x65, 0x88]])
    }

    @Test func garbageEmptyAndOversizedUnitsAreReportedByKind() {
        let garbage = events([[7, 7, 7, 0, 0, 1, 0x09, 0xF0, 0, 0, 1]])
        #expect(garbage.other == ["discarded 3/3 oversized false"], "\(garbage.other)")
        let empty = events([[0, 0, 1, 0, 0, 1, 0x09, 0xF0, 0, 0, 1]])
        #expect(empty.units == [[0x09, 0xF0]] && empty.other == ["empty_nal_unit 1/1"], "\(empty.other)")
        let oversized = events([[0, 0, 1, 0x65] + [UInt8](repeating: 0x55, count: 64) + [0, 0, 1, 0x09, 0xF0, 0, 0, 1]], maximum: 16)
        #expect(oversized.units == [[0x09, 0xF0]])
        #expect(oversized.other.first == "oversized_nal_unit 1/1" && oversized.other.dropFirst().first?.hasSuffix("oversized true") == true,
                "\(oversized.other)")
    }
}
