import Bitstream
@testable import Pipeline
import Testing

/// RTP on the decode thread, without sockets: packets in order (as the receiver hands them on) in, NAL units,
/// losses, truncated pictures and source changes out.
@Suite struct RTPIngestTests {
    /// A single-NAL-unit packet (RFC 6184 5.6) carrying a non-IDR slice whose bytes name its sequence number.
    static func packet(_ sequence: UInt16, ssrc: UInt32 = 0x1234, timestamp: UInt32 = 3000, marker: Bool = true) -> RTPPacket {
        RTPPacket(marker: marker, payloadType: 96, sequenceNumber: sequence, timestamp: timestamp, ssrc: ssrc,
                  payload: [0x41, UInt8(sequence >> 8), UInt8(sequence & 0xff), 0x80][...])
    }

    struct Output {
        var units: [UInt16] = []
        var accessUnitEnds = 0
        var lost = 0
        var timestamps: [Int64] = []
        var sourceChanges: [UInt32] = []
        var truncated = 0
    }

    /// Each packet pushed; a change of SSRC between two is a source change, as the receiver says it.
    static func run(_ packets: [RTPPacket], flush: Bool = true) -> Output {
        var ingest = RTPIngest(codec: .h264, payloadType: 96, maximumNALUnitSize: 1 << 20)
        var output = Output()
        let collect: (RTPIngest.Event) -> Void = { event in
            switch event {
            case .nalUnit(let unit): output.units.append(UInt16(unit.bytes.dropFirst().first!) << 8 | UInt16(unit.bytes.dropFirst(2).first!))
            case .endOfAccessUnit: output.accessUnitEnds += 1
            case .lost(let packets, _): output.lost += packets
            case .packet(_, let timestamp): output.timestamps.append(timestamp)
            case .sourceChanged(let ssrc, _): output.sourceChanges.append(ssrc)
            case .truncated: output.truncated += 1
            case .dropped, .discarded: break
            }
        }
        for packet in packets {
            if let ssrc = ingest.ssrc, ssrc != packet.ssrc { ingest.sourceChanged(to: packet.ssrc, restarted: false, collect) }
            ingest.push(packet, collect)
        }
        if flush { ingest.flush(collect) }
        return output
    }

    @Test func eachPacketsUnitsComeOutAndTheMarkerEndsTheAccessUnit() {
        let output = Self.run((1...10).map { Self.packet($0) })
        #expect(output.units == Array(1...10) && output.accessUnitEnds == 10 && output.lost == 0 && output.truncated == 0)
    }

    /// The sender goes away inside an access unit (its last packet, with the marker, lost): no later packet shows
    /// a gap, so the flush says so; an access unit ended by its marker is whole.
    @Test func aSourceThatStopsInsideAnAccessUnitLeavesItTruncated() {
        let cut = Self.run([Self.packet(1), Self.packet(2, timestamp: 6000, marker: false), Self.packet(3, timestamp: 6000, marker: false)])
        #expect(cut.units == [1, 2, 3] && cut.accessUnitEnds == 1 && cut.lost == 0 && cut.truncated == 1)
        let whole = Self.run([Self.packet(1), Self.packet(2, timestamp: 6000, marker: false), Self.packet(3, timestamp: 6000)])
        #expect(whole.accessUnitEnds == 2 && whole.truncated == 0)
        // A new source replaces one stopped inside an access unit: the old one's is truncated too.
        let replaced = Self.run((1...4).map { Self.packet($0, marker: $0 != 4) } + (1...4).map { Self.packet(100 + $0, ssrc: 0x9999) })
        #expect(replaced.sourceChanges == [0x9999] && replaced.truncated == 1)
    }

    @Test func aGapIsReportedLost() {
        let output = Self.run(([1, 2, 3, 5, 6] as [UInt16]).map { Self.packet($0) })
        #expect(output.lost == 1 && output.units == [1, 2, 3, 5, 6])
    }

    @Test func sequenceNumbersAndTimestampsWrap() {
        let sequences: [UInt16] = [65533, 65534, 65535, 0, 1, 2]
        let timestamps: [UInt32] = [UInt32.max - 6000, UInt32.max - 3000, UInt32.max, 2999, 5999, 8999]
        let output = Self.run(zip(sequences, timestamps).map { Self.packet($0, timestamp: $1) })
        #expect(output.units == sequences && output.lost == 0)
        #expect(output.timestamps == timestamps.enumerated().map { Int64($1) + ($0 >= 3 ? 1 << 32 : 0) },
                "extended past 32 bits, never backwards: \(output.timestamps)")
    }

    /// A new source's numbering is not a gap, and its timestamps start afresh.
    @Test func aNewSourceStartsAfresh() {
        let old = (1...4).map { Self.packet($0, ssrc: 7) }
        let new = (900...903).map { Self.packet($0, ssrc: 8, timestamp: 90) }
        let output = Self.run(old + new)
        #expect(output.sourceChanges == [8])
        #expect(output.units == Array(1...4) + Array(900...903), "\(output.units)")
        #expect(output.lost == 0, "a new source's numbering is not a gap")
        #expect(output.timestamps.suffix(4) == [90, 90, 90, 90])
    }
}
