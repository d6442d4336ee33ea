import Bitstream
import StreamrecvTestSupport
import Testing

/// H.264 picture parameter sets (7.3.2.2) and the slice-header fields that find a picture's first slice (7.4.1.2.4).
@Suite struct H264PictureParameterSetTests {
    /// A PPS payload (after the 0x68 header), escaped. `sliceGroups` writes num_slice_groups_minus1 and what follows
    /// it. constrained_intra_pred_flag is set and redundant_pic_cnt_present_flag clear by default, so that a parser
    /// one bit early or late reads the wrong value for the last field.
    static func pps(
        id: UInt64 = 0, spsId: UInt64 = 0, cabac: Bool = false, bottomFieldPicOrder: Bool = false,
        sliceGroups: (inout BitWriter) -> Void = { $0.ue(0) }, refIdxL0: UInt64 = 0,
        picInitQP: Int64 = 0, picInitQS: Int64 = 0, chromaQPOffset: Int64 = 0, redundantPicCnt: Bool = false
    ) -> [UInt8] {
        var w = BitWriter()
        w.ue(id)
        w.ue(spsId)
        w.flag(cabac)
        w.flag(bottomFieldPicOrder)
        sliceGroups(&w)
        w.ue(refIdxL0)
        w.ue(0)  // num_ref_idx_l1_default_active_minus1
        w.flag(false)  // weighted_pred_flag
        w.u(2, 0)  // weighted_bipred_idc
        w.se(picInitQP)
        w.se(picInitQS)
        w.se(chromaQPOffset)
        w.flag(true)  // deblocking_filter_control_present_flag
        w.flag(true)  // constrained_intra_pred_flag
        w.flag(redundantPicCnt)
        w.trailingBits()
        return escapeRBSP(w.bytes)
    }

    static func parse(_ payload: [UInt8]) throws(BitstreamError) -> H264PictureParameterSet {
        try H264PictureParameterSet(payload: payload[...])
    }

    // MARK: Fields

    @Test func theFieldsASliceHeaderNeedsAreRead() throws {
        let pps = try Self.parse(Self.pps(id: 255, spsId: 31, cabac: true, bottomFieldPicOrder: true, redundantPicCnt: true))
        #expect(pps.id == 255 && pps.spsId == 31)
        #expect(pps.entropyCodingModeCABAC && pps.bottomFieldPicOrderInFramePresent)
        #expect(pps.numSliceGroups == 1 && pps.redundantPicCntPresent)
        let plain = try Self.parse(Self.pps())
        #expect(!plain.entropyCodingModeCABAC && !plain.bottomFieldPicOrderInFramePresent && !plain.redundantPicCntPresent)
    }

