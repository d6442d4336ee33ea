/// Chroma sampling of a sequence (`chroma_format_idc`).
public enum ChromaFormat: Int, Sendable, Hashable, CustomStringConvertible {
    case monochrome = 0, yuv420 = 1, yuv422 = 2, yuv444 = 3

    public var description: String {
        switch self {
        case .monochrome: return "4:0:0"
        case .yuv420: return "4:2:0"
        case .yuv422: return "4:2:2"
        case .yuv444: return "4:4:4"
        }
    }
    /// SubWidthC and SubHeightC (Table 6-1); 1 for monochrome.
    var subsampling: (width: Int, height: Int) {
        switch self {
        case .monochrome, .yuv444: return (1, 1)
        case .yuv420: return (2, 2)
        case .yuv422: return (2, 1)
        }
    }
}

/// A frame rate as the exact ratio the stream signals.
public struct FrameRate: Sendable, Hashable, CustomStringConvertible {
    public var numerator: Int
    public var denominator: Int
    public init(numerator: Int, denominator: Int) {
        self.numerator = numerator
        self.denominator = denominator
    }
    public var framesPerSecond: Double { Double(numerator) / Double(denominator) }
    public var description: String {
        let value = (framesPerSecond * 1000).rounded() / 1000
        return value == value.rounded() ? String(Int(value)) : String(value)
    }
}

/// Colour description from the VUI (ISO/IEC 23091-2 code points; 2 means unspecified).
public struct ColourDescription: Sendable, Hashable {
    public var fullRange = false
    public var primaries = 2
    public var transfer = 2
    public var matrix = 2
}

/// What a receiver needs to know about a coded video sequence, whichever the codec: the common view of an
/// H.264 or H.265 SPS (with the VPS for H.265 timing). Compared field by field to report what changed.
public struct SequenceFormat: Sendable, Hashable {
    public var codec: VideoCodec
    /// Decoded picture size before cropping.
    public var codedWidth: Int
    public var codedHeight: Int
    /// Display size after the cropping window / conformance window.
    public var width: Int
    public var height: Int
    /// Cropping in luma samples: left, right, top, bottom.
    public var crop: [Int]
    public var chromaFormat: ChromaFormat
    public var bitDepthLuma: Int
    public var bitDepthChroma: Int
    /// profile_idc / general_profile_idc.
    public var profile: Int
    /// level_idc (H.264: 10 × level) / general_level_idc (H.265: 30 × level).
    public var level: Int
    public var frameRate: FrameRate?
    /// Frames the decoder may hold back for reordering; nil when the stream does not say and the profile allows
    /// reordering (the decoder must then assume the worst).
    public var reorderDepth: Int?
    /// The reorder depth is stated in the bitstream (H.264 bitstream_restriction, H.265 SPS), not inferred.
    public var reorderDepthIsSignalled = false
    /// Frames the decoded picture buffer holds (H.264: `max_dec_frame_buffering`, else what the level allows;
    /// H.265: `sps_max_dec_pic_buffering`): the most reordering the stream can have.
    public var decodedPictureBufferFrames = 16
    public var sampleAspectRatio: (Int, Int)? {
        get { sarStorage.map { ($0[0], $0[1]) } }
        set { sarStorage = newValue.map { [$0.0, $0.1] } }
    }
    private var sarStorage: [Int]?
    public var colour: ColourDescription?

    public init(
        codec: VideoCodec, codedWidth: Int, codedHeight: Int, crop: [Int], chromaFormat: ChromaFormat,
        bitDepthLuma: Int, bitDepthChroma: Int, profile: Int, level: Int
    ) {
        self.codec = codec
        self.codedWidth = codedWidth
        self.codedHeight = codedHeight
        self.crop = crop
        width = codedWidth - crop[0] - crop[1]
        height = codedHeight - crop[2] - crop[3]
        self.chromaFormat = chromaFormat
        self.bitDepthLuma = bitDepthLuma
        self.bitDepthChroma = bitDepthChroma
        self.profile = profile
        self.level = level
    }

    /// The aspects in which `other` differs from `self`.
    public func changes(to other: SequenceFormat) -> FormatChanges {
        var changes: FormatChanges = []
        if codec != other.codec { changes.insert(.codec) }
        if codedWidth != other.codedWidth || codedHeight != other.codedHeight { changes.insert(.size) }
        if crop != other.crop { changes.insert(.crop) }
        if bitDepthLuma != other.bitDepthLuma || bitDepthChroma != other.bitDepthChroma { changes.insert(.bitDepth) }
        if chromaFormat != other.chromaFormat { changes.insert(.chromaFormat) }
        if profile != other.profile || level != other.level { changes.insert(.profile) }
        if frameRate != other.frameRate || reorderDepth != other.reorderDepth
            || sarStorage != other.sarStorage || colour != other.colour {
            changes.insert(.other)
        }
        return changes
    }
}

/// What changed between two parameter sets with the same id.
public struct FormatChanges: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    public static let codec = Self(rawValue: 1 << 0)
    public static let size = Self(rawValue: 1 << 1)
    public static let crop = Self(rawValue: 1 << 2)
    public static let bitDepth = Self(rawValue: 1 << 3)
    public static let chromaFormat = Self(rawValue: 1 << 4)
    public static let profile = Self(rawValue: 1 << 5)
    /// Timing, reordering, aspect ratio, colour, or fields that do not change the output format.
    public static let other = Self(rawValue: 1 << 6)

    public static let names: [(FormatChanges, String)] = [
        (.codec, "codec"), (.size, "size"), (.crop, "crop"), (.bitDepth, "bit_depth"),
        (.chromaFormat, "chroma_format"), (.profile, "profile"), (.other, "other"),
    ]
    public var names: [String] { Self.names.filter { contains($0.0) }.map(\.1) }
    public var description: String { names.joined(separator: ",") }
}

/// Hard limits applied while parsing, before anything is sized from a network-controlled number.
public enum ParameterSetLimits {
    /// Largest picture dimension in luma samples: √(8 × MaxLumaPs) for the highest level of either codec.
    public static let maximumDimension = 16_888
    /// Largest picture area in luma samples (H.264 level 6.2 MaxFS × 256; H.265 level 6.2 MaxLumaPs).
    public static let maximumArea = 35_651_584
}

extension ParameterSetLimits {
    /// The cropping of a picture (H.264 frame_crop, H.265 conformance window): four offsets read as `names`
    /// (left, right, top, bottom), in samples; each pair must leave a picture of the coded size.
    static func readCropping(
        _ r: inout BitReader, names: (StaticString, StaticString, StaticString, StaticString),
        unitX: Int, unitY: Int, codedWidth: Int, codedHeight: Int
    ) throws(BitstreamError) -> [Int] {
        let limit = UInt32(maximumDimension)
        let crop = [try r.ue(names.0, max: limit) * unitX, try r.ue(names.1, max: limit) * unitX,
                    try r.ue(names.2, max: limit) * unitY, try r.ue(names.3, max: limit) * unitY]
        guard crop[0] + crop[1] < codedWidth else { throw .outOfRange(element: names.0, value: Int64(crop[0] + crop[1])) }
        guard crop[2] + crop[3] < codedHeight else { throw .outOfRange(element: names.2, value: Int64(crop[2] + crop[3])) }
        return crop
    }
}
