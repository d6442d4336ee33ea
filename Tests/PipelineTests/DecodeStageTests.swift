import Bitstream
import Foundation
import Glibc
@testable import Pipeline
import SharedFrames
import Testing

/// The decode path's stages, each on its own, without a daemon (docs/architecture.md, "The decode path").
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

@Suite struct DecodeBookkeepingTests {
    @Test func pendingFramesAreMatchedByPtsAndOldOnesForgotten() {
        var pending = PendingFrames()
        let frame = PendingFrame(timeFirstByte: 1, timeComplete: 2, keyframe: true, afterLoss: false)
        #expect(pending.add(frame) == 0 && pending.add(frame) == 1)
        pending.completed(1, at: 9)
        #expect(pending.take(1)?.timeComplete == 9 && pending.take(1) == nil)
        // Frames the decoder never returned do not pile up.
        for _ in 0..<2000 { _ = pending.add(frame) }
        #expect(pending.count <= 2 * Int(PendingFrames.horizon) + 1)
        #expect(pending.take(pending.nextPTS - 1) != nil && pending.take(0) == nil)
        pending.removeAll()
        #expect(pending.count == 0)
    }

    @Test func anAccessUnitIsDatedByTheChunkThatCarriedItsFirstByte() {
        var log = ArrivalLog()
        #expect(log.arrival(ofOffset: 0) == nil)
        log.record(offset: 0, time: 100)
        log.record(offset: 1000, time: 200, mediaTimestamp: 9000)
        log.record(offset: 5000, time: 300)
        #expect(log.arrival(ofOffset: 999)?.time == 100)
        #expect(log.arrival(ofOffset: 1000)?.time == 200 && log.arrival(ofOffset: 4999)?.mediaTimestamp == 9000)
        #expect(log.arrival(ofOffset: 1 << 40)?.time == 300)
        for index in 0..<10_000 { log.record(offset: 10_000 + Int64(index), time: 1000 + UInt64(index)) }
        // The oldest are forgotten; an offset older than all left gets the oldest known.
        #expect(log.arrival(ofOffset: 0).map { $0.time > 1000 } == true)
    }

    @Test func keyframeRequestsAreSpacedAndRenewedAfterHealing() throws {
        var none = KeyframeRequester(kind: .none, intervalSeconds: 1)
        #expect(none.request(mediaSSRC: 5, now: 1) == nil)
        var pli = KeyframeRequester(kind: .pli, intervalSeconds: 1, senderSSRC: 0x0102_0304)
        let requested = pli.request(mediaSSRC: 0x0A0B_0C0D, now: 10_000_000_000)
        let first = try #require(requested)
        // An empty receiver report (8 bytes), then payload-specific feedback (PT 206) FMT 1: a PLI for the media SSRC.
        #expect(first.count == 20 && first[1] == 201 && first[8] & 0x1F == 1 && first[9] == 206)
        #expect(Array(first[4..<8]) == [1, 2, 3, 4] && Array(first[16..<20]) == [0x0A, 0x0B, 0x0C, 0x0D])
        #expect(pli.request(mediaSSRC: 0x0A0B_0C0D, now: 10_500_000_000) == nil, "asked again within the interval")
        #expect(pli.request(mediaSSRC: 0x0A0B_0C0D, now: 11_000_000_001) != nil)
        pli.healed()
        #expect(pli.request(mediaSSRC: 0x0A0B_0C0D, now: 11_000_000_002) != nil, "a new loss is asked for at once")
        var fir = KeyframeRequester(kind: .fir, intervalSeconds: 0, senderSSRC: 1)
        let sequences = (0..<3).compactMap { fir.request(mediaSSRC: 2, now: UInt64($0 + 1) * 1000) }.map { $0[24] }
        #expect(sequences == [1, 2, 3], "FIR sequence numbers count up")
    }

    @Test func aPictureInPartsGetsEachByteOnceAndSuspensionsEndAtAKeyframe() {
        var parts = PictureInParts()
        #expect(parts.nextPart(of: [1, 2, 3][...]) == nil, "no picture in parts")
        parts.begin(pts: 7)
        let accessUnit: [UInt8] = Array(0..<20)
        #expect(parts.nextPart(of: accessUnit[0..<8]).map { ($0.bytes, $0.pts) } .map { $0 == (Array(0..<8), 7) } == true)
        #expect(parts.nextPart(of: accessUnit[0..<8]) == nil, "nothing new")
        #expect(parts.nextPart(of: accessUnit[0..<20])?.bytes == Array(8..<20))
        #expect(parts.finish() && !parts.finish() && !parts.isDecodingAPicture)
        parts.suspend()
        #expect(parts.suspended)
        parts.keyframeBegins()
        #expect(!parts.suspended)
        parts.begin(pts: 8)
        parts.suspend()
        parts.reset()
        #expect(!parts.isDecodingAPicture && !parts.suspended)
    }
}

@Suite struct AdmissionPolicyTests {
    private let deadlines = SenderDeadlines(idleTimeoutSeconds: 10)

    @Test func oneDecisionForEveryTransport() {
        let refuse = AdmissionPolicy(secondSender: .refuse, deadlines: deadlines)
        #expect(refuse.decide(currentQuietFor: nil) == .admit)
        #expect(refuse.decide(currentQuietFor: deadlines.hold) == .refuse, "still delivering video")
        #expect(refuse.decide(currentQuietFor: deadlines.hold + 1) == .takeOver(staleFor: deadlines.hold + 1))
        let takeover = AdmissionPolicy(secondSender: .takeover, deadlines: deadlines)
        #expect(takeover.decide(currentQuietFor: 0) == .takeOver(staleFor: nil))
        #expect(takeover.decide(currentQuietFor: nil) == .admit)
    }
}
