import Bitstream
import CCUDAStream
import CFFmpeg
import FrameFormats

/// How a stream's decoder is set up.
public struct DecoderConfiguration: Sendable, Equatable {
    public enum Threading: String, Sendable {
        /// Slice threads: no added latency (the default).
        case slice
        /// Frame threads: more throughput, `threads - 1` frames of added latency.
        case frame
    }

    public enum OutputMode: String, Sendable {
        /// NV12 for 8-bit 4:2:0, P010 for 10-bit 4:2:0, the decoder's planar layout otherwise.
        case auto
        /// The decoder's layout unchanged.
        case native
    }

    public var threading: Threading = .slice
    /// Decoder threads; 0 lets libavcodec choose. The default is 1: libavcodec's H.264 decoder switches error
    /// concealment off whenever slice threads are active, which makes damaged pictures worse and departs from
    /// FFmpeg's own decode (measured on the Error_I_P conformance stream). More threads pay off for large
    /// multi-slice pictures.
    public var threads: Int = 1
    public var output: OutputMode = .auto
    public var hardware: HardwarePreference = .auto

    public init(threading: Threading = .slice, threads: Int = 1, output: OutputMode = .auto, hardware: HardwarePreference = .auto) {
        self.threading = threading
        self.threads = threads
        self.output = output
        self.hardware = hardware
    }
}

public enum SendOutcome: Sendable, Equatable {
    case accepted
    /// The decoder holds frames that must be received before it takes more input.
    case full
    case failed(DecoderError)
}

public enum ReceiveOutcome: Sendable, Equatable {
    case frame
    case needsInput
    case endOfStream
    case failed(DecoderError)
}

/// One libavcodec decoder. Owns its AVCodecContext, AVPacket and AVFrames (freed in deinit); no pointer to them
/// leaves this module. Not thread-safe: used by one stream's decode thread.
public final class VideoDecoder {
    public let codec: VideoCodec
    public let hardware: HardwareDevice?
    public let lowDelay: Bool
    private var context: UnsafeMutablePointer<AVCodecContext>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    /// The access unit's bytes, padded as libavcodec requires: one buffer reused for every packet while nobody
    /// else holds it (`av_buffer_is_writable`), so sending makes no allocation of ours.
    private var packetBuffer: UnsafeMutablePointer<AVBufferRef>?
    private var frame: UnsafeMutablePointer<AVFrame>?
    private var transfer: UnsafeMutablePointer<AVFrame>?
    /// libavcodec's concealment setting as opened (FF_EC_GUESS_MVS | FF_EC_DEBLOCK): whole access units use it.
    private var defaultErrorConcealment: Int32 = 0
    public private(set) var isChunked = false
    private var logContexts: [UnsafeMutableRawPointer] = []
    /// The context's `opaque`: the hardware format get_format must pick (AV_PIX_FMT_NONE without hardware), the
    /// band tracker, and, being this decoder's own address, what its frame threads' copies of the context are known
    /// by in the log.
    private let owner: UnsafeMutablePointer<streamrecv_decoder_owner> = {
        let owner = UnsafeMutablePointer<streamrecv_decoder_owner>.allocate(capacity: 1)
        owner.initialize(to: streamrecv_decoder_owner())
        owner.pointee.hardware_format = AV_PIX_FMT_NONE.rawValue
        return owner
    }()
    /// Whether the rows of a picture being decoded can be told (`PictureBands`): a software decoder without
    /// threads. Slice threads deblock slice edges after all of a packet's slices (libavcodec reports the rows
    /// before), frame threads report from their own threads.
    public private(set) var tracksBands = false

