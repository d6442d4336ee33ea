import Bitstream
import Glibc
import StreamrecvTestSupport

/// Reads a whole file (corpus or generated stream).
func readBytes(_ path: String) -> [UInt8] {
    guard let file = fopen(path, "rb") else { return [] }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while case let count = fread(&buffer, 1, buffer.count, file), count > 0 { bytes += buffer[0..<count] }
    return bytes
}

/// Everything the splitter and assembler produce for a stream.
struct Assembled {
    var accessUnits: [AccessUnit] = []
    var parameterSets: [ParameterSetEvent] = []
    var problems: [AssemblerProblem] = []
    var codec: VideoCodec?
    var statistics = AccessUnitAssembler.Statistics()
    var splitterStatistics = AnnexBSplitter.Statistics()
}

func assemble(
    _ stream: [UInt8], codec: VideoCodec? = nil, chunkSize: Int = 4096,
    maximumNALUnitSize: Int = 1 << 20, maximumAccessUnitSize: Int = 8 << 20
) -> Assembled {
    var splitter = AnnexBSplitter(maximumNALUnitSize: maximumNALUnitSize)
    var assembler = AccessUnitAssembler(codec: codec, maximumAccessUnitSize: maximumAccessUnitSize)
    var result = Assembled()
    let collect: (AssemblerEvent) -> Void = { event in
        switch event {
        case .accessUnit(let unit): result.accessUnits.append(unit)
        case .parameterSet(let set): result.parameterSets.append(set)
        case .problem(let problem): result.problems.append(problem)
        case .codecDetected(let codec): result.codec = codec
        }
    }
    var offset = 0
    while offset < stream.count {
        let end = min(stream.count, offset + chunkSize)
        var units: [NALUnit] = []
        splitter.append(stream[offset..<end]) { units.append($0) }
        for unit in units { assembler.push(unit, collect) }
        offset = end
    }
    var units: [NALUnit] = []
    splitter.flush { units.append($0) }
    for unit in units { assembler.push(unit, collect) }
    assembler.endAccessUnit(collect)
    result.statistics = assembler.statistics
    result.splitterStatistics = splitter.statistics
    return result
}

/// Builders for hand-made parameter sets and slices (valid or hostile).
enum Build {
    /// An H.264 SPS NAL unit (header 0x67), Baseline or High profile, with optional cropping and VUI timing.
    static func h264SPS(
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

    static func h264PPS(id: UInt64 = 0, spsId: UInt64 = 0, redundantPicCnt: Bool = false) -> [UInt8] {
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
    static func h264Slice(
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
    static func sei(codec: VideoCodec, type: Int, payload: [UInt8]) -> [UInt8] {
        var rbsp: [UInt8] = [UInt8(type), UInt8(payload.count)] + payload + [0x80]
        rbsp = escapeRBSP(rbsp)
        return (codec == .h264 ? [0x06] : [0x4E, 0x01]) + rbsp
    }
}
