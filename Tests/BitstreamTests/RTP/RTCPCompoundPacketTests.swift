import Bitstream
import StreamrecvTestSupport
import Testing

private let emptyReport: [UInt8] = [0x80, 201, 0, 1, 1, 2, 3, 4]  // RR, RC=0, sender SSRC 0x01020304

/// Compound RTCP datagrams (RFC 3550 §6.1, §6.4–6.6, appendix A.2) and reduced-size ones (RFC 5506).
@Suite struct RTCPCompoundPacketTests {
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

    // MARK: Reports

    /// A report block (RFC 3550 §6.4.1) with the given 32-bit "fraction lost | cumulative lost" word.
    static func block(ssrc: UInt8, lost: [UInt8]) -> [UInt8] {
        [0, 0, 0, ssrc] + lost + [0, 1, 0, 7, 0, 0, 0, 9, 0xAB, 0xCD, 0xEF, 0x01, 0, 0, 0x80, 0]
    }

    @Test func aReceiverReportSkipsTheProfileExtensionAfterItsBlocks() throws {
        // RC 2: sender SSRC, two 24-byte blocks, then 8 bytes of profile-specific extension (§6.4.2): 16 words.
        let bytes: [UInt8] = [0x82, 201, 0, 15, 0, 0, 0, 0x2A] + Self.block(ssrc: 1, lost: [0x40, 0, 0, 3])
            + Self.block(ssrc: 2, lost: [0, 0, 0, 0]) + [UInt8](repeating: 0xEE, count: 8)
        let packets = try RTCPPacketSummary.parseCompound(bytes)
        let first = RTCPReportBlock(ssrc: 1, fractionLost: 0x40, cumulativeLost: 3, extendedHighestSequence: 0x1_0007,
                                    jitter: 9, lastSenderReport: 0xABCD_EF01, delaySinceLastSenderReport: 0x8000)
        var second = first
        second.ssrc = 2
        second.fractionLost = 0
        second.cumulativeLost = 0
        #expect(packets == [.receiverReport(ssrc: 0x2A, reportBlocks: [first, second])])
    }

    @Test(arguments: [([0x00, 0x00, 0x00], 0), ([0x7F, 0xFF, 0xFF], 8_388_607), ([0x80, 0x00, 0x00], -8_388_608),
                      ([0xFF, 0xFF, 0xFF], -1), ([0xFF, 0xFF, 0xFE], -2)] as [([UInt8], Int32)])
    func cumulativeLossIsA24BitSignedNumber(field: [UInt8], lost: Int32) throws {
        // Duplicates make it negative (§6.4.1): the 24 bits are two's complement, and the fraction beside them is not.
        let bytes: [UInt8] = [0x81, 201, 0, 7, 0, 0, 0, 1] + Self.block(ssrc: 5, lost: [0xFF] + field)
        guard case .receiverReport(1, let blocks) = try RTCPPacketSummary.parseCompound(bytes).first else {
            Issue.record("not a receiver report")
            return
        }
        #expect(blocks.first?.cumulativeLost == lost && blocks.first?.fractionLost == 0xFF)
    }

    @Test func aReceiverReportWithoutItsSenderSSRCIsMalformed() {
        // Length 0: the packet is its 4-byte header alone.
        #expect(throws: RTCPError.malformed(payloadType: 201)) { try RTCPPacketSummary.parseCompound([0x80, 201, 0, 0]) }
        // RC 1 with the block 4 bytes short.
        let short: [UInt8] = [0x81, 201, 0, 6, 0, 0, 0, 1] + Array(Self.block(ssrc: 5, lost: [0, 0, 0, 0]).prefix(20))
        #expect(throws: RTCPError.malformed(payloadType: 201)) { try RTCPPacketSummary.parseCompound(short) }
    }

    // MARK: Source description and goodbye