    /// - Parameters:
    ///   - parameterSets: the active parameter sets in Annex B form, given to the decoder as extradata.
    ///   - reorderDepth: frames of reordering the parameter sets imply, or nil when they do not say.
    ///   - lowDelay: set `AV_CODEC_FLAG_LOW_DELAY`: only when the bitstream itself states no reordering. The flag
    ///     drops frames of streams with B-frames, and it changes libavcodec's concealment of damaged pictures
    ///     (measured on Error_I_P), so it is set exactly where libavcodec would turn low delay on by itself.
    ///     Where reordering is only inferred (POC type 2) libavcodec already outputs each frame at once.
    ///   - stream: the stream's name, which libavcodec's messages about this decoder are logged and limited by.
    ///   - assumedReorderDepth: used when `reorderDepth` is nil, typically the DPB size the level allows.
    ///     libavcodec would otherwise start with no reorder buffer and drop the B-frames it meets before it
    ///     learns better ("no picture ooo"); the FFmpeg CLI avoids that only by probing the file first.
    public init(
        codec: VideoCodec, configuration: DecoderConfiguration, parameterSets: [UInt8]?,
        reorderDepth: Int?, lowDelay: Bool, assumedReorderDepth: Int, hardware: HardwareDevice?, stream: String = ""
    ) throws(DecoderError) {
        self.codec = codec
        self.hardware = hardware
        // libavcodec ignores frame threading when the flag is set; frame threading is an explicit request for
        // throughput, so it wins.
        self.lowDelay = lowDelay && reorderDepth == 0 && configuration.threading == .slice
        guard let decoder = avcodec_find_decoder(codec.codecID) else { throw .codecNotFound(codec.rawValue) }
        guard let context = avcodec_alloc_context3(decoder), let packet = av_packet_alloc(),
              let frame = av_frame_alloc(), let transfer = av_frame_alloc() else {
            throw .allocationFailed("decoder context")
        }
        self.context = context
        self.packet = packet
        self.frame = frame
        self.transfer = transfer
        context.pointee.opaque = UnsafeMutableRawPointer(owner)
        context.pointee.thread_type = configuration.threading == .frame ? FF_THREAD_FRAME : FF_THREAD_SLICE
        context.pointee.thread_count = Int32(configuration.threads)
        if self.lowDelay { context.pointee.flags |= Int32(AV_CODEC_FLAG_LOW_DELAY) }
        if reorderDepth == nil { context.pointee.has_b_frames = Int32(min(max(assumedReorderDepth, 0), 16)) }
        if let parameterSets, !parameterSets.isEmpty {
            let padded = parameterSets.count + Int(AV_INPUT_BUFFER_PADDING_SIZE)
            guard let extradata = av_mallocz(padded)?.assumingMemoryBound(to: UInt8.self) else {
                throw .allocationFailed("extradata")
            }
            parameterSets.withUnsafeBufferPointer { extradata.update(from: $0.baseAddress!, count: $0.count) }
            context.pointee.extradata = extradata
            context.pointee.extradata_size = Int32(parameterSets.count)
        }
        if let hardware, let device = hardware.context {
            // CUDA, when asked: the shared context with a stream of this decoder's own (cuda_stream.h).
            context.pointee.hw_device_ctx = hardware.accelerator == .cuda && Self.cudaStreamPerDecoder
                ? streamrecv_cuda_device_with_own_stream(device, nil) ?? av_buffer_ref(device) : av_buffer_ref(device)
            // get_format accepts only the device's format: no silent fallback inside libavcodec.
            owner.pointee.hardware_format = hardware.pixelFormat.rawValue
            context.pointee.get_format = selectHardwareFormat
            context.pointee.extra_hw_frames = Int32(Self.extraHardwareFrames(
                reorderDepth: reorderDepth, assumedReorderDepth: assumedReorderDepth, configuration: configuration))
        }
        let result = avcodec_open2(context, decoder, nil)
        guard result >= 0 else { throw .openFailed(ffmpegErrorText(result)) }
        defaultErrorConcealment = context.pointee.error_concealment
        if hardware == nil && context.pointee.active_thread_type == 0 && codec == .h264 && Self.bandsAllowed {
            streamrecv_track_bands(context)
            tracksBands = true
        }
        // What libavcodec logs errors with: the codec context, the decoder's private context (which has its own
        // class for options), and frame threads' copies of the codec context, known by their `opaque`. Kept:
        // `loggedErrors` is asked for every frame decoded in parts.
        logContexts = [UnsafeMutableRawPointer(context), UnsafeMutableRawPointer(owner)]
            + (context.pointee.priv_data.map { [$0] } ?? [])
        FFmpegLog.watch(logContexts, stream: stream)
    }

    /// `STREAMRECVD_TRACK_BANDS=0`: no rows are written into a slot before the frame is out (docs/latency.md), for
    /// comparing the daemon with and without it.
    static let bandsAllowed = getenv("STREAMRECVD_TRACK_BANDS").map { String(cString: $0) != "0" } ?? true

