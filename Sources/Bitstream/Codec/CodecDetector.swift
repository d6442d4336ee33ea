/// Recognises the codec of an Annex B stream from its first parameter set.
///
/// Rule: the first NAL unit that is a parameter set under exactly one codec's header layout decides.
/// - H.265: type 32/33/34 (VPS/SPS/PPS) with `nuh_layer_id` 0 and `nuh_temporal_id_plus1` 1 (parameter sets
///   have temporal id 0), i.e. first byte 0x40/0x42/0x44 and second byte 0x01.
/// - H.264: type 7/8 (SPS/PPS) with `forbidden_zero_bit` 0 and `nal_ref_idc` non-zero (both required for
///   parameter sets), i.e. first byte 0x27/0x47/0x67 or 0x28/0x48/0x68.
/// The two sets of first bytes do not overlap, so one NAL unit is never both.
/// Failure modes: NAL units before the first parameter set are dropped (nothing can decode them anyway); a stream
/// that never sends parameter sets in band is never recognised — configure the codec for it.
public enum CodecDetector {
    public static func codec(ofFirstParameterSet unit: ArraySlice<UInt8>) -> VideoCodec? {
        guard let first = unit.first else { return nil }
        if unit.count >= 2 {
            let second = unit[unit.startIndex + 1]
            let header = H265NALUnitHeader(firstByte: first, secondByte: second)
            if !header.forbiddenZeroBit && (32...34).contains(header.type.rawValue)
                && header.layerId == 0 && header.temporalIdPlus1 == 1 {
                return .h265
            }
        }
        let header = H264NALUnitHeader(byte: first)
        if !header.forbiddenZeroBit && header.nalRefIdc != 0 && (header.type == .sps || header.type == .pps) {
            return .h264
        }
        return nil
    }
}
