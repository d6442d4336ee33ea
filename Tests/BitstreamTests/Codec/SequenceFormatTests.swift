@testable import Bitstream
import StreamrecvTestSupport
import Testing

/// The codec-neutral view of a sequence: chroma format, frame rate, what changed, and the cropping checks.
@Suite struct SequenceFormatTests {
    static func format(
        codec: VideoCodec = .h264, width: Int = 1920, height: Int = 1088, crop: [Int] = [0, 0, 0, 8],
        chroma: ChromaFormat = .yuv420, depth: Int = 8, profile: Int = 100, level: Int = 40
    ) -> SequenceFormat {
        SequenceFormat(codec: codec, codedWidth: width, codedHeight: height, crop: crop, chromaFormat: chroma,
                       bitDepthLuma: depth, bitDepthChroma: depth, profile: profile, level: level)
    }

    @Test func chromaFormatsAreNamedAndSubsampledAsTable6_1() {
        #expect(ChromaFormat.allNames == ["4:0:0", "4:2:0", "4:2:2", "4:4:4"])
        // SubWidthC × SubHeightC; monochrome has no chroma and counts in luma samples.
        let units = [ChromaFormat.monochrome, .yuv420, .yuv422, .yuv444].map { [$0.subsampling.width, $0.subsampling.height] }
        #expect(units == [[1, 1], [2, 2], [2, 1], [1, 1]])
    }

    @Test(arguments: [(30000, 1001, "29.97"), (24000, 1001, "23.976"), (60000, 1001, "59.94"), (25, 1, "25"),
                      (50, 2, "25"), (1, 3, "0.333"), (120, 1, "120")])
    func frameRatesPrintAsAtMostThreeDecimals(numerator: Int, denominator: Int, printed: String) {
        #expect(FrameRate(numerator: numerator, denominator: denominator).description == printed)
    }

    @Test func theExactRatioIsKeptBesideItsValue() {
        let ntsc = FrameRate(numerator: 30000, denominator: 1001)
        #expect(abs(ntsc.framesPerSecond - 29.970_029_97) < 1e-8)
        // 30000/1001 and 29.97/1 print alike but are different rates.
        #expect(ntsc != FrameRate(numerator: 2997, denominator: 100))
    }

    @Test func theDisplaySizeIsTheCodedSizeLessTheCropping() {
        let format = Self.format(width: 1920, height: 1088, crop: [2, 4, 6, 8])
        #expect(format.width == 1914 && format.height == 1074)
        #expect(format.codedWidth == 1920 && format.codedHeight == 1088)
    }

    @Test func anIdenticalFormatHasNoChanges() {
        #expect(Self.format().changes(to: Self.format()).isEmpty)
    }

    @Test func eachDifferenceIsReportedAsItsOwnAspect() {
        let base = Self.format()
        #expect(base.changes(to: Self.format(codec: .h265)) == .codec)
        #expect(base.changes(to: Self.format(width: 1280)) == .size)
        #expect(base.changes(to: Self.format(crop: [0, 0, 0, 0])) == .crop)
        #expect(base.changes(to: Self.format(chroma: .yuv422)) == .chromaFormat)
        #expect(base.changes(to: Self.format(depth: 10)) == .bitDepth)
        // Profile and level are one aspect.
        #expect(base.changes(to: Self.format(level: 41)) == .profile)
        #expect(base.changes(to: Self.format(profile: 66)) == .profile)
        // A new size with the same display size still changes both the coded size and the crop.
        #expect(base.changes(to: Self.format(height: 1080, crop: [0, 0, 0, 0])) == [.size, .crop])
    }