    /// `STREAMRECVD_CUDA_STREAM_PER_DECODER=1`: each CUDA decoder on a stream of its own instead of the device's
    /// default stream, which all share (cuda_stream.h). Off until the GPU kit has shown it bit-exact and measured its
    /// capacity against the default (docs/gpu-kit.md).
    static let cudaStreamPerDecoder = getenv("STREAMRECVD_CUDA_STREAM_PER_DECODER").map { String(cString: $0) == "1" } ?? false

    /// Surfaces added to a hardware decoder's fixed pool beyond the DPB libavcodec sizes from the SPS (refs and
    /// reorder frames): the frame being downloaded into a slot and the next one received meanwhile; a surface per
    /// frame thread; and, where the stream does not state its reorder depth, the depth this decoder assumes (it
    /// holds that many frames back, which a pool sized from the SPS alone would not cover: the decoder would stall
    /// or fail with "no free surface").
    public static func extraHardwareFrames(reorderDepth: Int?, assumedReorderDepth: Int, configuration: DecoderConfiguration) -> Int {
        let held = 2
        // threads = 0 lets libavcodec choose: at most 16.
        let threads = configuration.threading == .frame ? (configuration.threads == 0 ? 16 : configuration.threads) : 0
        let unsignalled = reorderDepth == nil ? min(max(assumedReorderDepth, 0), 16) : 0
        return held + threads + unsignalled
    }

    /// Errors libavcodec has logged for this decoder (counted only while its log is routed: `FFmpegLog.route`).
    public var loggedErrors: Int { FFmpegLog.errors(of: logContexts) }

    /// H.264 slices as they arrive (`AV_CODEC_FLAG2_CHUNKS`): a packet may then hold part of a picture, whose
    /// frame comes out once its last macroblock row is decoded. libavcodec 59 runs its error concealment over the
    /// whole picture at the end of every packet — with parts, over the rows not decoded yet: ten times the decoding
    /// cost — so concealment is off meanwhile. Tried and dropped for a picture's last part: the flag off (frames
    /// then differed from FFmpeg's) and concealment on (the picture came out marked damaged). Both are read per
    /// packet; off again, whole access units decode exactly as before, with FFmpeg's default concealment.
    public func setChunked(_ chunked: Bool) {
        guard let context, chunked != isChunked else { return }
        isChunked = chunked
        if chunked {
            context.pointee.flags2 |= Int32(AV_CODEC_FLAG2_CHUNKS)
            context.pointee.error_concealment = 0
        } else {
            context.pointee.flags2 &= ~Int32(AV_CODEC_FLAG2_CHUNKS)
            context.pointee.error_concealment = defaultErrorConcealment
        }
    }

    /// The next picture's bands are tracked from its first (the decode thread calls this before sending a picture's
    /// first slice); `disarmBands` stops that.
    public func armBands() {
        owner.pointee.bands = streamrecv_band_tracker()
        // A decoder that reorders outputs a picture later, when other pictures' bands are tracked: nothing gained.
        guard tracksBands, let context, context.pointee.has_b_frames == 0 else { return }
        owner.pointee.bands.state = STREAMRECV_BANDS_ARMED
    }

    public func disarmBands() { owner.pointee.bands.state = STREAMRECV_BANDS_DISARMED }

    /// The picture's bands are not to be trusted from now on (a slice that begins in rows already reported final
    /// overlaps what was decoded: libavcodec would decode over them).
    public func distrustBands() {
        guard owner.pointee.bands.state != STREAMRECV_BANDS_DISARMED else { return }
        owner.pointee.bands.state = STREAMRECV_BANDS_UNUSABLE
    }

    /// The picture being decoded skipped macroblock rows (its bands have a gap): slices are missing.
    public var bandsMissRows: Bool { tracksBands && owner.pointee.bands.rows_missing != 0 }

    /// The rows of the picture being decoded that are final so far; nil unless armed and tracking cleanly.
    public var bands: PictureBands? { tracksBands ? PictureBands(owner.pointee.bands) : nil }

    /// What libavcodec actually runs: "frame threads × N", "slice threads × N" or "one thread" (it may refuse a
    /// requested mode, e.g. frame threads together with low delay).
    public var activeThreading: String {
        guard let context else { return "closed" }
        let count = context.pointee.thread_count
        if context.pointee.active_thread_type & FF_THREAD_FRAME != 0 { return "frame threads × \(count)" }
        if context.pointee.active_thread_type & FF_THREAD_SLICE != 0 { return "slice threads × \(count)" }
        return "one thread"
    }

