import Bitstream
import StreamrecvTestSupport
import Testing

private let emptyReport: [UInt8] = [0x80, 201, 0, 1, 1, 2, 3, 4]  // RR, RC=0, sender SSRC 0x01020304

@Suite struct RTCPTransportFeedbackTests {
    @Test func genericNACKPacksLossesIntoPIDAndBitmask() {
        let datagrams = RTCPTransportFeedback.genericNACK(senderSSRC: 0x0102_0304, mediaSSRC: 0xA0B0_C0D0, lost: [103, 100, 101, 100])
        #expect(datagrams == [emptyReport + [
            0x81, 205, 0, 3, 1, 2, 3, 4, 0xA0, 0xB0, 0xC0, 0xD0,  // RTPFB FMT=1, length 3
            0x00, 100, 0x00, 0x05,                                // PID 100; 101 and 103 (bits 0 and 2)
        ]])
        #expect(RTCPTransportFeedback.genericNACK(senderSSRC: 1, mediaSSRC: 2, lost: []).isEmpty)
    }

    @Test func genericNACKFollowsARunAcrossTheWrap() {
        let datagrams = RTCPTransportFeedback.genericNACK(senderSSRC: 0x0102_0304, mediaSSRC: 0xA0B0_C0D0, lost: [1, 65535, 0, 65534])
        #expect(datagrams == [emptyReport + [
            0x81, 205, 0, 3, 1, 2, 3, 4, 0xA0, 0xB0, 0xC0, 0xD0,
            0xFF, 0xFE, 0x00, 0x07,  // PID 65534; 65535, 0, 1
        ]])
    }

    @Test func moreThanSeventeenConsecutiveLossesTakeTwoEntries() {
        let lost: [UInt16] = Array(65530...65535) + Array(0...13)  // 20 in a row across the wrap
        let datagrams = RTCPTransportFeedback.genericNACK(senderSSRC: 0x0102_0304, mediaSSRC: 0xA0B0_C0D0, lost: lost)
        #expect(datagrams == [emptyReport + [
            0x81, 205, 0, 4, 1, 2, 3, 4, 0xA0, 0xB0, 0xC0, 0xD0,
            0xFF, 0xFA, 0xFF, 0xFF,  // PID 65530; 65531 ... 65535, 0 ... 10
            0x00, 0x0B, 0x00, 0x03,  // PID 11; 12, 13
        ]])
    }

    @Test func entriesSplitAcrossDatagramsAtTheLimit() throws {
        let lost = stride(from: UInt16(0), to: 100, by: 20).map { $0 }  // 5 entries, 20 apart
        let datagrams = RTCPTransportFeedback.genericNACK(senderSSRC: 7, mediaSSRC: 8, lost: lost, maximumEntriesPerPacket: 2)
        #expect(datagrams.map(\.count) == [28, 28, 24])
        let entries = try datagrams.flatMap { datagram throws(RTCPError) -> [GenericNACKEntry] in
            let packets = try RTCPPacketSummary.parseCompound(datagram)
            #expect(packets.first == .receiverReport(ssrc: 7, reportBlocks: []))
            guard case .genericNACK(7, 8, let entries) = packets.last else { return [] }
            return entries
        }
        #expect(entries.flatMap(\.sequenceNumbers) == lost)
    }

    @Test func entriesNameExactlyTheLostSet() {
        var generator = SeededGenerator(seed: 4585)
        for _ in 0..<300 {
            let base = UInt16.random(in: 0...UInt16.max, using: &generator)
            let span = UInt16.random(in: 1...400, using: &generator)
            let lost = (0..<Int.random(in: 1...200, using: &generator)).map { _ in base &+ UInt16.random(in: 0..<span, using: &generator) }
            let entries = RTCPTransportFeedback.genericNACKEntries(lost: lost)
            let named = entries.flatMap(\.sequenceNumbers)
            #expect(Set(named) == Set(lost) && named.count == Set(lost).count)
            // In wrapped order from the oldest: each entry starts after the previous one's reach.
            for (earlier, later) in zip(entries, entries.dropFirst()) { #expect(later.packetID &- earlier.packetID > 16) }
            #expect(entries.count <= (Int(span) + 16) / 17 + 1)
        }
    }

    @Test func rembOfOneMegabitIsExact() throws {
        let bytes = RTCPTransportFeedback.receiverEstimatedMaximumBitrate(senderSSRC: 0x0102_0304, bitrate: 1_000_000,
                                                                          mediaSSRCs: [0xA0B0_C0D0])
        #expect(bytes == emptyReport + [
            0x8F, 206, 0, 5, 1, 2, 3, 4, 0, 0, 0, 0,  // PSFB FMT=15, length 5; media source 0
            0x52, 0x45, 0x4D, 0x42,                  // "REMB"
            1, 0x0B, 0xD0, 0x90,                     // 1 SSRC; exponent 2, mantissa 250000 (0x3D090)
            0xA0, 0xB0, 0xC0, 0xD0,
        ])
        let packets = try RTCPPacketSummary.parseCompound(bytes)
        #expect(packets.last == .receiverEstimatedMaximumBitrate(senderSSRC: 0x0102_0304, bitrate: 1_000_000, ssrcs: [0xA0B0_C0D0]))
    }

    @Test(arguments: [0, 1, 262_143, 262_144, 123_456_789, 2_500_000_000, UInt64(1) << 40 | 12345, UInt64.max])
    func rembRoundsDownWithinItsMantissa(_ bitrate: UInt64) throws {
        let bytes = RTCPTransportFeedback.receiverEstimatedMaximumBitrate(senderSSRC: 1, bitrate: bitrate, mediaSSRCs: [2, 3])
        let packets = try RTCPPacketSummary.parseCompound(bytes)
        guard case .receiverEstimatedMaximumBitrate(1, let decoded, [2, 3]) = packets.last else {
            Issue.record("no REMB in \(packets)")
            return
        }
        let exponent = bytes[8 + 17] >> 2
        #expect(decoded <= bitrate && bitrate - decoded < UInt64(1) << exponent)
        #expect(bitrate < 1 << 18 ? exponent == 0 : bytes[8 + 17] & 0x03 >= 0x02, "mantissa uses its 18 bits")
    }

    @Test func rembBitrateSaturates() throws {
        var bytes = RTCPTransportFeedback.receiverEstimatedMaximumBitrate(senderSSRC: 1, bitrate: 1, mediaSSRCs: [])
        bytes.replaceSubrange(24..<28, with: [0, 0xFF, 0xFF, 0xFF])  // exponent 63, mantissa 2^18 - 1
        let packets = try RTCPPacketSummary.parseCompound(bytes)
        #expect(packets.last == .receiverEstimatedMaximumBitrate(senderSSRC: 1, bitrate: .max, ssrcs: []))
    }

    @Test func keyframeRequestsAndReceptionReportsParse() throws {
        let pli = RTCPFeedback.keyframeRequest(.pictureLossIndication, senderSSRC: 5, mediaSSRC: 6)
        #expect(try RTCPPacketSummary.parseCompound(pli) == [
            .receiverReport(ssrc: 5, reportBlocks: []), .pictureLossIndication(senderSSRC: 5, mediaSSRC: 6),
        ])
        let fir = RTCPFeedback.keyframeRequest(.fullIntraRequest(sequenceNumber: 1), senderSSRC: 5, mediaSSRC: 6)
        #expect(try RTCPPacketSummary.parseCompound(fir).last == .other(payloadType: 206, count: 4))

        var statistics = RTPReceptionStatistics(clockRate: 90_000)
        for sequence: UInt16 in [10, 11, 13] { statistics.record(ssrc: 0xCAFE, sequenceNumber: sequence, timestamp: 0, arrival: 0) }
        let packets = try RTCPPacketSummary.parseCompound(statistics.report(senderSSRC: 9, cname: "streamrecvd", now: 0))
        guard case .receiverReport(9, let blocks) = packets.first, let block = blocks.first else {
            Issue.record("no report block in \(packets)")
            return
        }
        #expect(block.ssrc == 0xCAFE && block.cumulativeLost == 1 && block.extendedHighestSequence == 13)
        #expect(packets.last == .sourceDescription([RTCPSourceDescriptionChunk(ssrc: 9, cname: "streamrecvd")]))
    }
}
