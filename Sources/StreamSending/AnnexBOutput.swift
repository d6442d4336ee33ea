import CAVFormat

/// Where `send` writes: libavformat's raw H.264/HEVC muxer to tcp://, udp:// or a file, or its RTP muxer to
/// rtp://. Every access unit is flushed at once (a live sender does not batch). Owns its context.
///
/// Annex B says nothing about where an access unit ends: a receiver knows only when the next one's first NAL unit
/// begins, a whole frame later. So every access unit is followed at once by the next one's access unit delimiter
/// (the source's own delimiters are moved there): the receiver closes the frame when its last byte is in, and the
/// decoded pictures are the same (a delimiter carries no picture data). RTP needs none: its marker bit ends a frame.
final class AnnexBOutput {
    private var context: UnsafeMutablePointer<AVFormatContext>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    private var opened = false
    /// The access unit delimiter written after each access unit; nil for RTP.
    private let delimiter: [UInt8]?
    private let isDelimiter: (UInt8) -> Bool
    private var scratch: [UInt8] = []

    /// The raw muxers want the picture size; the parameter sets travel in band, so no extradata is given.
    init(destination: String, codec: AVCodecID, width: Int32, height: Int32) throws(SendError) {
        let isRTP = destination.hasPrefix("rtp://")
        // primary_pic_type 7 / pic_type 2: any slice types, then the stop bit.
        if codec == AV_CODEC_ID_H264 {
            delimiter = isRTP ? nil : [0, 0, 0, 1, 0x09, 0xF0]
            isDelimiter = { $0 & 0x1F == 9 }
        } else {
            delimiter = isRTP ? nil : [0, 0, 0, 1, 0x46, 0x01, 0x50]
            isDelimiter = { ($0 >> 1) & 0x3F == 35 }
        }
        let formatName = isRTP ? "rtp" : (codec == AV_CODEC_ID_H264 ? "h264" : "hevc")
        var url = destination
        // RTP packets fit a 1500-byte MTU; raw UDP datagrams carry 1316 bytes, as ffmpeg's MPEG-TS habit.
        if isRTP && !url.contains("pkt_size") { url += (url.contains("?") ? "&" : "?") + "pkt_size=1200" }
        if url.hasPrefix("udp://") && !url.contains("pkt_size") { url += (url.contains("?") ? "&" : "?") + "pkt_size=1316" }
        var output: UnsafeMutablePointer<AVFormatContext>?
        var result = avformat_alloc_output_context2(&output, nil, formatName, url)
        guard result >= 0, let output else { throw SendError(description: "cannot write \(formatName) to \(destination): \(describe(result))") }
        context = output
        packet = av_packet_alloc()
        guard let stream = avformat_new_stream(output, nil) else { throw SendError(description: "out of memory") }
        stream.pointee.codecpar.pointee.codec_type = AVMEDIA_TYPE_VIDEO
        stream.pointee.codecpar.pointee.codec_id = codec
        stream.pointee.codecpar.pointee.width = width
        stream.pointee.codecpar.pointee.height = height
        stream.pointee.time_base = AVRational(num: 1, den: 90000)
        output.pointee.flags |= AVFMT_FLAG_FLUSH_PACKETS
        if output.pointee.oformat.pointee.flags & AVFMT_NOFILE == 0 {
            result = avio_open2(&output.pointee.pb, url, AVIO_FLAG_WRITE, nil, nil)
            guard result >= 0 else { throw SendError(description: "cannot open \(destination): \(describe(result))") }
        }
        result = avformat_write_header(output, nil)
        guard result >= 0 else { throw SendError(description: "cannot start \(destination): \(describe(result))") }
        opened = true
    }

    deinit { close() }

    func write(_ unit: AnnexBAccessUnit) throws(SendError) {
        guard let context, let packet, let stream = context.pointee.streams[0] else { return }
        if let delimiter {
            scratch.removeAll(keepingCapacity: true)
            scratch.append(contentsOf: unit.data[Self.afterLeadingDelimiters(unit.data, isDelimiter)...])
            scratch.append(contentsOf: delimiter)
        }
        let result = (delimiter == nil ? unit.data : scratch).withUnsafeBufferPointer { bytes -> Int32 in
            guard av_new_packet(packet, Int32(bytes.count)) >= 0 else { return -12 }
            packet.pointee.data.update(from: bytes.baseAddress!, count: bytes.count)
            let none = streamrecv_avf_nopts_value()
            packet.pointee.pts = unit.pts ?? none
            packet.pointee.dts = unit.dts ?? none
            packet.pointee.stream_index = 0
            if unit.isKeyframe { packet.pointee.flags |= AV_PKT_FLAG_KEY }
            av_packet_rescale_ts(packet, unit.timeBase, stream.pointee.time_base)
            return av_write_frame(context, packet)
        }
        av_packet_unref(packet)
        guard result >= 0 else { throw SendError(description: "sending failed: \(describe(result))") }
    }

    /// Where the access unit's data begins once the delimiters in front of it are skipped (they were sent
    /// after the previous one).
    static func afterLeadingDelimiters(_ data: [UInt8], _ isDelimiter: (UInt8) -> Bool) -> Int {
        var start = 0
        while true {
            var index = start
            while index < data.count && data[index] == 0 { index += 1 }
            guard index - start >= 2, index + 1 < data.count, data[index] == 1, isDelimiter(data[index + 1]) else { return start }
            // The delimiter runs to the next start code.
            var next = index + 2
            while next + 2 < data.count && !(data[next] == 0 && data[next + 1] == 0 && data[next + 2] == 1) { next += 1 }
            guard next + 2 < data.count else { return data.count }
            start = next
            while start > index + 2 && data[start - 1] == 0 { start -= 1 }
        }
    }

    func finish() throws(SendError) {
        guard let context, opened else { return }
        opened = false
        let result = av_write_trailer(context)
        guard result >= 0 else { throw SendError(description: "finishing failed: \(describe(result))") }
    }

    func close() {
        guard let output = context else { return }
        if output.pointee.oformat.pointee.flags & AVFMT_NOFILE == 0 { avio_closep(&output.pointee.pb) }
        avformat_free_context(output)
        context = nil
        av_packet_free(&packet)
    }
}
