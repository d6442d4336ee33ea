import Bitstream
import StreamrecvTestSupport
import Testing

/// H.265 VPS, SPS and PPS (7.3.2.1, 7.3.2.2.1, 7.3.2.3.1) built bit by bit, with profile_tier_level (7.3.3).
@Suite struct H265ParameterSetsTests {
    /// profile_tier_level(1, maxSubLayersMinus1). Sub-layer entries are filled with ones so that a parser that skips
    /// the wrong number of bits misreads what follows.
    static func profileTierLevel(
        _ w: inout BitWriter, maxSubLayersMinus1: Int, profile: UInt64 = 1, tier: Bool = false, level: UInt64 = 93,
        subLayerProfile: [Bool] = [], subLayerLevel: [Bool] = []
    ) {
        w.u(2, 0)  // general_profile_space
        w.flag(tier)
        w.u(5, profile)
        w.u(32, 1 << (31 - profile))  // general_profile_compatibility_flag[profile]
        w.u(4, 0b1001)  // progressive, not interlaced, not non-packed, frame only
        w.u(43, 0)
        w.u(1, 0)
        w.u(8, level)
        for i in 0..<maxSubLayersMinus1 {
            w.flag(subLayerProfile.indices.contains(i) && subLayerProfile[i])
            w.flag(subLayerLevel.indices.contains(i) && subLayerLevel[i])
        }
        if maxSubLayersMinus1 > 0 { for _ in maxSubLayersMinus1..<8 { w.u(2, 0) } }
        for i in 0..<maxSubLayersMinus1 {
            if subLayerProfile.indices.contains(i) && subLayerProfile[i] { w.u(44, (1 << 44) - 1); w.u(44, (1 << 44) - 1) }
            if subLayerLevel.indices.contains(i) && subLayerLevel[i] { w.u(8, 0xFF) }
        }
    }

    // MARK: VPS

    static func vps(
        id: UInt64 = 0, maxSubLayersMinus1: Int = 0, subLayerProfile: [Bool] = [], subLayerLevel: [Bool] = [],
        orderingInfo: Bool = true, reorder: [UInt64] = [0], maxLayerId: UInt64 = 0, layerSetsMinus1: UInt64 = 0,
        timing: (tick: UInt64, scale: UInt64)? = nil
    ) -> [UInt8] {
        var w = BitWriter()
        w.u(4, id)
        w.u(2, 3)  // vps_base_layer_internal_flag, vps_base_layer_available_flag
        w.u(6, 0)  // vps_max_layers_minus1
        w.u(3, UInt64(maxSubLayersMinus1))
        w.flag(true)
        w.u(16, 0xFFFF)
        profileTierLevel(&w, maxSubLayersMinus1: maxSubLayersMinus1, subLayerProfile: subLayerProfile, subLayerLevel: subLayerLevel)
        w.flag(orderingInfo)
        for value in reorder {
            w.ue(value + 1)  // vps_max_dec_pic_buffering_minus1
            w.ue(value)
            w.ue(0)
        }
        w.u(6, maxLayerId)
        w.ue(layerSetsMinus1)
        for _ in 0..<(layerSetsMinus1 * (maxLayerId + 1)) { w.flag(true) }  // layer_id_included_flag
        w.flag(timing != nil)
        if let timing {
            w.u(32, timing.tick)
            w.u(32, timing.scale)
            w.flag(false)  // vps_poc_proportional_to_timing_flag
            w.ue(0)  // vps_num_hrd_parameters
        }
        w.flag(false)  // vps_extension_flag
        w.trailingBits()
        return escapeRBSP(w.bytes)
    }

    @Test func theVPSGivesProfileLevelAndAFrameRateInLowestTerms() throws {
        let vps = try H265VideoParameterSet(payload: Self.vps(id: 15, timing: (2, 50))[...])
        #expect(vps.id == 15 && vps.maxSubLayersMinus1 == 0)
        #expect(vps.profileTierLevel.profileIdc == 1 && !vps.profileTierLevel.tierFlag && vps.profileTierLevel.levelIdc == 93)
        // time_scale / num_units_in_tick, with no field factor in H.265 (E.3.1): 50/2 is 25.
        #expect(vps.frameRate == FrameRate(numerator: 25, denominator: 1))
        let ntsc = try H265VideoParameterSet(payload: Self.vps(timing: (1001, 60000))[...])
        #expect(ntsc.frameRate == FrameRate(numerator: 60000, denominator: 1001))
        // A zero tick is no frame rate, not a division by zero.
        #expect(try H265VideoParameterSet(payload: Self.vps(timing: (0, 50))[...]).frameRate == nil)
        #expect(try H265VideoParameterSet(payload: Self.vps()[...]).frameRate == nil)
    }

