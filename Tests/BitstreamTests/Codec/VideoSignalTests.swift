@testable import Bitstream
import StreamrecvTestSupport
import Testing

/// The opening of the VUI shared by H.264 (E.1.1) and H.265 (E.2.1).
@Suite struct VideoSignalTests {
    /// Parses the bits `write` produces, followed by a marker byte; returns the signal and the bits it consumed.
    static func parse(_ write: (inout BitWriter) -> Void) throws(BitstreamError) -> (signal: VideoSignal, bits: Int) {
        var w = BitWriter()
        write(&w)
        w.u(8, 0xA5)
        var r = BitReader(escapeRBSP(w.bytes)[...])
        let signal = try VideoSignal(&r)
        return (signal, r.bitsRead)
    }

    @Test func nothingPresentIsFourAbsentFlags() throws {
        let parsed = try Self.parse { $0.u(4, 0) }
        #expect(parsed.signal.sampleAspectRatio == nil && parsed.signal.colour == nil)
        #expect(parsed.bits == 4)
    }

    @Test(arguments: [(1, 1, 1), (2, 12, 11), (3, 10, 11), (4, 16, 11), (5, 40, 33), (13, 160, 99), (14, 4, 3), (15, 3, 2), (16, 2, 1)])
    func aspectRatioIdcsMapToTableE1(idc: Int, width: Int, height: Int) throws {
        let parsed = try Self.parse { w in w.flag(true); w.u(8, UInt64(idc)); w.u(3, 0) }
        let sar = try #require(parsed.signal.sampleAspectRatio)
        #expect(sar.0 == width && sar.1 == height)
    }

    @Test(arguments: [0, 17, 100, 254])
    func unspecifiedAndReservedAspectRatiosAreNone(idc: Int) throws {
        // 0 is Unspecified and 17…254 are reserved (Table E-1): no ratio, and no extra bits read.
        let parsed = try Self.parse { w in w.flag(true); w.u(8, UInt64(idc)); w.u(3, 0) }
        #expect(parsed.signal.sampleAspectRatio == nil)
        #expect(parsed.bits == 12)
    }

    @Test func extendedSARCarriesItsOwnWidthAndHeight() throws {
        // aspect_ratio_idc 255 (EXTENDED_SAR) is followed by sar_width and sar_height, 16 bits each.
        let parsed = try Self.parse { w in w.flag(true); w.u(8, 255); w.u(16, 64); w.u(16, 45); w.u(3, 0) }
        #expect(parsed.signal.sampleAspectRatio.map { [$0.0, $0.1] } == [64, 45])
        #expect(parsed.bits == 1 + 8 + 32 + 3)
        // A zero in either is "unspecified" (E.2.1), not a ratio to divide by.
        for (width, height) in [(0, 45), (64, 0)] as [(UInt64, UInt64)] {
            let zero = try Self.parse { w in w.flag(true); w.u(8, 255); w.u(16, width); w.u(16, height); w.u(3, 0) }
            #expect(zero.signal.sampleAspectRatio == nil, "\(width):\(height)")
        }
    }

    @Test func videoSignalTypeWithoutColourDescriptionLeavesItUnspecified() throws {
        // overscan_info_present_flag with its one flag, then video_format, full range and no colour description.
        let parsed = try Self.parse { w in
            w.flag(false)
            w.flag(true); w.flag(true)
            w.flag(true); w.u(3, 5); w.flag(true); w.flag(false)
            w.flag(false)
        }
        let colour = try #require(parsed.signal.colour)
        #expect(colour.fullRange)
        // 2 is "unspecified" for each of the three code points (ISO/IEC 23091-2).
        #expect(colour.primaries == 2 && colour.transfer == 2 && colour.matrix == 2)
        #expect(parsed.bits == 10)
    }

    @Test func colourDescriptionCodePointsAreRead() throws {
        // BT.2020 primaries, PQ transfer (16), BT.2020 non-constant luminance matrix (9), limited range.
        let parsed = try Self.parse { w in
            w.u(2, 0)
            w.flag(true); w.u(3, 5); w.flag(false); w.flag(true); w.u(8, 9); w.u(8, 16); w.u(8, 9)
            w.flag(false)
        }
        let colour = try #require(parsed.signal.colour)
        #expect(!colour.fullRange && colour.primaries == 9 && colour.transfer == 16 && colour.matrix == 9)
        #expect(parsed.bits == 2 + 6 + 24 + 1)
    }

    @Test func chromaSampleLocationsAreZeroToFive() throws {
        let five = try Self.parse { w in w.u(3, 0); w.flag(true); w.ue(5); w.ue(5) }
        #expect(five.bits == 4 + 5 + 5, "ue(5) is 00110")
        #expect(throws: BitstreamError.outOfRange(element: "chroma_sample_loc_type_top_field", value: 6)) {
            try Self.parse { w in w.u(3, 0); w.flag(true); w.ue(6); w.ue(0) }
        }
        #expect(throws: BitstreamError.outOfRange(element: "chroma_sample_loc_type_bottom_field", value: 6)) {
            try Self.parse { w in w.u(3, 0); w.flag(true); w.ue(0); w.ue(6) }
        }
    }

    @Test func aVUICutShortNamesTheFieldItLacks() {
        func parse(_ bytes: [UInt8]) throws(BitstreamError) {
            var r = BitReader(bytes[...])
            _ = try VideoSignal(&r)
        }
        #expect(throws: BitstreamError.truncated(element: "aspect_ratio_info_present_flag")) { try parse([]) }
        // Flag, idc 255, a whole sar_width and half a sar_height.
        #expect(throws: BitstreamError.truncated(element: "sar_height")) { try parse([0xFF, 0x80, 0x20, 0x00]) }
        // Colour description announced, the matrix missing.
        var w = BitWriter()
        w.u(2, 0); w.flag(true); w.u(3, 5); w.flag(false); w.flag(true); w.u(8, 1); w.u(8, 1)
        #expect(throws: BitstreamError.truncated(element: "matrix_coefficients")) { try parse(w.bytes) }
    }
}
