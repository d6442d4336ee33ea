import CAVFormat

/// One access unit in Annex B, with its source timing.
struct AnnexBAccessUnit {
    var data: [UInt8]
    /// In `timeBase` units; nil when the source has none.
    var pts: Int64?
    var dts: Int64?
    var timeBase: AVRational
    var isKeyframe: Bool

    /// The decoding time in seconds (for real-time pacing).
    var decodingSeconds: Double? {
        (dts ?? pts).map { Double($0) * Double(timeBase.num) / Double(timeBase.den) }
    }
}

/// The video stream of a file, demuxed by libavformat, as Annex B access units. Owns its libavformat and
/// bitstream-filter contexts; freed in deinit.
final class DemuxedVideo {
    private var format: UnsafeMutablePointer<AVFormatContext>?
    /// AVCC/HVCC → Annex B (nil when the file is Annex B already).
    private var filter: UnsafeMutablePointer<AVBSFContext>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    private let streamIndex: Int32
    let codecID: AVCodecID
    let codecName: String
    let timeBase: AVRational
    let width: Int32
    let height: Int32
    /// For a raw Annex B file: the frame rate its SPS states (libavformat then times packets at 25 per second).
    let rawFrameRate: Double?
    private var flushed = false
    /// Units handed out; stands in for timestamps a raw file lacks (at 25 per second, libavformat's default).
    private var index: Int64 = 0

    init(path: String) throws(SendError) {
        var context: UnsafeMutablePointer<AVFormatContext>?
        var result = avformat_open_input(&context, path, nil, nil)
        guard result >= 0, let context else { throw SendError(description: "cannot open \(path): \(describe(result))") }
        format = context
        packet = av_packet_alloc()
        result = avformat_find_stream_info(context, nil)
        guard result >= 0 else { throw SendError(description: "cannot read \(path): \(describe(result))") }
        let best = av_find_best_stream(context, AVMEDIA_TYPE_VIDEO, -1, -1, nil, 0)
        guard best >= 0, let stream = context.pointee.streams[Int(best)] else { throw SendError(description: "\(path) has no video stream") }
        streamIndex = best
        let parameters = stream.pointee.codecpar!
        codecID = parameters.pointee.codec_id
        timeBase = stream.pointee.time_base
        width = parameters.pointee.width
        height = parameters.pointee.height
        switch codecID {
        case AV_CODEC_ID_H264: codecName = "h264"
        case AV_CODEC_ID_HEVC: codecName = "h265"
        default:
            throw SendError(description: "\(path): the video is \(String(cString: avcodec_get_name(codecID))), not H.264 or H.265")
        }
        let demuxer = String(cString: context.pointee.iformat.pointee.name)
        let rate = stream.pointee.r_frame_rate
        rawFrameRate = (demuxer == "h264" || demuxer == "hevc") && rate.num > 0 && rate.den > 0
            ? Double(rate.num) / Double(rate.den) : nil
        if demuxer != "h264" && demuxer != "hevc" {
            let name = codecID == AV_CODEC_ID_H264 ? "h264_mp4toannexb" : "hevc_mp4toannexb"
            var bsf: UnsafeMutablePointer<AVBSFContext>?
            guard let definition = av_bsf_get_by_name(name), av_bsf_alloc(definition, &bsf) >= 0, let bsf else {
                throw SendError(description: "libavcodec lacks the \(name) filter")
            }
            filter = bsf
            avcodec_parameters_copy(bsf.pointee.par_in, parameters)
            bsf.pointee.time_base_in = timeBase
            result = av_bsf_init(bsf)
            guard result >= 0 else { throw SendError(description: "\(name): \(describe(result))") }
        }
    }

    deinit {
        av_packet_free(&packet)
        av_bsf_free(&filter)
        avformat_close_input(&format)
    }

    /// The next access unit, or nil at the end of the file.
    func nextAccessUnit() throws(SendError) -> AnnexBAccessUnit? {
        guard let format, let packet else { return nil }
        while true {
            if let filter {
                let received = av_bsf_receive_packet(filter, packet)
                if received >= 0 { return take(packet) }
                if received == streamrecv_avf_averror_eof() { return nil }
                guard received == streamrecv_avf_averror_eagain() else { throw SendError(description: "bitstream filter: \(describe(received))") }
                if flushed { return nil }
            }
            let read = av_read_frame(format, packet)
            if read == streamrecv_avf_averror_eof() {
                guard let filter, !flushed else { return nil }
                flushed = true
                av_bsf_send_packet(filter, nil)
                continue
            }
            guard read >= 0 else { throw SendError(description: "reading the source: \(describe(read))") }
            guard packet.pointee.stream_index == streamIndex else {
                av_packet_unref(packet)
                continue
            }
            guard let filter else { return take(packet) }
            let sent = av_bsf_send_packet(filter, packet)
            guard sent >= 0 else { throw SendError(description: "bitstream filter: \(describe(sent))") }
        }
    }

    private func take(_ packet: UnsafeMutablePointer<AVPacket>) -> AnnexBAccessUnit {
        defer {
            av_packet_unref(packet)
            index += 1
        }
        let none = streamrecv_avf_nopts_value()
        let data = Array(UnsafeBufferPointer(start: packet.pointee.data, count: Int(packet.pointee.size)))
        var unit = AnnexBAccessUnit(
            data: data, pts: packet.pointee.pts == none ? nil : packet.pointee.pts,
            dts: packet.pointee.dts == none ? nil : packet.pointee.dts, timeBase: timeBase,
            isKeyframe: packet.pointee.flags & AV_PKT_FLAG_KEY != 0)
        if unit.pts == nil && unit.dts == nil {
            unit.timeBase = AVRational(num: 1, den: 25)
            unit.pts = index
            unit.dts = index
        }
        return unit
    }
}
