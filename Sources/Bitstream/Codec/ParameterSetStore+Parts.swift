extension ParameterSetStore {
    /// Whether the H.264 picture that `firstSlice` begins can be decoded slice by slice, each slice as it arrives.
    /// libavcodec's chunk mode finishes a picture when its last macroblock row is decoded, so slices must come in
    /// raster order and each picture be one frame: frames only (frame_mbs_only: no fields, no MBAFF), colour planes
    /// coded together, one slice group, no redundant pictures, no data partitions, and a profile that forbids
    /// arbitrary slice order (Baseline and Extended allow it unless constraint_set1_flag is set).
    func decodesInParts(firstSlice slice: H264SliceHeader, type: H264NALUnitType) -> Bool {
        guard type != .dataPartitionA, let pps = h264PPS[slice.ppsId]?.value, let sps = h264SPS[pps.spsId]?.value
        else { return false }
        let orderedSlices = !(sps.profileIdc == 66 || sps.profileIdc == 88) || sps.constraintFlags & 0x40 != 0
        return sps.frameMbsOnly && !sps.separateColourPlane && pps.numSliceGroups == 1 && !pps.redundantPicCntPresent
            && orderedSlices
    }
}
