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

    /// SR with one block (negative cumulative loss), SDES with two chunks, and a padded BYE at the end.
    static let senderCompound: [UInt8] = [
        0x81, 200, 0, 12, 0, 0, 0, 0x2A,
        0xE8, 0x12, 0x34, 0x56, 0x80, 0, 0, 0,  // NTP timestamp
        0, 1, 0x5F, 0x90, 0, 0, 0, 100, 0, 0, 0x27, 0x10,  // RTP timestamp 90000, 100 packets, 10000 octets
        0, 0, 0, 9, 0x10, 0xFF, 0xFF, 0xFE, 0, 1, 0, 5, 0, 0, 0, 3, 0x12, 0x34, 0x56, 0x78, 0, 1, 0, 0,
        0x82, 202, 0, 6,
        0, 0, 0, 0x2A, 1, 3, 0x61, 0x62, 0x63, 0, 0, 0,  // CNAME "abc", end, pad
        0, 0, 0, 0x2B, 2, 1, 0x78, 1, 2, 0xC3, 0xA9, 0,  // NAME "x", CNAME "é", end
        0xA1, 203, 0, 2, 0, 0, 0, 0x2A, 0, 0, 0, 4,  // padded BYE: one SSRC, 4 bytes of padding
    ]

    @Test func senderReportSourceDescriptionAndGoodbyeParse() throws {
        let packets = try RTCPPacketSummary.parseCompound(Self.senderCompound)
        let block = RTCPReportBlock(ssrc: 9, fractionLost: 0x10, cumulativeLost: -2, extendedHighestSequence: 0x1_0005,
                                    jitter: 3, lastSenderReport: 0x1234_5678, delaySinceLastSenderReport: 0x1_0000)
        #expect(packets == [
            .senderReport(RTCPSenderReport(ssrc: 42, ntpTimestamp: 0xE812_3456_8000_0000, rtpTimestamp: 90_000,
                                           packetCount: 100, octetCount: 10_000, reportBlocks: [block])),
            .sourceDescription([
                RTCPSourceDescriptionChunk(ssrc: 42, cname: "abc"), RTCPSourceDescriptionChunk(ssrc: 43, cname: "\u{E9}"),
            ]),
            .goodbye(ssrcs: [42]),
        ])
    }

    @Test func everyTruncationThrowsOrEndsOnAPacket() throws {
        let nack = RTCPTransportFeedback.genericNACK(senderSSRC: 1, mediaSSRC: 2, lost: [1, 5, 40])[0]
        for whole in [Self.senderCompound, nack] {
            let full = try RTCPPacketSummary.parseCompound(whole)
            for count in 0..<whole.count {
                guard let packets = try? RTCPPacketSummary.parseCompound(Array(whole[..<count])) else { continue }
                // Only a cut between packets parses, and then to the packets before it.
                #expect(packets.count < full.count && Array(full[..<packets.count]) == packets, "cut at \(count)")
            }
        }
    }

    @Test func hostileCompoundsAreRejected() {
        func parse(_ bytes: [UInt8]) throws(RTCPError) { _ = try RTCPPacketSummary.parseCompound(bytes) }
        #expect(throws: RTCPError.truncated) { try parse([]) }
        #expect(throws: RTCPError.truncated) { try parse(emptyReport + [0x80, 201]) }
        #expect(throws: RTCPError.truncated) { try parse([0x80, 201, 0, 2, 1, 2, 3, 4]) }
        #expect(throws: RTCPError.unsupportedVersion(1)) { try parse([0x40, 201, 0, 1, 1, 2, 3, 4]) }
        #expect(throws: RTCPError.badPadding) { try parse([0xA0, 201, 0, 1, 1, 2, 3, 4] + emptyReport) }
        #expect(throws: RTCPError.badPadding) { try parse([0xA0, 201, 0, 1, 1, 2, 3, 0]) }
        #expect(throws: RTCPError.badPadding) { try parse([0xA0, 201, 0, 1, 1, 2, 3, 5]) }
        #expect(throws: RTCPError.tooManyPackets) { try parse(Array([[UInt8]](repeating: emptyReport, count: 65).joined())) }
        #expect(throws: Never.self) { try parse(Array([[UInt8]](repeating: emptyReport, count: 64).joined())) }
        #expect(throws: RTCPError.malformed(payloadType: 200)) { try parse([0x81, 200, 0, 6] + [UInt8](repeating: 0, count: 24)) }
        #expect(throws: RTCPError.malformed(payloadType: 201)) { try parse([0x9F, 201, 0, 1, 1, 2, 3, 4]) }
        #expect(throws: RTCPError.malformed(payloadType: 202)) { try parse([0x81, 202, 0, 2, 0, 0, 0, 1, 1, 9, 0x61, 0x62]) }
        #expect(throws: RTCPError.malformed(payloadType: 202)) { try parse([0x82, 202, 0, 2, 0, 0, 0, 1, 1, 1, 0x61, 0]) }
        #expect(throws: RTCPError.malformed(payloadType: 203)) { try parse([0x82, 203, 0, 1, 0, 0, 0, 1]) }
        #expect(throws: RTCPError.malformed(payloadType: 205)) { try parse([0x81, 205, 0, 1, 0, 0, 0, 1]) }
        #expect(throws: RTCPError.malformed(payloadType: 206)) { try parse([0x81, 206, 0, 1, 0, 0, 0, 1]) }
        var remb = RTCPTransportFeedback.receiverEstimatedMaximumBitrate(senderSSRC: 1, bitrate: 5, mediaSSRCs: [7])
        remb[24] = 2  // says two SSRCs, holds one
        #expect(throws: RTCPError.malformed(payloadType: 206)) { try parse(remb) }
        #expect(throws: Never.self) { try parse([0x8F, 206, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0x41, 0x42, 0x43, 0x44]) }
    }

    @Test func randomBytesNeverTrap() {
        var generator = SeededGenerator(seed: 3550)
        for _ in 0..<20_000 {
            var bytes = (0..<Int.random(in: 0..<96, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            // Mostly version 2 with small lengths, so that the bodies are what gets exercised.
            var offset = 0
            while offset + 4 <= bytes.count && Int.random(in: 0..<4, using: &generator) > 0 {
                bytes[offset] = bytes[offset] & 0x3F | 0x80
                bytes[offset + 2] = 0
                bytes[offset + 3] %= 8
                offset += (Int(bytes[offset + 3]) + 1) * 4
            }
            _ = try? RTCPPacketSummary.parseCompound(bytes)
        }
    }
}