    @Test func aSourceDescriptionKeepsTheFirstValidCNAMEOfEachChunk() throws {
        let bytes: [UInt8] = [
            0x83, 202, 0, 8,
            0, 0, 0, 1, 2, 1, 0x78, 0,  // NAME "x" only: no CNAME; its null ends the chunk on a word boundary
            0, 0, 0, 2, 1, 1, 0x61, 1, 1, 0x62, 0, 0,  // two CNAMEs, "a" then "b": the first is kept
            0, 0, 0, 3, 1, 2, 0xC3, 0x28, 0, 0, 0, 0,  // an invalid UTF-8 CNAME is none
        ]
        #expect(try RTCPPacketSummary.parseCompound(bytes) == [.sourceDescription([
            RTCPSourceDescriptionChunk(ssrc: 1, cname: nil), RTCPSourceDescriptionChunk(ssrc: 2, cname: "a"),
            RTCPSourceDescriptionChunk(ssrc: 3, cname: nil),
        ])])
    }

    @Test func aChunkWhoseItemsEndOnAWordBoundaryNeedsAWholeWordOfNulls() throws {
        // SSRC + CNAME "ab" fill two words; the list's terminating null takes a third (§6.5: one to four nulls).
        let bytes: [UInt8] = [0x82, 202, 0, 5, 0, 0, 0, 1, 1, 2, 0x61, 0x62, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0]
        #expect(try RTCPPacketSummary.parseCompound(bytes) == [.sourceDescription([
            RTCPSourceDescriptionChunk(ssrc: 1, cname: "ab"), RTCPSourceDescriptionChunk(ssrc: 2, cname: nil),
        ])])
        // Without that word the second chunk's SSRC is read as the first chunk's terminator and runs short.
        let unterminated: [UInt8] = [0x82, 202, 0, 3, 0, 0, 0, 1, 1, 2, 0x61, 0x62, 0, 0, 0, 2]
        #expect(throws: RTCPError.malformed(payloadType: 202)) { try RTCPPacketSummary.parseCompound(unterminated) }
    }

    @Test func aGoodbyeListsItsSourcesAndIgnoresItsReason() throws {
        // SC 2 and the optional reason (§6.6): length 1, "x", padded to a word.
        let bytes: [UInt8] = [0x82, 203, 0, 3, 0, 0, 0, 7, 0, 0, 0, 8, 1, 0x78, 0, 0]
        #expect(try RTCPPacketSummary.parseCompound(bytes) == [.goodbye(ssrcs: [7, 8])])
        // Padding may take the whole body: an empty BYE (SC 0) of one word, all padding.
        #expect(try RTCPPacketSummary.parseCompound([0xA0, 203, 0, 1, 0, 0, 0, 4]) == [.goodbye(ssrcs: [])])
    }

    // MARK: Feedback (RFC 4585) and other types

    @Test func aLoneFeedbackPacketIsAReducedSizeDatagram() throws {
        // RFC 5506 lets a datagram start with feedback instead of SR/RR.
        let nack: [UInt8] = [0x81, 205, 0, 4, 0, 0, 0, 1, 0, 0, 0, 2, 0x01, 0x00, 0x80, 0x01, 0xFF, 0xFF, 0x00, 0x00]
        #expect(try RTCPPacketSummary.parseCompound(nack) == [.genericNACK(senderSSRC: 1, mediaSSRC: 2, entries: [
            GenericNACKEntry(packetID: 0x0100, lostBitmask: 0x8001), GenericNACKEntry(packetID: 0xFFFF, lostBitmask: 0),
        ])])
        let pli: [UInt8] = [0x81, 206, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4]
        #expect(try RTCPPacketSummary.parseCompound(pli) == [.pictureLossIndication(senderSSRC: 3, mediaSSRC: 4)])
    }

    @Test func typesItDoesNotActOnAreNamedWithTheirCountOrFormat() throws {
        let app: [UInt8] = [0x85, 204, 0, 2, 0, 0, 0, 1, 0x61, 0x62, 0x63, 0x64]  // APP, subtype 5, name "abcd"
        let tmmbr: [UInt8] = [0x83, 205, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2]  // RTPFB FMT 3 (RFC 5104 TMMBR)
        let afb: [UInt8] = [0x8F, 206, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0x41, 0x42, 0x43, 0x44]  // AFB, not "REMB"
        #expect(try RTCPPacketSummary.parseCompound(emptyReport + app + tmmbr + afb) == [
            .receiverReport(ssrc: 0x0102_0304, reportBlocks: []), .other(payloadType: 204, count: 5),
            .other(payloadType: 205, count: 3), .other(payloadType: 206, count: 15),
        ])
    }

    @Test(arguments: [0, 1, 3])
    func oneBadVersionRejectsTheWholeDatagram(version: UInt8) {
        // A.2: a version other than 2 anywhere means the datagram is not RTCP we can trust, not "the first packets".
        let bad: [UInt8] = [version << 6, 201, 0, 1, 0, 0, 0, 9]
        #expect(throws: RTCPError.unsupportedVersion(Int(version))) { try RTCPPacketSummary.parseCompound(emptyReport + bad) }
    }
}
