import Bitstream

/// Builders for hand-made parameter sets and slices (valid or hostile).
public enum Build {
    /// An H.264 SPS NAL unit (header 0x67), Baseline or High profile, with optional cropping and VUI timing.
    public static func h264SPS(
        id: UInt64 = 0, profile: UInt64 = 66, widthInMbs: UInt64 = 20, heightInMapUnits: UInt64 = 15,
        crop: (UInt64, UInt64, UInt64, UInt64)? = nil, timing: (UInt32, UInt32)? = nil,
        pocType: UInt64 = 2, truncateAfterBits: Int? = nil
    ) -> [UInt8] {
        var w = BitWriter()
        w.u(8, profile)
        w.u(8, 0)
        w.u(8, 30)
        w.ue(id)
        if profile == 100 {
            w.ue(1)  // chroma_format_idc
            w.ue(0)
            w.ue(0)
            w.flag(false)
            w.flag(false)
        }
        w.ue(0)  // log2_max_frame_num_minus4
        w.ue(pocType)
        if pocType == 0 { w.ue(0) }
        w.ue(1)  // max_num_ref_frames
        w.flag(false)
        w.ue(widthInMbs - 1)
        w.ue(heightInMapUnits - 1)
        w.flag(true)  // frame_mbs_only_flag
        w.flag(true)  // direct_8x8_inference_flag
        if let crop {
            w.flag(true)
            w.ue(crop.0); w.ue(crop.1); w.ue(crop.2); w.ue(crop.3)
        } else {
            w.flag(false)
        }
        if let timing {
            w.flag(true)  // vui_parameters_present_flag
            w.u(4, 0)  // aspect, overscan, video signal, chroma loc: absent
            w.flag(true)
            w.u(32, UInt64(timing.0))
            w.u(32, UInt64(timing.1))
            w.flag(true)
            w.u(3, 0)  // no HRD, no pic_struct
            w.flag(false)  // bitstream_restriction_flag
        } else {
            w.flag(false)
        }
        w.trailingBits()
        var bytes = w.bytes
        if let truncateAfterBits { bytes = Array(bytes.prefix(truncateAfterBits / 8)) }
        return [0x67] + escapeRBSP(bytes)
    }

    public static func h264PPS(id: UInt64 = 0, spsId: UInt64 = 0, redundantPicCnt: Bool = false) -> [UInt8] {
        var w = BitWriter()
        w.ue(id)
        w.ue(spsId)
        w.flag(false)
        w.flag(false)
        w.ue(0)  // one slice group
        w.ue(0); w.ue(0)
        w.flag(false)
        w.u(2, 0)
        w.se(0); w.se(0); w.se(0)
        w.flag(true); w.flag(false); w.flag(redundantPicCnt)
        w.trailingBits()
        return [0x68] + escapeRBSP(w.bytes)
    }

    /// A slice NAL unit whose header suits `h264SPS()` defaults (POC type 2, 4-bit frame_num), with filler data.
    public static func h264Slice(
        idr: Bool, frameNum: UInt64, firstMb: UInt64 = 0, ppsId: UInt64 = 0, redundantPicCnt: UInt64? = nil
    ) -> [UInt8] {
        var w = BitWriter()
        w.ue(firstMb)
        w.ue(idr ? 7 : 5)
        w.ue(ppsId)
        w.u(4, frameNum)
        if idr { w.ue(0) }
        if let redundantPicCnt { w.ue(redundantPicCnt) }
        w.u(16, 0xA5A5)
        w.trailingBits()
        return [idr ? 0x65 : 0x41] + escapeRBSP(w.bytes)
    }

    /// An SEI NAL unit holding one message.
    public static func sei(codec: VideoCodec, type: Int, payload: [UInt8]) -> [UInt8] {
        var rbsp: [UInt8] = [UInt8(type), UInt8(payload.count)] + payload + [0x80]
        rbsp = escapeRBSP(rbsp)
        return (codec == .h264 ? [0x06] : [0x4E, 0x01]) + rbsp
    }
}
