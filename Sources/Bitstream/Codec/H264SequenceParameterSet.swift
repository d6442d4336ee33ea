/// An H.264 sequence parameter set (7.3.2.1.1), parsed in full: every profile's fields, scaling lists
/// skipped by their own syntax, cropping, and the VUI with timing, HRD and bitstream restriction.
public struct H264SequenceParameterSet: Sendable, Hashable {
    public var id: Int
    public var profileIdc: Int
    public var constraintFlags: UInt8
    public var levelIdc: Int
    public var chromaFormat: ChromaFormat
    public var separateColourPlane: Bool
    public var bitDepthLuma: Int
    public var bitDepthChroma: Int
    public var log2MaxFrameNum: Int
    public var picOrderCntType: Int
    public var log2MaxPicOrderCntLsb: Int
    public var deltaPicOrderAlwaysZero: Bool
    public var maxNumRefFrames: Int
    public var widthInMacroblocks: Int
    public var heightInMapUnits: Int
    public var frameMbsOnly: Bool
    public var vui: H264VUI?
    public var format: SequenceFormat

    /// Profiles whose SPS carries chroma format, bit depths and scaling matrices (7.3.2.1.1).
    static let highProfiles: Set<Int> = [100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135]

    /// - Parameter payload: the NAL unit after its one-byte header, escaped.
    public init(payload: ArraySlice<UInt8>) throws(BitstreamError) {
        var r = BitReader(payload)
        profileIdc = Int(try r.bits(8, "profile_idc"))
        constraintFlags = UInt8(try r.bits(8, "constraint_set_flags"))
        levelIdc = Int(try r.bits(8, "level_idc"))
        id = try r.ue("seq_parameter_set_id", max: 31)
        let chromaFormatIdc: Int
        (chromaFormatIdc, separateColourPlane, bitDepthLuma, bitDepthChroma) = Self.highProfiles.contains(profileIdc)
            ? try Self.readChromaAndDepth(&r) : (1, false, 8, 8)
        chromaFormat = ChromaFormat(rawValue: chromaFormatIdc)!
        log2MaxFrameNum = try r.ue("log2_max_frame_num_minus4", max: 12) + 4
        picOrderCntType = try r.ue("pic_order_cnt_type", max: 2)
        log2MaxPicOrderCntLsb = 0
        deltaPicOrderAlwaysZero = false
        if picOrderCntType == 0 {
            log2MaxPicOrderCntLsb = try r.ue("log2_max_pic_order_cnt_lsb_minus4", max: 12) + 4
        } else if picOrderCntType == 1 {
            deltaPicOrderAlwaysZero = try r.flag("delta_pic_order_always_zero_flag")
            _ = try r.se("offset_for_non_ref_pic")
            _ = try r.se("offset_for_top_to_bottom_field")
            let cycle = try r.ue("num_ref_frames_in_pic_order_cnt_cycle", max: 255)
            for _ in 0..<cycle { _ = try r.se("offset_for_ref_frame") }
        }
        maxNumRefFrames = try r.ue("max_num_ref_frames", max: 16)
        _ = try r.flag("gaps_in_frame_num_value_allowed_flag")
        let maxMacroblocks = ParameterSetLimits.maximumDimension / 16 + 1
        widthInMacroblocks = try r.ue("pic_width_in_mbs_minus1", max: UInt32(maxMacroblocks - 1)) + 1
        heightInMapUnits = try r.ue("pic_height_in_map_units_minus1", max: UInt32(maxMacroblocks - 1)) + 1
        frameMbsOnly = try r.flag("frame_mbs_only_flag")
        if !frameMbsOnly { _ = try r.flag("mb_adaptive_frame_field_flag") }
        _ = try r.flag("direct_8x8_inference_flag")
        let codedWidth = widthInMacroblocks * 16
        let codedHeight = heightInMapUnits * 16 * (frameMbsOnly ? 1 : 2)
        guard codedWidth <= ParameterSetLimits.maximumDimension else {
            throw .outOfRange(element: "pic_width_in_mbs_minus1", value: Int64(widthInMacroblocks - 1))
        }
        guard codedHeight <= ParameterSetLimits.maximumDimension,
              codedWidth * codedHeight <= ParameterSetLimits.maximumArea else {
            throw .outOfRange(element: "pic_height_in_map_units_minus1", value: Int64(heightInMapUnits - 1))
        }
        // Crop units (7-19 … 7-22): chroma units unless ChromaArrayType is 0, doubled vertically for fields.
        let sub = separateColourPlane || chromaFormatIdc == 0 ? (width: 1, height: 1) : chromaFormat.subsampling
        let crop = try r.flag("frame_cropping_flag")
            ? try ParameterSetLimits.readCropping(
                &r, names: ("frame_crop_left_offset", "frame_crop_right_offset", "frame_crop_top_offset", "frame_crop_bottom_offset"),
                unitX: sub.width, unitY: sub.height * (frameMbsOnly ? 1 : 2), codedWidth: codedWidth, codedHeight: codedHeight)
            : [0, 0, 0, 0]
        vui = try r.flag("vui_parameters_present_flag") ? try H264VUI(&r) : nil

        format = SequenceFormat(
            codec: .h264, codedWidth: codedWidth, codedHeight: codedHeight, crop: crop, chromaFormat: chromaFormat,
            bitDepthLuma: bitDepthLuma, bitDepthChroma: bitDepthChroma, profile: profileIdc, level: levelIdc
        )
        completeFormat()
    }