    @Test func subLayerProfilesOrderingAndLayerSetsAreSkippedToReachTheTiming() throws {
        // Three sub-layers, one sub-layer profile (88 bits) and one level (8 bits), the 2-bit reserved fields, an
        // ordering entry per sub-layer (the last is the highest's) and 2 × 4 layer_id_included_flags.
        let payload = Self.vps(maxSubLayersMinus1: 2, subLayerProfile: [true, false], subLayerLevel: [false, true],
                               reorder: [0, 1, 2], maxLayerId: 3, layerSetsMinus1: 2, timing: (1, 30))
        let vps = try H265VideoParameterSet(payload: payload[...])
        #expect(vps.maxSubLayersMinus1 == 2 && vps.maxNumReorderPics == 2)
        #expect(vps.frameRate == FrameRate(numerator: 30, denominator: 1))
        // Without sub_layer_ordering_info only the highest sub-layer's entry is sent.
        let single = Self.vps(maxSubLayersMinus1: 2, orderingInfo: false, reorder: [1], timing: (1, 30))
        #expect(try H265VideoParameterSet(payload: single[...]).maxNumReorderPics == 1)
    }

    @Test func sevenSubLayersAreTheMost() throws {
        // vps_max_sub_layers_minus1 is 0…6 (7.4.3.1); 7 would index past the sub-layer arrays.
        let six = Self.vps(maxSubLayersMinus1: 6, subLayerProfile: Array(repeating: true, count: 6),
                           reorder: Array(0...6), timing: (1, 60))
        #expect(try H265VideoParameterSet(payload: six[...]).frameRate?.numerator == 60)
        #expect(throws: BitstreamError.outOfRange(element: "vps_max_sub_layers_minus1", value: 7)) {
            try H265VideoParameterSet(payload: Self.vps(maxSubLayersMinus1: 7)[...])
        }
    }

    // MARK: SPS

    struct SPS {
        var vpsId: UInt64 = 0
        var maxSubLayersMinus1 = 0
        var id: UInt64 = 0
        var profile: UInt64 = 1
        var tier = false
        var level: UInt64 = 123
        var chroma: UInt64 = 1
        var separateColourPlane = false
        var width: UInt64 = 1920
        var height: UInt64 = 1088
        var window: (UInt64, UInt64, UInt64, UInt64)? = (0, 0, 0, 4)
        var bitDepth: (UInt64, UInt64) = (8, 8)
        var log2PocLsb: UInt64 = 8
        var decPicBufferingMinus1: UInt64 = 4
        var reorder: UInt64 = 2
        var codingBlock: (UInt64, UInt64) = (0, 3)  // 8×8 to 64×64
        var scalingLists = false
        var pcm = false
        var shortTermSets: (inout BitWriter) -> Void = { $0.ue(0) }
        var longTerm: [UInt64]? = nil
        var vui: ((inout BitWriter) -> Void)? = nil
        /// The trailing fields (sps_extension_present_flag, rbsp_trailing_bits) the parser does not read.
        var trailing = true

        func bytes() -> [UInt8] {
            var w = BitWriter()
            w.u(4, vpsId)
            w.u(3, UInt64(maxSubLayersMinus1))
            w.flag(true)
            H265ParameterSetsTests.profileTierLevel(&w, maxSubLayersMinus1: maxSubLayersMinus1, profile: profile,
                                                    tier: tier, level: level)
            w.ue(id)
            w.ue(chroma)
            if chroma == 3 { w.flag(separateColourPlane) }
            w.ue(width)
            w.ue(height)
            w.flag(window != nil)
            if let window { w.ue(window.0); w.ue(window.1); w.ue(window.2); w.ue(window.3) }
            w.ue(bitDepth.0 - 8)
            w.ue(bitDepth.1 - 8)
            w.ue(log2PocLsb - 4)
            w.flag(true)  // sps_sub_layer_ordering_info_present_flag
            for _ in 0...maxSubLayersMinus1 { w.ue(decPicBufferingMinus1); w.ue(reorder); w.ue(0) }
            w.ue(codingBlock.0)
            w.ue(codingBlock.1)
            w.ue(0); w.ue(3)  // transform blocks 4×4 to 32×32
            w.ue(2); w.ue(2)  // max_transform_hierarchy_depth_inter, _intra
            w.flag(scalingLists)
            if scalingLists { w.flag(true); Self.scalingListData(&w) }
            w.flag(true); w.flag(true)  // amp, sample_adaptive_offset
            w.flag(pcm)
            if pcm { w.u(8, 0x77); w.ue(0); w.ue(1); w.flag(true) }
            shortTermSets(&w)
            w.flag(longTerm != nil)
            if let longTerm {
                w.ue(UInt64(longTerm.count))
                for lsb in longTerm { w.u(Int(log2PocLsb), lsb); w.flag(true) }
            }
            w.flag(true); w.flag(true)  // sps_temporal_mvp_enabled_flag, strong_intra_smoothing_enabled_flag
            w.flag(vui != nil)
            vui?(&w)
            if trailing { w.flag(false); w.trailingBits() }
            return escapeRBSP(w.bytes)
        }

        /// scaling_list_data() (7.3.4): explicit lists for sizeId 3 (with a DC coefficient), predicted elsewhere.
        static func scalingListData(_ w: inout BitWriter) {
            for sizeId in 0..<4 {
                for _ in stride(from: 0, to: 6, by: sizeId == 3 ? 3 : 1) {
                    w.flag(sizeId == 3)
                    if sizeId == 3 {
                        w.se(8)
                        for index in 0..<64 { w.se(index % 2 == 0 ? 3 : -3) }
                    } else {
                        w.ue(0)
                    }
                }
            }
        }

        func parse() throws(BitstreamError) -> H265SequenceParameterSet {
            try H265SequenceParameterSet(payload: bytes()[...])
        }
    }

    /// A VUI (E.2.1) with square pixels, full-range BT.709, a default display window and 30000/1001 timing.
    static func vui(_ w: inout BitWriter) {
        w.flag(true); w.u(8, 1)  // aspect_ratio_idc 1: 1:1
        w.flag(false)  // overscan
        w.flag(true); w.u(3, 5); w.flag(true); w.flag(true); w.u(8, 1); w.u(8, 1); w.u(8, 1)
        w.flag(false)  // chroma_loc
        w.u(3, 0)  // neutral_chroma, field_seq, frame_field_info
        w.flag(true); for _ in 0..<4 { w.ue(2) }  // default display window: not the conformance window
        w.flag(true); w.u(32, 1001); w.u(32, 30000)
        w.flag(false); w.flag(false); w.flag(false)  // poc proportional, hrd, bitstream restriction
    }

    @Test func a1080pSPSIsCroppedByItsConformanceWindowInChromaUnits() throws {
        let sps = try SPS(id: 15).parse()
        #expect(sps.id == 15 && sps.vpsId == 0 && sps.chromaFormat == .yuv420)
        // conf_win_bottom_offset 4 × SubHeightC 2 = 8 rows (7-17).
        #expect(sps.format.codedWidth == 1920 && sps.format.codedHeight == 1088)
        #expect(sps.format.width == 1920 && sps.format.height == 1080 && sps.format.crop == [0, 0, 0, 8])
        #expect(sps.format.codec == .h265 && sps.format.profile == 1 && sps.format.level == 123)
        #expect(sps.log2MaxPicOrderCntLsb == 8)
        // The SPS states its reordering (7.4.3.2.1): no guess is needed.
        #expect(sps.format.reorderDepth == 2 && sps.format.reorderDepthIsSignalled)
        #expect(sps.format.decodedPictureBufferFrames == 5 && sps.maxDecPicBuffering == 5)
        #expect(sps.format.frameRate == nil)
    }

    @Test(arguments: [(UInt64(0), false, 1, 1), (1, false, 2, 2), (2, false, 2, 1), (3, false, 1, 1), (3, true, 1, 1)])
    func conformanceWindowUnitsFollowTheChromaFormat(chroma: UInt64, separate: Bool, unitX: Int, unitY: Int) throws {
        // SubWidthC and SubHeightC (Table 6-1); 1 for monochrome and separate colour planes.
        let sps = try SPS(chroma: chroma, separateColourPlane: separate, width: 640, height: 480, window: (1, 2, 3, 4)).parse()
        #expect(sps.chromaFormat.rawValue == Int(chroma) && sps.separateColourPlane == separate)
        #expect(sps.format.crop == [unitX, 2 * unitX, 3 * unitY, 4 * unitY])
        #expect(sps.format.width == 640 - 3 * unitX && sps.format.height == 480 - 7 * unitY)
    }

    @Test func main10SPSHasTenBitDepthsAndItsTier() throws {
        let sps = try SPS(profile: 2, tier: true, level: 153, bitDepth: (10, 10)).parse()
        #expect(sps.format.bitDepthLuma == 10 && sps.format.bitDepthChroma == 10 && sps.format.profile == 2)
        #expect(sps.profileTierLevel.tierFlag && sps.profileTierLevel.levelIdc == 153)
    }

    @Test func scalingListsPCMAndReferencePictureSetsAreReadThroughToTheVUI() throws {
        // Set 0: two negative and one positive picture; set 1 predicted from it (7.3.7) with four entries.
        var spec = SPS(scalingLists: true, pcm: true, longTerm: [5, 200], vui: Self.vui)
        spec.shortTermSets = { w in
            w.ue(2)
            w.ue(2); w.ue(1)
            for delta in [0, 1, 0] as [UInt64] { w.ue(delta); w.flag(true) }
            w.flag(true)  // inter_ref_pic_set_prediction_flag
            w.flag(false); w.ue(0)  // delta_rps_sign, abs_delta_rps_minus1
            for used in [true, false, true, true] { w.flag(used); if !used { w.flag(true) } }
        }
        let sps = try spec.parse()
        #expect(sps.format.frameRate == FrameRate(numerator: 30000, denominator: 1001))
        #expect(sps.format.sampleAspectRatio.map { [$0.0, $0.1] } == [1, 1])
        let colour = try #require(sps.format.colour)
        #expect(colour.fullRange && colour.primaries == 1 && colour.transfer == 1 && colour.matrix == 1)
        // The default display window is not cropping.
        #expect(sps.format.height == 1080)
    }

    @Test func aPredictedReferencePictureSetOfMoreThanSixteenPicturesIsRefused() throws {
        // Set 0 holds 16 pictures; set 1 predicts from it with 17 flags (0…NumDeltaPocs), all used: 17 > 16.
        func sets(usedInLast: Bool) -> (inout BitWriter) -> Void {
            { w in
                w.ue(2)
                w.ue(8); w.ue(8)
                for _ in 0..<16 { w.ue(0); w.flag(true) }
                w.flag(true); w.flag(true); w.ue(0)
                for index in 0...16 {
                    let used = index < 16 || usedInLast
                    w.flag(used)
                    if !used { w.flag(false) }
                }
            }
        }
        var spec = SPS(decPicBufferingMinus1: 15)
        spec.shortTermSets = sets(usedInLast: false)
        _ = try spec.parse()
        spec.shortTermSets = sets(usedInLast: true)
        #expect(throws: BitstreamError.outOfRange(element: "NumDeltaPocs", value: 17)) { try spec.parse() }
    }

    @Test func sizesAndCountsOutsideTheirRangesAreRefused() {
        func refused(_ spec: SPS, _ error: BitstreamError, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(throws: error, sourceLocation: sourceLocation) { try spec.parse() }
        }
        refused(SPS(width: 0, window: nil), .outOfRange(element: "pic_width_in_luma_samples", value: 0))
        refused(SPS(width: 16_889, window: nil), .outOfRange(element: "pic_width_in_luma_samples", value: 16_889))
        refused(SPS(height: 0, window: nil), .outOfRange(element: "pic_height_in_luma_samples", value: 0))
        // Each side within 16 888, but together beyond the largest picture area.
        refused(SPS(width: 16_888, height: 16_888, window: nil), .outOfRange(element: "pic_height_in_luma_samples", value: 16_888))
        refused(SPS(id: 16), .outOfRange(element: "sps_seq_parameter_set_id", value: 16))
        refused(SPS(chroma: 4), .outOfRange(element: "chroma_format_idc", value: 4))
        refused(SPS(maxSubLayersMinus1: 7), .outOfRange(element: "sps_max_sub_layers_minus1", value: 7))
        refused(SPS(bitDepth: (17, 8)), .outOfRange(element: "bit_depth_luma_minus8", value: 9))
        refused(SPS(log2PocLsb: 17), .outOfRange(element: "log2_max_pic_order_cnt_lsb_minus4", value: 13))
        // sps_max_num_reorder_pics ≤ sps_max_dec_pic_buffering_minus1 (7.4.3.2.1).
        refused(SPS(decPicBufferingMinus1: 2, reorder: 3), .outOfRange(element: "sps_max_num_reorder_pics", value: 3))
        // CtbLog2SizeY is at most 6: 64×64 minimum and one more doubling is 128.
        refused(SPS(codingBlock: (3, 1)), .outOfRange(element: "log2_diff_max_min_luma_coding_block_size", value: 1))
        refused(SPS(shortTermSets: { $0.ue(65) }), .outOfRange(element: "num_short_term_ref_pic_sets", value: 65))
        // Conformance window offsets that leave no picture: 2 × (480 + 480) luma columns of 1920 is all of them.
        refused(SPS(window: (480, 480, 0, 0)), .outOfRange(element: "conf_win_left_offset", value: 1920))
        refused(SPS(longTerm: Array(repeating: 1, count: 33)), .outOfRange(element: "num_long_term_ref_pics_sps", value: 33))
    }

    @Test func anSPSCutAnywhereBeforeItsLastFieldIsRefused() throws {
        // Without the trailing fields the last byte holds vui_parameters_present_flag's bit, the last one read.
        let spec = SPS(scalingLists: true, pcm: true, longTerm: [3], trailing: false)
        let full = spec.bytes()
        _ = try H265SequenceParameterSet(payload: full[...])
        for length in 0..<full.count {
            #expect(throws: BitstreamError.self, "length \(length)") {
                try H265SequenceParameterSet(payload: full.prefix(length))
            }
        }
    }

    // MARK: PPS

    static func pps(
        id: UInt64 = 0, spsId: UInt64 = 0, dependentSlices: Bool = false, refIdx: UInt64 = 0, initQP: Int64 = 0,
        cuQPDeltaDepth: UInt64? = nil, cbOffset: Int64 = 0, tiles: Bool = false, wavefronts: Bool = false
    ) -> [UInt8] {
        var w = BitWriter()
        w.ue(id)
        w.ue(spsId)
        w.flag(dependentSlices)
        w.flag(true)  // output_flag_present_flag
        w.u(3, 7)  // num_extra_slice_header_bits
        w.flag(true); w.flag(true)  // sign_data_hiding, cabac_init_present
        w.ue(refIdx); w.ue(0)
        w.se(initQP)
        w.flag(true); w.flag(true)  // constrained_intra_pred, transform_skip
        w.flag(cuQPDeltaDepth != nil)
        if let cuQPDeltaDepth { w.ue(cuQPDeltaDepth) }
        w.se(cbOffset); w.se(-12)
        w.flag(true); w.flag(true); w.flag(true); w.flag(true)  // chroma offsets, weighted pred/bipred, transquant
        w.flag(tiles)
        w.flag(wavefronts)
        return escapeRBSP(w.bytes)
    }

    @Test func thePPSFlagsAfterTheOptionalQPDeltaDepthAreRead() throws {
        for depth in [nil, 0, 3] as [UInt64?] {
            let pps = try H265PictureParameterSet(payload: Self.pps(id: 63, spsId: 15, dependentSlices: true, cuQPDeltaDepth: depth,
                                                                    tiles: true, wavefronts: false)[...])
            #expect(pps.id == 63 && pps.spsId == 15 && pps.dependentSliceSegmentsEnabled, "depth \(String(describing: depth))")
            #expect(pps.tilesEnabled && !pps.entropyCodingSyncEnabled, "depth \(String(describing: depth))")
        }
        let plain = try H265PictureParameterSet(payload: Self.pps(wavefronts: true)[...])
        #expect(!plain.dependentSliceSegmentsEnabled && !plain.tilesEnabled && plain.entropyCodingSyncEnabled)
    }

    @Test func ppsValuesOutsideTheirRangesAreRefused() throws {
        func parse(_ bytes: [UInt8]) throws(BitstreamError) { _ = try H265PictureParameterSet(payload: bytes[...]) }
        // 7.4.3.3.1: ids 0…63 and 0…15, init_qp_minus26 from −(26 + QpBdOffsetY) (16 bits: 48) to 25.
        #expect(throws: BitstreamError.outOfRange(element: "pps_pic_parameter_set_id", value: 64)) { try parse(Self.pps(id: 64)) }
        #expect(throws: BitstreamError.outOfRange(element: "pps_seq_parameter_set_id", value: 16)) { try parse(Self.pps(spsId: 16)) }
        try parse(Self.pps(initQP: -74))
        #expect(throws: BitstreamError.outOfRange(element: "init_qp_minus26", value: -75)) { try parse(Self.pps(initQP: -75)) }
        #expect(throws: BitstreamError.outOfRange(element: "init_qp_minus26", value: 26)) { try parse(Self.pps(initQP: 26)) }
        #expect(throws: BitstreamError.outOfRange(element: "pps_cb_qp_offset", value: 13)) { try parse(Self.pps(cbOffset: 13)) }
        #expect(throws: BitstreamError.outOfRange(element: "num_ref_idx_l0_default_active_minus1", value: 15)) {
            try parse(Self.pps(refIdx: 15))
        }
        let full = Self.pps(cuQPDeltaDepth: 1, wavefronts: true)
        for length in 0..<full.count {
            #expect(throws: BitstreamError.self, "length \(length)") { try parse(Array(full.prefix(length))) }
        }
    }
}