    @Test func timingReorderingAspectAndColourAreOther() {
        let base = Self.format()
        var timed = base
        timed.frameRate = FrameRate(numerator: 25, denominator: 1)
        var reordered = base
        reordered.reorderDepth = 2
        var anamorphic = base
        anamorphic.sampleAspectRatio = (4, 3)
        var coloured = base
        coloured.colour = ColourDescription(fullRange: true)
        for other in [timed, reordered, anamorphic, coloured] { #expect(base.changes(to: other) == .other) }
    }

    @Test func theSampleAspectRatioReadsBackAsSet() {
        var format = Self.format()
        #expect(format.sampleAspectRatio == nil)
        format.sampleAspectRatio = (64, 45)
        #expect(format.sampleAspectRatio.map { [$0.0, $0.1] } == [64, 45])
        format.sampleAspectRatio = nil
        #expect(format.sampleAspectRatio == nil && format == Self.format())
    }

    @Test func changeNamesAreListedInAFixedOrder() {
        // The daemon logs these: "changed: size,crop".
        let changes: FormatChanges = [.crop, .size, .other]
        #expect(changes.names == ["size", "crop", "other"])
        #expect(changes.description == "size,crop,other")
        #expect(FormatChanges().description == "")
        #expect(FormatChanges.names.map(\.1) == ["codec", "size", "crop", "bit_depth", "chroma_format", "profile", "other"])
    }

    // MARK: Cropping (H.264 7.4.2.1.1 frame_crop_*, H.265 7.4.3.2.1 conf_win_*)

    static func crop(_ offsets: [UInt64], unitX: Int = 2, unitY: Int = 2, width: Int = 64, height: Int = 48) throws(BitstreamError) -> [Int] {
        var w = BitWriter()
        for offset in offsets { w.ue(offset) }
        w.u(8, 0xFF)
        var r = BitReader(escapeRBSP(w.bytes)[...])
        return try ParameterSetLimits.readCropping(&r, names: ("left", "right", "top", "bottom"), unitX: unitX, unitY: unitY,
                                                   codedWidth: width, codedHeight: height)
    }

    @Test func croppingOffsetsAreCountedInUnits() throws {
        #expect(try Self.crop([1, 2, 3, 4]) == [2, 4, 6, 8])
        #expect(try Self.crop([1, 2, 3, 4], unitX: 1, unitY: 4) == [1, 2, 12, 16])
    }

    @Test func croppingMustLeaveAtLeastOneSample() throws {
        // The window's width is codedWidth − unitX × (left + right), and must be positive.
        #expect(try Self.crop([31, 0, 0, 0], unitX: 2, width: 64) == [62, 0, 0, 0])
        #expect(try Self.crop([0, 63, 0, 0], unitX: 1, width: 64) == [0, 63, 0, 0])
        #expect(throws: BitstreamError.outOfRange(element: "left", value: 64)) { try Self.crop([16, 16, 0, 0], width: 64) }
        #expect(try Self.crop([0, 0, 23, 0], unitY: 2, height: 48) == [0, 0, 46, 0])
        #expect(throws: BitstreamError.outOfRange(element: "top", value: 48)) { try Self.crop([0, 0, 12, 12], height: 48) }
    }

    @Test func aCroppingOffsetBeyondTheLargestPictureIsRefusedBeforeMultiplying() {
        // Each offset is bounded by itself, so that unit × offset cannot overflow or wrap.
        #expect(throws: BitstreamError.outOfRange(element: "right", value: 16_889)) { try Self.crop([0, 16_889, 0, 0]) }
        #expect(throws: BitstreamError.outOfRange(element: "bottom", value: 4_294_967_294)) {
            try Self.crop([0, 0, 0, 4_294_967_294])
        }
        #expect(throws: BitstreamError.truncated(element: "top")) {
            var r = BitReader([0b1100_0000][...])
            _ = try ParameterSetLimits.readCropping(&r, names: ("left", "right", "top", "bottom"), unitX: 1, unitY: 1,
                                                    codedWidth: 16, codedHeight: 16)
        }
    }
}

extension ChromaFormat {
    static var allNames: [String] { [ChromaFormat.monochrome, .yuv420, .yuv422, .yuv444].map(\.description) }
}