    /// chroma_format_idc, separate_colour_plane_flag and the bit depths of the high profiles' SPS; their scaling
    /// matrices skipped by their own syntax.
    private static func readChromaAndDepth(_ r: inout BitReader) throws(BitstreamError) -> (Int, Bool, Int, Int) {
        let chromaFormatIdc = try r.ue("chroma_format_idc", max: 3)
        let separateColourPlane = chromaFormatIdc == 3 ? try r.flag("separate_colour_plane_flag") : false
        let bitDepthLuma = try r.ue("bit_depth_luma_minus8", max: 6) + 8
        let bitDepthChroma = try r.ue("bit_depth_chroma_minus8", max: 6) + 8
        _ = try r.flag("qpprime_y_zero_transform_bypass_flag")
        if try r.flag("seq_scaling_matrix_present_flag") {
            for list in 0..<(chromaFormatIdc != 3 ? 8 : 12) {
                if try r.flag("seq_scaling_list_present_flag") {
                    try skipScalingList(&r, size: list < 6 ? 16 : 64)
                }
            }
        }
        return (chromaFormatIdc, separateColourPlane, bitDepthLuma, bitDepthChroma)
    }

    /// What the VUI and the level add to the format: timing, aspect ratio, colour, DPB size and reordering.
    private mutating func completeFormat() {
        if let vui {
            format.frameRate = vui.frameRate
            format.sampleAspectRatio = vui.sampleAspectRatio
            format.colour = vui.colour
        }
        format.decodedPictureBufferFrames = vui?.maxDecFrameBuffering
            ?? Self.maximumDPBFrames(levelIdc: levelIdc, constraintSet3: constraintFlags & 0x10 != 0,
                                     frameMacroblocks: widthInMacroblocks * heightInMapUnits * (frameMbsOnly ? 1 : 2))
        format.reorderDepthIsSignalled = vui?.maxNumReorderFrames != nil
        format.reorderDepth = Self.reorderDepth(
            vui: vui, profileIdc: profileIdc, constraintFlags: constraintFlags, picOrderCntType: picOrderCntType
        )
    }

    /// Reordering is known only from the bitstream restriction, or when the stream cannot reorder at all:
    /// with POC type 2 output order is decoding order. (Baseline has no B slices, but P pictures may still be
    /// output out of decoding order, so the profile proves nothing.)
    static func reorderDepth(vui: H264VUI?, profileIdc: Int, constraintFlags: UInt8, picOrderCntType: Int) -> Int? {
        if let explicit = vui?.maxNumReorderFrames { return explicit }
        return picOrderCntType == 2 ? 0 : nil
    }

    /// MaxDpbFrames (A.3.1 h, Table A-1): MaxDpbMbs of the level over the frame size, at most 16.
    static func maximumDPBFrames(levelIdc: Int, constraintSet3: Bool, frameMacroblocks: Int) -> Int {
        let maxDpbMbs: Int
        switch levelIdc {
        case 9, 10: maxDpbMbs = 396
        case 11: maxDpbMbs = constraintSet3 ? 396 : 900
        case 12, 13, 20: maxDpbMbs = 2376
        case 21: maxDpbMbs = 4752
        case 22, 30: maxDpbMbs = 8100
        case 31: maxDpbMbs = 18000
        case 32: maxDpbMbs = 20480
        case 40, 41: maxDpbMbs = 32768
        case 42: maxDpbMbs = 34816
        case 50: maxDpbMbs = 110400
        case 51, 52: maxDpbMbs = 184320
        default: maxDpbMbs = 696320
        }
        return max(1, min(16, maxDpbMbs / max(1, frameMacroblocks)))
    }

