/// An H.264 picture parameter set (7.3.2.2), parsed up to what slice headers and access-unit detection need.
/// The fields after `redundant_pic_cnt_present_flag` (8x8 transform, PPS scaling lists) are left to the decoder:
/// their syntax depends on the SPS, which may arrive later. Change detection compares the raw bytes.
public struct H264PictureParameterSet: Sendable, Hashable {
    public var id: Int
    public var spsId: Int
    public var entropyCodingModeCABAC: Bool
    public var bottomFieldPicOrderInFramePresent: Bool
    public var numSliceGroups: Int
    public var redundantPicCntPresent: Bool

    /// - Parameter payload: the NAL unit after its one-byte header, escaped.
    public init(payload: ArraySlice<UInt8>) throws(BitstreamError) {
        var r = BitReader(payload)
        id = try r.ue("pic_parameter_set_id", max: 255)
        spsId = try r.ue("seq_parameter_set_id", max: 31)
        entropyCodingModeCABAC = try r.flag("entropy_coding_mode_flag")
        bottomFieldPicOrderInFramePresent = try r.flag("bottom_field_pic_order_in_frame_present_flag")
        numSliceGroups = try r.ue("num_slice_groups_minus1", max: 7) + 1
        if numSliceGroups > 1 {
            let mapType = try r.ue("slice_group_map_type", max: 6)
            switch mapType {
            case 0:
                for _ in 0..<numSliceGroups { _ = try r.ue("run_length_minus1") }
            case 2:
                for _ in 0..<(numSliceGroups - 1) {
                    _ = try r.ue("top_left")
                    _ = try r.ue("bottom_right")
                }
            case 3, 4, 5:
                _ = try r.flag("slice_group_change_direction_flag")
                _ = try r.ue("slice_group_change_rate_minus1")
            case 6:
                let limit = UInt32(ParameterSetLimits.maximumArea / 256)
                let mapUnits = try r.ue("pic_size_in_map_units_minus1", max: limit) + 1
                var bits = 0
                while (1 << bits) < numSliceGroups { bits += 1 }
                r.skip(mapUnits * bits)
                try r.check("slice_group_id")
            default:
                break
            }
        }
        _ = try r.ue("num_ref_idx_l0_default_active_minus1", max: 31)
        _ = try r.ue("num_ref_idx_l1_default_active_minus1", max: 31)
        _ = try r.flag("weighted_pred_flag")
        _ = try r.bits(2, "weighted_bipred_idc")
        _ = try r.se("pic_init_qp_minus26", range: -(26 + 6 * 6)...25)
        _ = try r.se("pic_init_qs_minus26", range: -26...25)
        _ = try r.se("chroma_qp_index_offset", range: -12...12)
        _ = try r.flag("deblocking_filter_control_present_flag")
        _ = try r.flag("constrained_intra_pred_flag")
        redundantPicCntPresent = try r.flag("redundant_pic_cnt_present_flag")
    }
}

/// The fields of an H.264 slice header that decide where a primary coded picture begins (7.4.1.2.4).
public struct H264SliceHeader: Sendable, Hashable {
    public var firstMbInSlice: Int
    public var sliceType: Int
    public var ppsId: Int
    public var frameNum: Int
    public var fieldPic: Bool
    public var bottomField: Bool
    public var idrPicId: Int?
    public var picOrderCntLsb: Int
    public var deltaPicOrderCntBottom: Int
    public var deltaPicOrderCnt0: Int
    public var deltaPicOrderCnt1: Int
    public var redundantPicCnt: Int
    public var nalRefIdc: UInt8
    public var isIDR: Bool

    /// - Parameters:
    ///   - header: the NAL unit header (type 1, 2 or 5).
    ///   - payload: the bytes after it, escaped.
    ///   - lookup: the PPS and SPS by id, as currently stored.
    public init(
        header: H264NALUnitHeader, payload: ArraySlice<UInt8>,
        pps: (Int) -> H264PictureParameterSet?, sps: (Int) -> H264SequenceParameterSet?
    ) throws(BitstreamError) {
        var r = BitReader(payload)
        nalRefIdc = header.nalRefIdc
        isIDR = header.type == .idrSlice
        firstMbInSlice = try r.ue("first_mb_in_slice", max: UInt32(ParameterSetLimits.maximumArea / 256))
        sliceType = try r.ue("slice_type", max: 9)
        ppsId = try r.ue("pic_parameter_set_id", max: 255)
        guard let pictureParameters = pps(ppsId) else { throw .missingParameterSet(kind: .pps, id: ppsId) }
        guard let sequence = sps(pictureParameters.spsId) else {
            throw .missingParameterSet(kind: .sps, id: pictureParameters.spsId)
        }
        if sequence.separateColourPlane { _ = try r.bits(2, "colour_plane_id") }
        frameNum = Int(try r.bits(sequence.log2MaxFrameNum, "frame_num"))
        fieldPic = false
        bottomField = false
        if !sequence.frameMbsOnly {
            fieldPic = try r.flag("field_pic_flag")
            if fieldPic { bottomField = try r.flag("bottom_field_flag") }
        }
        idrPicId = isIDR ? try r.ue("idr_pic_id", max: 65535) : nil
        picOrderCntLsb = 0
        deltaPicOrderCntBottom = 0
        deltaPicOrderCnt0 = 0
        deltaPicOrderCnt1 = 0
        if sequence.picOrderCntType == 0 {
            picOrderCntLsb = Int(try r.bits(sequence.log2MaxPicOrderCntLsb, "pic_order_cnt_lsb"))
            if pictureParameters.bottomFieldPicOrderInFramePresent && !fieldPic {
                deltaPicOrderCntBottom = try r.se("delta_pic_order_cnt_bottom")
            }
        } else if sequence.picOrderCntType == 1 && !sequence.deltaPicOrderAlwaysZero {
            deltaPicOrderCnt0 = try r.se("delta_pic_order_cnt[0]")
            if pictureParameters.bottomFieldPicOrderInFramePresent && !fieldPic {
                deltaPicOrderCnt1 = try r.se("delta_pic_order_cnt[1]")
            }
        }
        redundantPicCnt = pictureParameters.redundantPicCntPresent ? try r.ue("redundant_pic_cnt", max: 127) : 0
    }

    /// 7.4.1.2.4: whether this slice (of a primary picture) begins a new picture after `previous`.
    public func startsNewPicture(after previous: H264SliceHeader) -> Bool {
        if redundantPicCnt > 0 { return false }
        return frameNum != previous.frameNum
            || ppsId != previous.ppsId
            || fieldPic != previous.fieldPic
            || bottomField != previous.bottomField
            || (nalRefIdc != previous.nalRefIdc && (nalRefIdc == 0 || previous.nalRefIdc == 0))
            || picOrderCntLsb != previous.picOrderCntLsb
            || deltaPicOrderCntBottom != previous.deltaPicOrderCntBottom
            || deltaPicOrderCnt0 != previous.deltaPicOrderCnt0
            || deltaPicOrderCnt1 != previous.deltaPicOrderCnt1
            || isIDR != previous.isIDR
            || (isIDR && previous.isIDR && idrPicId != previous.idrPicId)
    }
}
