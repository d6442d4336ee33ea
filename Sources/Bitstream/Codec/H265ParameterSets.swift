/// profile_tier_level() of H.265 (7.3.3): the general profile and level, sub-layer entries skipped.
public struct H265ProfileTierLevel: Sendable, Hashable {
    public var profileIdc: Int
    public var tierFlag: Bool
    public var levelIdc: Int

    init(_ r: inout BitReader, maxSubLayersMinus1: Int) throws(BitstreamError) {
        _ = try r.bits(2, "general_profile_space")
        tierFlag = try r.flag("general_tier_flag")
        profileIdc = Int(try r.bits(5, "general_profile_idc"))
        _ = try r.bits(32, "general_profile_compatibility_flags")
        _ = try r.bits(4, "general_source_flags")
        _ = try r.bits(32, "general_constraint_flags")
        _ = try r.bits(12, "general_constraint_flags")
        levelIdc = Int(try r.bits(8, "general_level_idc"))
        var profilePresent = [Bool](repeating: false, count: maxSubLayersMinus1)
        var levelPresent = [Bool](repeating: false, count: maxSubLayersMinus1)
        for i in 0..<maxSubLayersMinus1 {
            profilePresent[i] = try r.flag("sub_layer_profile_present_flag")
            levelPresent[i] = try r.flag("sub_layer_level_present_flag")
        }
        if maxSubLayersMinus1 > 0 { r.skip(2 * (8 - maxSubLayersMinus1)) }
        for i in 0..<maxSubLayersMinus1 {
            if profilePresent[i] { r.skip(88) }
            if levelPresent[i] { r.skip(8) }
        }
        try r.check("sub_layer profile_tier_level")
    }
}

/// Timing from a VPS or VUI: frame rate is time_scale / num_units_in_tick (no field factor in H.265).
func h265FrameRate(numUnitsInTick: UInt32, timeScale: UInt32) -> FrameRate? {
    guard numUnitsInTick > 0, timeScale > 0 else { return nil }
    let divisor = greatestCommonDivisor(Int(timeScale), Int(numUnitsInTick))
    return FrameRate(numerator: Int(timeScale) / divisor, denominator: Int(numUnitsInTick) / divisor)
}

/// An H.265 video parameter set (7.3.2.1), up to its timing info.
public struct H265VideoParameterSet: Sendable, Hashable {
    public var id: Int
    public var maxSubLayersMinus1: Int
    public var profileTierLevel: H265ProfileTierLevel
    public var maxNumReorderPics: Int
    public var frameRate: FrameRate?

    /// - Parameter payload: the NAL unit after its two-byte header, escaped.
    public init(payload: ArraySlice<UInt8>) throws(BitstreamError) {
        var r = BitReader(payload)
        id = Int(try r.bits(4, "vps_video_parameter_set_id"))
        _ = try r.bits(2, "vps_base_layer_flags")
        _ = try r.bits(6, "vps_max_layers_minus1")
        maxSubLayersMinus1 = Int(try r.bits(3, "vps_max_sub_layers_minus1"))
        guard maxSubLayersMinus1 <= 6 else {
            throw .outOfRange(element: "vps_max_sub_layers_minus1", value: Int64(maxSubLayersMinus1))
        }
        _ = try r.flag("vps_temporal_id_nesting_flag")
        _ = try r.bits(16, "vps_reserved_0xffff_16bits")
        profileTierLevel = try H265ProfileTierLevel(&r, maxSubLayersMinus1: maxSubLayersMinus1)
        let orderingInfoPresent = try r.flag("vps_sub_layer_ordering_info_present_flag")
        maxNumReorderPics = 0
        for _ in (orderingInfoPresent ? 0 : maxSubLayersMinus1)...maxSubLayersMinus1 {
            _ = try r.ue("vps_max_dec_pic_buffering_minus1", max: 15)
            maxNumReorderPics = try r.ue("vps_max_num_reorder_pics", max: 15)
            _ = try r.ue("vps_max_latency_increase_plus1")
        }
        let maxLayerId = Int(try r.bits(6, "vps_max_layer_id"))
        let layerSets = try r.ue("vps_num_layer_sets_minus1", max: 1023)
        r.skip(layerSets * (maxLayerId + 1))
        if try r.flag("vps_timing_info_present_flag") {
            let tick = try r.bits(32, "vps_num_units_in_tick")
            let scale = try r.bits(32, "vps_time_scale")
            frameRate = h265FrameRate(numUnitsInTick: tick, timeScale: scale)
        }
    }
}