    /// scaling_list() (7.3.2.1.1.1): only the syntax, to reach the fields after it.
    static func skipScalingList(_ r: inout BitReader, size: Int) throws(BitstreamError) {
        var lastScale = 8
        var nextScale = 8
        for _ in 0..<size where nextScale != 0 {
            let delta = try r.se("delta_scale", range: -128...127)
            nextScale = (lastScale + delta + 256) % 256
            if nextScale != 0 { lastScale = nextScale }
        }
    }
}

/// H.264 VUI parameters (Annex E.1.1): what a receiver uses, with the HRD skipped by its syntax.
public struct H264VUI: Sendable, Hashable {
    public var sampleAspectRatio: (Int, Int)? {
        get { sar.map { ($0[0], $0[1]) } }
        set { sar = newValue.map { [$0.0, $0.1] } }
    }
    private var sar: [Int]?
    public var colour: ColourDescription?
    public var numUnitsInTick: UInt32 = 0
    public var timeScale: UInt32 = 0
    public var fixedFrameRate = false
    public var maxNumReorderFrames: Int?
    public var maxDecFrameBuffering: Int?

    /// Frame rate from the timing info: time_scale / (2 × num_units_in_tick), as the spec counts field ticks.
    public var frameRate: FrameRate? {
        guard numUnitsInTick > 0, timeScale > 0 else { return nil }
        let numerator = Int(timeScale)
        let denominator = 2 * Int(numUnitsInTick)
        let divisor = greatestCommonDivisor(numerator, denominator)
        return FrameRate(numerator: numerator / divisor, denominator: denominator / divisor)
    }

    init(_ r: inout BitReader) throws(BitstreamError) {
        let signal = try VideoSignal(&r)
        sampleAspectRatio = signal.sampleAspectRatio
        colour = signal.colour
        if try r.flag("timing_info_present_flag") {
            numUnitsInTick = try r.bits(32, "num_units_in_tick")
            timeScale = try r.bits(32, "time_scale")
            fixedFrameRate = try r.flag("fixed_frame_rate_flag")
        }
        let nalHRD = try r.flag("nal_hrd_parameters_present_flag")
        if nalHRD { try Self.skipHRD(&r) }
        let vclHRD = try r.flag("vcl_hrd_parameters_present_flag")
        if vclHRD { try Self.skipHRD(&r) }
        if nalHRD || vclHRD { _ = try r.flag("low_delay_hrd_flag") }
        _ = try r.flag("pic_struct_present_flag")
        if try r.flag("bitstream_restriction_flag") {
            _ = try r.flag("motion_vectors_over_pic_boundaries_flag")
            _ = try r.ue("max_bytes_per_pic_denom", max: 16)
            _ = try r.ue("max_bits_per_mb_denom", max: 16)
            _ = try r.ue("log2_max_mv_length_horizontal", max: 16)
            _ = try r.ue("log2_max_mv_length_vertical", max: 16)
            maxNumReorderFrames = try r.ue("max_num_reorder_frames", max: 16)
            maxDecFrameBuffering = try r.ue("max_dec_frame_buffering", max: 16)
        }
    }

    /// hrd_parameters() (E.1.2).
    static func skipHRD(_ r: inout BitReader) throws(BitstreamError) {
        let count = try r.ue("cpb_cnt_minus1", max: 31) + 1
        _ = try r.bits(8, "bit_rate_scale, cpb_size_scale")
        for _ in 0..<count {
            _ = try r.ue("bit_rate_value_minus1")
            _ = try r.ue("cpb_size_value_minus1")
            _ = try r.flag("cbr_flag")
        }
        _ = try r.bits(20, "hrd delay lengths")
    }
}


func greatestCommonDivisor(_ a: Int, _ b: Int) -> Int {
    var (x, y) = (a, b)
    while y != 0 { (x, y) = (y, x % y) }
    return max(x, 1)
}