    @Test func anSPSIdBeyondThirtyOneIsRefused() {
        // 7.4.2.2: seq_parameter_set_id 0…31 (pic_parameter_set_id 256 is ParameterSetTests' case).
        #expect(throws: BitstreamError.outOfRange(element: "seq_parameter_set_id", value: 32)) {
            try Self.parse(Self.pps(spsId: 32))
        }
    }

    @Test(arguments: [(Int64(-62), true), (-63, false), (25, true), (26, false)])
    func picInitQPMinus26CoversFourteenBitVideo(value: Int64, accepted: Bool) {
        // −(26 + QpBdOffsetY) … +25, and QpBdOffsetY reaches 36 at 14 bits (7.4.2.2).
        let payload = Self.pps(picInitQP: value)
        if accepted {
            #expect(throws: Never.self) { try Self.parse(payload) }
        } else {
            #expect(throws: BitstreamError.outOfRange(element: "pic_init_qp_minus26", value: value)) { try Self.parse(payload) }
        }
    }

    @Test func qsAndChromaOffsetsHaveTheirOwnRanges() throws {
        _ = try Self.parse(Self.pps(picInitQS: -26, chromaQPOffset: -12))
        _ = try Self.parse(Self.pps(picInitQS: 25, chromaQPOffset: 12))
        #expect(throws: BitstreamError.outOfRange(element: "pic_init_qs_minus26", value: -27)) {
            try Self.parse(Self.pps(picInitQS: -27))
        }
        #expect(throws: BitstreamError.outOfRange(element: "chroma_qp_index_offset", value: 13)) {
            try Self.parse(Self.pps(chromaQPOffset: 13))
        }
        #expect(throws: BitstreamError.outOfRange(element: "num_ref_idx_l0_default_active_minus1", value: 32)) {
            try Self.parse(Self.pps(refIdxL0: 32))
        }
    }

    // MARK: Slice groups (FMO)

    @Test func eachSliceGroupMapTypeIsReadThroughToTheLastField() throws {
        // Types 0, 2, 4 and 1 (no extra syntax), three groups each: the flag after them lands where it was written.
        let layouts: [(String, (inout BitWriter) -> Void)] = [
            ("interleaved", { w in w.ue(2); w.ue(0); for run in [9, 0, 300] as [UInt64] { w.ue(run) } }),
            ("dispersed", { w in w.ue(2); w.ue(1) }),
            ("foreground", { w in w.ue(2); w.ue(2); for corner in [0, 5, 20, 44] as [UInt64] { w.ue(corner) } }),
            ("box-out", { w in w.ue(2); w.ue(4); w.flag(true); w.ue(17) }),
        ]
        for (name, layout) in layouts {
            for redundant in [false, true] {
                let pps = try Self.parse(Self.pps(cabac: true, sliceGroups: layout, redundantPicCnt: redundant))
                #expect(pps.numSliceGroups == 3, "\(name)")
                #expect(pps.entropyCodingModeCABAC, "\(name)")
                #expect(pps.redundantPicCntPresent == redundant, "\(name)")
            }
        }
    }

    @Test(arguments: [2, 3, 4, 5, 8])
    func explicitSliceGroupIdsTakeCeilLog2OfTheGroupCountBits(groups: Int) throws {
        // Type 6: slice_group_id is u(v) with v = Ceil(Log2(num_slice_groups_minus1 + 1)) (7.4.2.2).
        let bits = [2: 1, 3: 2, 4: 2, 5: 3, 8: 3][groups]!
        let payload = Self.pps(sliceGroups: { w in
            w.ue(UInt64(groups - 1))
            w.ue(6)
            w.ue(40)  // 41 map units
            for unit in 0..<41 { w.u(bits, UInt64(unit % groups)) }
        }, redundantPicCnt: false)
        let pps = try Self.parse(payload)
        #expect(pps.numSliceGroups == groups && !pps.redundantPicCntPresent)
        // Without the byte that holds the last field (the final one, unless that is only the stop bit) it is cut short.
        #expect(throws: BitstreamError.self) { try Self.parse(Array(payload.dropLast(payload.last == 0x80 ? 2 : 1))) }
    }

    @Test func sliceGroupIdsFullOfZerosAreReadThroughEmulationPrevention() throws {
        // 64 ids of 0 are 8 zero bytes of RBSP: the NAL unit carries them escaped (7.4.1), and the parser must drop
        // each emulation_prevention_three_byte, not count it as ids.
        let payload = Self.pps(sliceGroups: { w in
            w.ue(1)
            w.ue(6)
            w.ue(63)
            w.u(64, 0)
        }, redundantPicCnt: true)
        #expect(payload.contains(3), "the escaped payload holds emulation prevention bytes")
        let pps = try Self.parse(payload)
        #expect(pps.numSliceGroups == 2 && pps.redundantPicCntPresent)
    }

    @Test func sliceGroupSyntaxOutOfRangeOrCutShortIsRefused() {
        #expect(throws: BitstreamError.outOfRange(element: "num_slice_groups_minus1", value: 8)) {
            try Self.parse(Self.pps(sliceGroups: { $0.ue(8) }))
        }
        #expect(throws: BitstreamError.outOfRange(element: "slice_group_map_type", value: 7)) {
            try Self.parse(Self.pps(sliceGroups: { $0.ue(1); $0.ue(7) }))
        }
        // More map units than the largest picture has (MaxFS of level 6.2 × 256 samples / 256).
        #expect(throws: BitstreamError.outOfRange(element: "pic_size_in_map_units_minus1", value: 139_265)) {
            try Self.parse(Self.pps(sliceGroups: { $0.ue(1); $0.ue(6); $0.ue(139_265) }))
        }
        // 1000 one-bit ids announced, a handful present: the skip runs off the end.
        var w = BitWriter()
        w.ue(0); w.ue(0); w.flag(false); w.flag(false)
        w.ue(1); w.ue(6); w.ue(999)
        w.u(16, 0xFFFF)
        #expect(throws: BitstreamError.truncated(element: "slice_group_id")) { try Self.parse(w.bytes) }
    }

    @Test func everyTruncationIsRefused() throws {
        #expect(throws: BitstreamError.truncated(element: "pic_parameter_set_id")) { try Self.parse([]) }
        let full = Self.pps(id: 3, spsId: 1, picInitQP: -10, redundantPicCnt: true)
        // The parser stops at redundant_pic_cnt_present_flag: a last byte holding only the stop bit is not needed.
        let needed = full.last == 0x80 ? full.count - 1 : full.count
        for length in 0..<needed {
            #expect(throws: BitstreamError.self, "length \(length)") { try Self.parse(Array(full.prefix(length))) }
        }
        #expect(try Self.parse(Array(full.prefix(needed))).redundantPicCntPresent)
    }

    // MARK: Slice header

    /// A slice payload for an SPS with 4-bit frame_num and, for POC type 0, a 4-bit pic_order_cnt_lsb.
    static func slice(
        idr: Bool = false, frameNum: UInt64 = 0, ppsId: UInt64 = 0, idrPicId: UInt64 = 0, pocLsb: UInt64? = nil,
        deltaBottom: Int64? = nil, redundantPicCnt: UInt64? = nil
    ) -> [UInt8] {
        var w = BitWriter()
        w.ue(0)  // first_mb_in_slice
        w.ue(idr ? 7 : 5)
        w.ue(ppsId)
        w.u(4, frameNum)
        if idr { w.ue(idrPicId) }
        if let pocLsb { w.u(4, pocLsb) }
        if let deltaBottom { w.se(deltaBottom) }
        if let redundantPicCnt { w.ue(redundantPicCnt) }
        w.u(8, 0xA5)  // slice data
        w.trailingBits()
        return escapeRBSP(w.bytes)
    }

    static func header(
        _ payload: [UInt8], nalByte: UInt8 = 0x41, pps: H264PictureParameterSet, sps: H264SequenceParameterSet
    ) throws(BitstreamError) -> H264SliceHeader {
        try H264SliceHeader(header: H264NALUnitHeader(byte: nalByte), payload: payload[...],
                            pps: { $0 == pps.id ? pps : nil }, sps: { $0 == sps.id ? sps : nil })
    }

    @Test func aSliceHeaderIsReadWithTheSPSAndPPSItNames() throws {
        let sps = try H264SequenceParameterSet(payload: Build.h264SPS(pocType: 0).dropFirst())
        let pps = try Self.parse(Self.pps(id: 4, bottomFieldPicOrder: true, redundantPicCnt: true))
        let payload = Self.slice(idr: true, frameNum: 9, ppsId: 4, idrPicId: 65535, pocLsb: 13, deltaBottom: -3, redundantPicCnt: 2)
        let slice = try Self.header(payload, nalByte: 0x65, pps: pps, sps: sps)
        #expect(slice.isIDR && slice.nalRefIdc == 3 && slice.sliceType == 7 && slice.ppsId == 4)
        #expect(slice.frameNum == 9 && slice.idrPicId == 65535)
        #expect(slice.picOrderCntLsb == 13 && slice.deltaPicOrderCntBottom == -3 && slice.redundantPicCnt == 2)
    }

    @Test func aSliceNamingAnUnknownParameterSetIsRefused() throws {
        let sps = try H264SequenceParameterSet(payload: Build.h264SPS().dropFirst())
        let pps = try Self.parse(Self.pps(id: 0, spsId: 0))
        #expect(throws: BitstreamError.missingParameterSet(kind: .pps, id: 3)) {
            try Self.header(Self.slice(ppsId: 3), pps: pps, sps: sps)
        }
        let orphan = try Self.parse(Self.pps(id: 0, spsId: 5))
        #expect(throws: BitstreamError.missingParameterSet(kind: .sps, id: 5)) {
            try Self.header(Self.slice(ppsId: 0), pps: orphan, sps: sps)
        }
        #expect(throws: BitstreamError.outOfRange(element: "idr_pic_id", value: 65536)) {
            try Self.header(Self.slice(idr: true, idrPicId: 65536), nalByte: 0x65, pps: pps, sps: sps)
        }
    }

    @Test func aNewPictureBeginsWhereAFirstSliceFieldDiffers() throws {
        // 7.4.1.2.4, with POC type 0 and delta_pic_order_cnt_bottom present.
        let sps = try H264SequenceParameterSet(payload: Build.h264SPS(pocType: 0).dropFirst())
        let pps = try Self.parse(Self.pps(bottomFieldPicOrder: true))
        let pps2 = try Self.parse(Self.pps(id: 2, bottomFieldPicOrder: true))
        func slice(_ nalByte: UInt8 = 0x41, frameNum: UInt64 = 1, idrPicId: UInt64 = 0, pocLsb: UInt64 = 2,
                   deltaBottom: Int64 = 0, pps: H264PictureParameterSet = pps) throws -> H264SliceHeader {
            let payload = Self.slice(idr: nalByte & 0x1F == 5, frameNum: frameNum, ppsId: UInt64(pps.id), idrPicId: idrPicId,
                                     pocLsb: pocLsb, deltaBottom: deltaBottom)
            return try Self.header(payload, nalByte: nalByte, pps: pps, sps: sps)
        }
        let base = try slice()
        #expect(try !slice().startsNewPicture(after: base), "a second slice of the same picture")
        #expect(try slice(frameNum: 2).startsNewPicture(after: base))
        #expect(try slice(pps: pps2).startsNewPicture(after: base))
        #expect(try slice(pocLsb: 3).startsNewPicture(after: base))
        #expect(try slice(deltaBottom: 1).startsNewPicture(after: base))
        // nal_ref_idc differing counts only when one of them is 0.
        #expect(try slice(0x01).startsNewPicture(after: base))
        #expect(try !slice(0x61).startsNewPicture(after: base))
        // IdrPicFlag differs; then two IDRs differ by idr_pic_id alone.
        let idr = try slice(0x65, frameNum: 0)
        #expect(try slice(0x65, frameNum: 0).startsNewPicture(after: try slice(frameNum: 0)))
        #expect(try !slice(0x65, frameNum: 0).startsNewPicture(after: idr))
        #expect(try slice(0x65, frameNum: 0, idrPicId: 1).startsNewPicture(after: idr))
    }

    @Test func aRedundantSliceNeverBeginsAPicture() throws {
        // Redundant coded pictures (redundant_pic_cnt > 0) belong to the primary picture's access unit.
        let sps = try H264SequenceParameterSet(payload: Build.h264SPS().dropFirst())
        let pps = try Self.parse(Self.pps(redundantPicCnt: true))
        let primary = try Self.header(Self.slice(frameNum: 1, redundantPicCnt: 0), pps: pps, sps: sps)
        let redundant = try Self.header(Self.slice(frameNum: 2, redundantPicCnt: 1), pps: pps, sps: sps)
        #expect(!redundant.startsNewPicture(after: primary))
        #expect(redundant.redundantPicCnt == 1)
        #expect(throws: BitstreamError.outOfRange(element: "redundant_pic_cnt", value: 128)) {
            try Self.header(Self.slice(redundantPicCnt: 128), pps: pps, sps: sps)
        }
    }
}