/// An H.265 sequence parameter set (7.3.2.2.1), parsed through `st_ref_pic_set`s and long-term pictures to the
/// VUI, whose signal type, default display window and timing are read.
public struct H265SequenceParameterSet: Sendable, Hashable {
    public var id: Int
    public var vpsId: Int
    public var maxSubLayersMinus1: Int
    public var profileTierLevel: H265ProfileTierLevel
    public var chromaFormat: ChromaFormat
    public var separateColourPlane: Bool
    public var log2MaxPicOrderCntLsb: Int
    public var maxNumReorderPics: Int
    public var maxDecPicBuffering: Int
    public var format: SequenceFormat

    /// - Parameter payload: the NAL unit after its two-byte header, escaped.
    public init(payload: ArraySlice<UInt8>) throws(BitstreamError) {
        var r = BitReader(payload)
        vpsId = Int(try r.bits(4, "sps_video_parameter_set_id"))
        maxSubLayersMinus1 = Int(try r.bits(3, "sps_max_sub_layers_minus1"))
        guard maxSubLayersMinus1 <= 6 else {
            throw .outOfRange(element: "sps_max_sub_layers_minus1", value: Int64(maxSubLayersMinus1))
        }
        _ = try r.flag("sps_temporal_id_nesting_flag")
        profileTierLevel = try H265ProfileTierLevel(&r, maxSubLayersMinus1: maxSubLayersMinus1)
        id = try r.ue("sps_seq_parameter_set_id", max: 15)
        let chromaFormatIdc = try r.ue("chroma_format_idc", max: 3)
        chromaFormat = ChromaFormat(rawValue: chromaFormatIdc)!
        separateColourPlane = chromaFormatIdc == 3 ? try r.flag("separate_colour_plane_flag") : false
        let dimensionLimit = UInt32(ParameterSetLimits.maximumDimension)
        let codedWidth = try r.ue("pic_width_in_luma_samples", max: dimensionLimit)
        let codedHeight = try r.ue("pic_height_in_luma_samples", max: dimensionLimit)
        guard codedWidth > 0 else { throw .outOfRange(element: "pic_width_in_luma_samples", value: 0) }
        guard codedHeight > 0, codedWidth * codedHeight <= ParameterSetLimits.maximumArea else {
            throw .outOfRange(element: "pic_height_in_luma_samples", value: Int64(codedHeight))
        }
        // Conformance window offsets are in chroma sample units (7-16, 7-17).
        let sub = separateColourPlane ? (width: 1, height: 1) : chromaFormat.subsampling
        let crop = try r.flag("conformance_window_flag")
            ? try ParameterSetLimits.readCropping(
                &r, names: ("conf_win_left_offset", "conf_win_right_offset", "conf_win_top_offset", "conf_win_bottom_offset"),
                unitX: sub.width, unitY: sub.height, codedWidth: codedWidth, codedHeight: codedHeight)
            : [0, 0, 0, 0]
        let bitDepthLuma = try r.ue("bit_depth_luma_minus8", max: 8) + 8
        let bitDepthChroma = try r.ue("bit_depth_chroma_minus8", max: 8) + 8
        log2MaxPicOrderCntLsb = try r.ue("log2_max_pic_order_cnt_lsb_minus4", max: 12) + 4
        let orderingInfoPresent = try r.flag("sps_sub_layer_ordering_info_present_flag")
        maxNumReorderPics = 0
        maxDecPicBuffering = 1
        for _ in (orderingInfoPresent ? 0 : maxSubLayersMinus1)...maxSubLayersMinus1 {
            maxDecPicBuffering = try r.ue("sps_max_dec_pic_buffering_minus1", max: 15) + 1
            maxNumReorderPics = try r.ue("sps_max_num_reorder_pics", max: UInt32(maxDecPicBuffering - 1))
            _ = try r.ue("sps_max_latency_increase_plus1")
        }
        try Self.skipCodingTools(&r, log2MaxPicOrderCntLsb: log2MaxPicOrderCntLsb)

        format = SequenceFormat(
            codec: .h265, codedWidth: codedWidth, codedHeight: codedHeight, crop: crop, chromaFormat: chromaFormat,
            bitDepthLuma: bitDepthLuma, bitDepthChroma: bitDepthChroma,
            profile: profileTierLevel.profileIdc, level: profileTierLevel.levelIdc
        )
        format.reorderDepth = maxNumReorderPics
        format.reorderDepthIsSignalled = true
        format.decodedPictureBufferFrames = maxDecPicBuffering
        if try r.flag("vui_parameters_present_flag") { try Self.parseVUI(&r, into: &format) }
    }

