@testable import Bitstream
import Testing

/// PSI sections gathered from one PID's payloads (ISO/IEC 13818-1 §2.4.4: pointer_field, section_length, CRC_32).
@Suite struct TransportStreamSectionsTests {
    /// A long-form section (section_syntax_indicator 1) of `body`, with its CRC_32 (Annex A).
    static func section(tableID: UInt8 = 0x02, body: [UInt8]) -> [UInt8] {
        let length = 5 + body.count + 4
        var section: [UInt8] = [tableID, 0xB0 | UInt8(length >> 8), UInt8(length & 0xFF), 0, 1, 0xC1, 0, 0] + body
        let crc = MPEGCRC32.checksum(section[...])
        section += [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)]
        return section
    }

    static let pat = section(tableID: 0x00, body: [0, 1, 0xE1, 0x00])
    static let pmt = section(tableID: 0x02, body: [0xE1, 0x01, 0xF0, 0x00, 0x1B, 0xE1, 0x01, 0xF0, 0x00])

    /// Pushes each payload and returns the sections handed out and the malformed bytes counted.
    static func gather(_ pushes: [(payload: [UInt8], unitStart: Bool)]) -> (sections: [[UInt8]], malformed: Int) {
        var assembler = SectionAssembler()
        var sections: [[UInt8]] = []
        for push in pushes { assembler.push(push.payload[...], unitStart: push.unitStart) { sections.append(Array($0)) } }
        return (sections, assembler.takeMalformedBytes())
    }

    // MARK: CRC

    @Test func theCRCIsCRC32MPEG2() {
        // The catalogued check value of CRC-32/MPEG-2 over "123456789"; nothing at all leaves the initial all-ones.
        #expect(MPEGCRC32.checksum(Array("123456789".utf8)[...]) == 0x0376_E6E7)
        #expect(MPEGCRC32.checksum([][...]) == 0xFFFF_FFFF)
        // With its CRC_32 appended a section checks to zero (Annex A), which is what the assembler tests.
        #expect(MPEGCRC32.checksum(Self.pat[...]) == 0)
        var damaged = Self.pat
        damaged[9] ^= 0x01
        #expect(MPEGCRC32.checksum(damaged[...]) != 0)
    }

    // MARK: Whole sections

    @Test func aSectionAfterAZeroPointerIsHandedOutOnce() {
        let result = Self.gather([([0] + Self.pat, true)])
        #expect(result.sections == [Self.pat] && result.malformed == 0)
    }

    @Test func sectionsBackToBackEndAtStuffing() {
        // After the last section of a packet, 0xFF bytes are stuffing (§2.4.4.1): nothing more in it.
        let payload = [0] + Self.pat + Self.pmt + [UInt8](repeating: 0xFF, count: 40)
        let result = Self.gather([(payload, true)])
        #expect(result.sections == [Self.pat, Self.pmt] && result.malformed == 0)
    }

    @Test func bytesBeforeTheFirstUnitStartAreIgnored() {
        // Joining mid-section: with no pointer_field seen, a continuation cannot be placed.
        let result = Self.gather([(Self.pat, false), ([0] + Self.pmt, true)])
        #expect(result.sections == [Self.pmt] && result.malformed == 0)
    }

    @Test func afterStuffingTheNextPacketMustStartAUnit() {
        // Stuffing ended the PID's sections; a continuation after it belongs to nothing.
        let result = Self.gather([([0] + Self.pat + [0xFF, 0xFF], true), (Self.pmt, false)])
        #expect(result.sections == [Self.pat] && result.malformed == 0)
    }

    // MARK: Across packets

    @Test(arguments: [1, 2, 3, 4, 10, 20])
    func aSectionSplitAnywhereIsHandedOutWithItsLastByte(cut: Int) {
        // Cuts inside the 3-byte header (1, 2) as well as after it: section_length is only known once it is whole.
        var assembler = SectionAssembler()
        var sections: [[UInt8]] = []
        assembler.push(([0] + Self.pmt.prefix(cut))[...], unitStart: true) { sections.append(Array($0)) }
        #expect(sections.isEmpty)
        assembler.push(Self.pmt.dropFirst(cut), unitStart: false) { sections.append(Array($0)) }
        #expect(sections == [Self.pmt])
        #expect(assembler.takeMalformedBytes() == 0)
    }

    @Test func thePointerFieldsBytesFinishTheSectionInProgress() {
        // pointer_field counts the bytes that end the previous section before the next one starts (§2.4.4.2).
        let rest = Array(Self.pmt.dropFirst(10))
        let result = Self.gather([([0] + Self.pmt.prefix(10), true), ([UInt8(rest.count)] + rest + Self.pat, true)])
        #expect(result.sections == [Self.pmt, Self.pat] && result.malformed == 0)
    }

    @Test func aSectionCutShortByTheNextUnitStartIsMalformed() {
        // pointer_field 0 while 20 bytes of a section are held: those 20 can never complete.
        let result = Self.gather([([0] + Self.pmt.prefix(20), true), ([0] + Self.pat, true)])
        #expect(result.sections == [Self.pat])
        #expect(result.malformed == 20)
    }

    // MARK: Damage and limits

    @Test func aSectionWithABadCRCIsCountedAndTheNextStillArrives() {
        var damaged = Self.pmt
        damaged[12] ^= 0x40
        var assembler = SectionAssembler()
        var sections: [[UInt8]] = []
        assembler.push(([0] + damaged + Self.pat)[...], unitStart: true) { sections.append(Array($0)) }
        #expect(sections == [Self.pat])
        #expect(assembler.takeMalformedBytes() == damaged.count)
        // Counted once: taking them resets the count.
        #expect(assembler.takeMalformedBytes() == 0)
    }

    @Test func aPointerBeyondThePayloadDropsThePacket() {
        // pointer_field 4 in a 4-byte payload points one byte past its end.
        #expect(Self.gather([([4, 0xAA, 0xBB, 0xCC], true)]) == ([], 4))
        // pointer_field 3 in the same payload is the last byte: legal, and nothing follows.
        #expect(Self.gather([([3, 0xAA, 0xBB, 0xCC], true)]) == ([], 0))
    }

    @Test func sectionsUpTo1024BytesAreAcceptedAndLongerOnesRefused() {
        // section_length ≤ 1021 for PSI (§2.4.4.4): 1024 bytes in all.
        let largest = Self.section(body: [UInt8](repeating: 0x5A, count: 1012))
        #expect(largest.count == SectionAssembler.maximumSectionSize)
        #expect(Self.gather([([0] + largest, true)]) == ([largest], 0))
        let over = Self.section(body: [UInt8](repeating: 0x5A, count: 1013))
        let result = Self.gather([([0] + over, true), (Self.pat, false)])
        // The whole oversized section is counted once its header is read, and the PID waits for the next unit start.
        #expect(result.sections.isEmpty && result.malformed == over.count)
    }
}