    deinit {
        FFmpegLog.unwatch(logContexts)
        avcodec_free_context(&context)
        owner.deallocate()  // after the context: its threads are joined
        av_packet_free(&packet)
        av_buffer_unref(&packetBuffer)
        av_frame_free(&frame)
        av_frame_free(&transfer)
    }

    /// Sends one whole access unit (Annex B). `pts` comes back on the frames it produces.
    public func send(_ accessUnit: UnsafeRawBufferPointer, pts: Int64) -> SendOutcome {
        guard let packet, let context else { return .failed(.sendFailed("decoder closed")) }
        let padding = Int(AV_INPUT_BUFFER_PADDING_SIZE)
        if packetBuffer.map({ Int($0.pointee.size) < accessUnit.count + padding || av_buffer_is_writable($0) == 0 }) ?? true {
            // Too small, or the decoder still holds the last packet (frame threads): a new one, with room to grow.
            let capacity = max(accessUnit.count + padding, Int(packetBuffer?.pointee.size ?? 0), 64 << 10)
            av_buffer_unref(&packetBuffer)
            packetBuffer = av_buffer_alloc(capacity)
            guard packetBuffer != nil else { return .failed(.allocationFailed("packet buffer of \(capacity) bytes")) }
        }
        let data = packetBuffer!.pointee.data!
        if let base = accessUnit.baseAddress, accessUnit.count > 0 {
            data.update(from: base.assumingMemoryBound(to: UInt8.self), count: accessUnit.count)
        }
        (data + accessUnit.count).initialize(repeating: 0, count: padding)
        av_packet_unref(packet)
        // Lent to the packet for the call: libavcodec takes its own reference if it keeps the bytes.
        packet.pointee.buf = packetBuffer
        packet.pointee.data = data
        packet.pointee.size = Int32(accessUnit.count)
        packet.pointee.pts = pts
        packet.pointee.dts = pts
        let result = avcodec_send_packet(context, packet)
        packet.pointee.buf = nil
        av_packet_unref(packet)
        return outcome(ofSend: result)
    }

    /// Tells the decoder the input ended: later `receive` calls return the frames it held back, then
    /// `.endOfStream`.
    public func sendEndOfStream() -> SendOutcome {
        guard let context else { return .failed(.sendFailed("decoder closed")) }
        return outcome(ofSend: avcodec_send_packet(context, nil))
    }

    private func outcome(ofSend result: Int32) -> SendOutcome {
        if result >= 0 { return .accepted }
        if result == streamrecv_averror_eagain() { return .full }
        return .failed(.sendFailed(ffmpegErrorText(result)))
    }

    /// Receives the next decoded frame, if any, and hands it to `body`. The frame is valid only inside `body`.
    public func receive(_ body: (DecodedFrame) -> Void) -> ReceiveOutcome {
        guard let context, let frame, let transfer else { return .failed(.receiveFailed("decoder closed")) }
        let result = avcodec_receive_frame(context, frame)
        if result == streamrecv_averror_eagain() { return .needsInput }
        if result == streamrecv_averror_eof() { return .endOfStream }
        guard result >= 0 else { return .failed(.receiveFailed(ffmpegErrorText(result))) }
        body(DecodedFrame(frame: frame, transfer: transfer))
        av_frame_unref(frame)
        return .frame
    }

    /// Makes a drained decoder accept input again.
    public func reset() {
        if let context { avcodec_flush_buffers(context) }
    }
}

/// The get_format callback: picks the hardware format stored at `opaque` (`VideoDecoder.owner`), or none (decoding
/// then fails and the stream falls back to software visibly rather than silently).
private let selectHardwareFormat: @convention(c) (
    UnsafeMutablePointer<AVCodecContext>?, UnsafePointer<AVPixelFormat>?
) -> AVPixelFormat = { context, formats in
    guard let context, var format = formats else { return AV_PIX_FMT_NONE }
    guard let wanted = context.pointee.opaque?.assumingMemoryBound(to: streamrecv_decoder_owner.self).pointee.hardware_format,
          wanted != AV_PIX_FMT_NONE.rawValue else {
        return AV_PIX_FMT_NONE
    }
    while format.pointee != AV_PIX_FMT_NONE {
        if format.pointee.rawValue == wanted { return format.pointee }
        format += 1
    }
    return AV_PIX_FMT_NONE
}