    /// From the coding block sizes to strong_intra_smoothing_enabled_flag: nothing the daemon needs, but it must be
    /// read through (with its own bounds) to reach the VUI.
    private static func skipCodingTools(_ r: inout BitReader, log2MaxPicOrderCntLsb: Int) throws(BitstreamError) {
        let log2MinCodingBlock = try r.ue("log2_min_luma_coding_block_size_minus3", max: 3) + 3
        let log2DiffCodingBlock = try r.ue("log2_diff_max_min_luma_coding_block_size", max: 3)
        guard log2MinCodingBlock + log2DiffCodingBlock <= 6 else {
            throw .outOfRange(element: "log2_diff_max_min_luma_coding_block_size", value: Int64(log2DiffCodingBlock))
        }
        _ = try r.ue("log2_min_luma_transform_block_size_minus2", max: 3)
        _ = try r.ue("log2_diff_max_min_luma_transform_block_size", max: 3)
        _ = try r.ue("max_transform_hierarchy_depth_inter", max: 4)
        _ = try r.ue("max_transform_hierarchy_depth_intra", max: 4)
        if try r.flag("scaling_list_enabled_flag"), try r.flag("sps_scaling_list_data_present_flag") {
            try Self.skipScalingListData(&r)
        }
        _ = try r.flag("amp_enabled_flag")
        _ = try r.flag("sample_adaptive_offset_enabled_flag")
        if try r.flag("pcm_enabled_flag") {
            _ = try r.bits(8, "pcm_sample_bit_depths")
            _ = try r.ue("log2_min_pcm_luma_coding_block_size_minus3", max: 2)
            _ = try r.ue("log2_diff_max_min_pcm_luma_coding_block_size", max: 2)
            _ = try r.flag("pcm_loop_filter_disabled_flag")
        }
        let shortTermSets = try r.ue("num_short_term_ref_pic_sets", max: 64)
        var deltaPocCounts: [Int] = []
        deltaPocCounts.reserveCapacity(shortTermSets)
        for index in 0..<shortTermSets {
            deltaPocCounts.append(try Self.skipShortTermRefPicSet(&r, index: index, deltaPocCounts: deltaPocCounts))
        }
        if try r.flag("long_term_ref_pics_present_flag") {
            let count = try r.ue("num_long_term_ref_pics_sps", max: 32)
            r.skip(count * (log2MaxPicOrderCntLsb + 1))
            try r.check("lt_ref_pic_poc_lsb_sps")
        }
        _ = try r.flag("sps_temporal_mvp_enabled_flag")
        _ = try r.flag("strong_intra_smoothing_enabled_flag")
    }

    /// The VUI (E.2.1) up to its timing info: sample aspect ratio, colour, frame rate.
    static func parseVUI(_ r: inout BitReader, into format: inout SequenceFormat) throws(BitstreamError) {
        let signal = try VideoSignal(&r)
        format.sampleAspectRatio = signal.sampleAspectRatio
        format.colour = signal.colour
        _ = try r.bits(3, "neutral_chroma, field_seq, frame_field_info_present")
        if try r.flag("default_display_window_flag") {
            for _ in 0..<4 { _ = try r.ue("def_disp_win_offset") }
        }
        if try r.flag("vui_timing_info_present_flag") {
            let tick = try r.bits(32, "vui_num_units_in_tick")
            let scale = try r.bits(32, "vui_time_scale")
            format.frameRate = h265FrameRate(numUnitsInTick: tick, timeScale: scale)
        }
    }

    /// scaling_list_data() (7.3.4).
    static func skipScalingListData(_ r: inout BitReader) throws(BitstreamError) {
        for sizeId in 0..<4 {
            for _ in stride(from: 0, to: 6, by: sizeId == 3 ? 3 : 1) {
                if !(try r.flag("scaling_list_pred_mode_flag")) {
                    _ = try r.ue("scaling_list_pred_matrix_id_delta", max: 5)
                } else {
                    let coefficients = min(64, 1 << (4 + (sizeId << 1)))
                    if sizeId > 1 { _ = try r.se("scaling_list_dc_coef_minus8", range: -7...247) }
                    for _ in 0..<coefficients { _ = try r.se("scaling_list_delta_coef", range: -128...127) }
                }
            }
        }
    }

    /// st_ref_pic_set(index) (7.3.7) as it appears in an SPS; returns its NumDeltaPocs.
    static func skipShortTermRefPicSet(
        _ r: inout BitReader, index: Int, deltaPocCounts: [Int]
    ) throws(BitstreamError) -> Int {
        if index != 0, try r.flag("inter_ref_pic_set_prediction_flag") {
            _ = try r.flag("delta_rps_sign")
            _ = try r.ue("abs_delta_rps_minus1", max: 32767)
            let reference = deltaPocCounts[index - 1]
            var count = 0
            for _ in 0...reference {
                let used = try r.flag("used_by_curr_pic_flag")
                let useDelta = used ? true : try r.flag("use_delta_flag")
                if used || useDelta { count += 1 }
            }
            guard count <= 16 else { throw .outOfRange(element: "NumDeltaPocs", value: Int64(count)) }
            return count
        }
        let negative = try r.ue("num_negative_pics", max: 16)
        let positive = try r.ue("num_positive_pics", max: UInt32(16 - negative))
        for _ in 0..<(negative + positive) {
            _ = try r.ue("delta_poc_minus1", max: 32767)
            _ = try r.flag("used_by_curr_pic_flag")
        }
        return negative + positive
    }
}

/// An H.265 picture parameter set (7.3.2.3.1), up to the tiles and wavefront flags.
public struct H265PictureParameterSet: Sendable, Hashable {
    public var id: Int
    public var spsId: Int
    public var dependentSliceSegmentsEnabled: Bool
    public var tilesEnabled: Bool
    public var entropyCodingSyncEnabled: Bool

    /// - Parameter payload: the NAL unit after its two-byte header, escaped.
    public init(payload: ArraySlice<UInt8>) throws(BitstreamError) {
        var r = BitReader(payload)
        id = try r.ue("pps_pic_parameter_set_id", max: 63)
        spsId = try r.ue("pps_seq_parameter_set_id", max: 15)
        dependentSliceSegmentsEnabled = try r.flag("dependent_slice_segments_enabled_flag")
        _ = try r.flag("output_flag_present_flag")
        _ = try r.bits(3, "num_extra_slice_header_bits")
        _ = try r.flag("sign_data_hiding_enabled_flag")
        _ = try r.flag("cabac_init_present_flag")
        _ = try r.ue("num_ref_idx_l0_default_active_minus1", max: 14)
        _ = try r.ue("num_ref_idx_l1_default_active_minus1", max: 14)
        _ = try r.se("init_qp_minus26", range: -(26 + 6 * 8)...25)
        _ = try r.flag("constrained_intra_pred_flag")
        _ = try r.flag("transform_skip_enabled_flag")
        if try r.flag("cu_qp_delta_enabled_flag") { _ = try r.ue("diff_cu_qp_delta_depth", max: 6) }
        _ = try r.se("pps_cb_qp_offset", range: -12...12)
        _ = try r.se("pps_cr_qp_offset", range: -12...12)
        _ = try r.flag("pps_slice_chroma_qp_offsets_present_flag")
        _ = try r.flag("weighted_pred_flag")
        _ = try r.flag("weighted_bipred_flag")
        _ = try r.flag("transquant_bypass_enabled_flag")
        tilesEnabled = try r.flag("tiles_enabled_flag")
        entropyCodingSyncEnabled = try r.flag("entropy_coding_sync_enabled_flag")
    }
}
