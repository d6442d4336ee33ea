import CFFmpeg
import FrameFormats
import Glibc

/// A frame the decoder returned, valid only inside the `receive` closure that handed it out (the decoder reuses
/// the underlying AVFrame). Copy its pixels out with `write(into:layout:)`.
public struct DecodedFrame {
    private let frame: UnsafeMutablePointer<AVFrame>
    private let transfer: UnsafeMutablePointer<AVFrame>

    init(frame: UnsafeMutablePointer<AVFrame>, transfer: UnsafeMutablePointer<AVFrame>) {
        self.frame = frame
        self.transfer = transfer
    }

    /// Picture size, cropping applied (libavcodec applies the SPS cropping window).
    public var width: Int { Int(frame.pointee.width) }
    public var height: Int { Int(frame.pointee.height) }
    /// The pts given to `send` with the access unit this frame came from.
    public var pts: Int64 { frame.pointee.pts }
    public var isKeyframe: Bool { frame.pointee.key_frame != 0 }
    /// The decoder concealed errors in this frame.
    public var isCorrupt: Bool {
        frame.pointee.decode_error_flags != 0 || frame.pointee.flags & Int32(AV_FRAME_FLAG_CORRUPT) != 0
    }
    /// Where its planes lie (software frames): what `PictureBands` tells apart.
    var planes: SourcePlanes { SourcePlanes(frame) }
    /// The pixels are in GPU memory and are downloaded by `write`.
    public var isHardware: Bool { frame.pointee.hw_frames_ctx != nil }

    private var softwarePixelFormat: AVPixelFormat {
        if let frames = frame.pointee.hw_frames_ctx {
            return UnsafeMutableRawPointer(frames.pointee.data).assumingMemoryBound(to: AVHWFramesContext.self).pointee.sw_format
        }
        return AVPixelFormat(rawValue: frame.pointee.format)
    }

    /// FFmpeg's name for the decoder's (or, for GPU frames, the download's) pixel format.
    public var decoderPixelFormatName: String {
        av_get_pix_fmt_name(softwarePixelFormat).map { String(cString: $0) } ?? "unknown"
    }

    /// The decoder's layout as a publishable format; nil when it has none (then the frame cannot be published).
    public var decoderPixelFormat: PixelFormat? { PixelFormat(softwarePixelFormat) }

    /// The format published for `mode`: `auto` turns 8-bit 4:2:0 into NV12 and 10-bit 4:2:0 into P010.
    public func outputFormat(_ mode: DecoderConfiguration.OutputMode) -> PixelFormat? {
        guard let native = decoderPixelFormat else { return nil }
        guard mode == .auto else { return native }
        switch native {
        case .yuv420p: return .nv12
        case .yuv420p10: return .p010
        default: return native
        }
    }

    public var colorRange: UInt8 { UInt8(truncatingIfNeeded: frame.pointee.color_range.rawValue) }
    public var colorPrimaries: UInt8 { UInt8(truncatingIfNeeded: frame.pointee.color_primaries.rawValue) }
    public var colorTransfer: UInt8 { UInt8(truncatingIfNeeded: frame.pointee.color_trc.rawValue) }
    public var colorMatrix: UInt8 { UInt8(truncatingIfNeeded: frame.pointee.colorspace.rawValue) }
    public var sampleAspectRatio: (UInt32, UInt32) {
        let ratio = frame.pointee.sample_aspect_ratio
        return ratio.num > 0 && ratio.den > 0 ? (UInt32(ratio.num), UInt32(ratio.den)) : (0, 0)
    }

    /// Writes the pixels into `destination`, laid out as `layout` (whose format is `outputFormat(…)` and whose
    /// size is this frame's). One pass over the pixels: a plain copy, or a copy that interleaves chroma for
    /// NV12/P010. GPU frames are downloaded straight into `destination` when the layouts match.
    public func write(into destination: UnsafeMutableRawBufferPointer, layout: FrameLayout) throws(DecoderError) {
        precondition(layout.width == width && layout.height == height, "layout is for another frame size")
        precondition(destination.count >= layout.byteCount, "destination smaller than the layout")
        if isHardware {
            try download(into: destination, layout: layout)
            return
        }
        guard let source = decoderPixelFormat else { throw .unsupportedPixelFormat(decoderPixelFormatName) }
        PlaneCopier.copy(from: SourcePlanes(frame), format: source, into: destination, layout: layout)
    }

    /// Writes the rows of each layout plane from `firstRows[plane]` on: the rows above were written from the same
    /// picture while it was being decoded (`BandPlacement`). Software frames only.
    public func writeRows(into destination: UnsafeMutableRawBufferPointer, layout: FrameLayout, from firstRows: [Int]) {
        precondition(layout.width == width && layout.height == height && !isHardware && firstRows.count == layout.planes.count)
        precondition(destination.count >= layout.byteCount, "destination smaller than the layout")
        guard let source = decoderPixelFormat else { preconditionFailure("a frame placed in bands has a publishable format") }
        PlaneCopier.copy(from: SourcePlanes(frame), format: source, into: destination, layout: layout) {
            firstRows[$0]..<layout.planes[$0].rows
        }
    }

    private func download(into destination: UnsafeMutableRawBufferPointer, layout: FrameLayout) throws(DecoderError) {
        av_frame_unref(transfer)
        guard let source = decoderPixelFormat else { throw .unsupportedPixelFormat(decoderPixelFormatName) }
        if source == layout.format, let base = destination.baseAddress {
            // Point the download's planes into the slot: av_hwframe_transfer_data writes there directly.
            guard let buffer = av_buffer_create(base.assumingMemoryBound(to: UInt8.self), destination.count,
                                                keepBuffer, nil, 0) else {
                throw .allocationFailed("download buffer")
            }
            transfer.pointee.buf.0 = buffer
            transfer.pointee.format = softwarePixelFormat.rawValue
            transfer.pointee.width = frame.pointee.width
            transfer.pointee.height = frame.pointee.height
            withUnsafeMutableBytes(of: &transfer.pointee.data) { data in
                withUnsafeMutableBytes(of: &transfer.pointee.linesize) { linesize in
                    for (index, plane) in layout.planes.enumerated() {
                        data.storeBytes(of: (base + plane.offset).assumingMemoryBound(to: UInt8.self),
                                        toByteOffset: index * MemoryLayout<UnsafeMutablePointer<UInt8>>.stride,
                                        as: UnsafeMutablePointer<UInt8>.self)
                        linesize.storeBytes(of: Int32(plane.stride), toByteOffset: index * 4, as: Int32.self)
                    }
                }
            }
            let result = av_hwframe_transfer_data(transfer, frame, 0)
            av_frame_unref(transfer)
            guard result >= 0 else { throw .transferFailed(ffmpegErrorText(result)) }
            return
        }
        // Layouts differ (e.g. `native` asked for planar): download, then convert in one more pass.
        let result = av_hwframe_transfer_data(transfer, frame, 0)
        guard result >= 0 else { throw .transferFailed(ffmpegErrorText(result)) }
        defer { av_frame_unref(transfer) }
        guard let downloaded = PixelFormat(AVPixelFormat(rawValue: transfer.pointee.format)) else {
            throw .unsupportedPixelFormat(decoderPixelFormatName)
        }
        PlaneCopier.copy(from: SourcePlanes(transfer), format: downloaded, into: destination, layout: layout)
    }
}

/// The slot memory belongs to the ring, not to FFmpeg: nothing to free.
private let keepBuffer: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutablePointer<UInt8>?) -> Void = { _, _ in }

/// The planes of an AVFrame, read from its `data`/`linesize` tuples (into fixed storage: no allocation per frame).
struct SourcePlanes {
    /// Four values, one per plane.
    struct PerPlane<Value> {
        fileprivate var values: (Value, Value, Value, Value)

        subscript(index: Int) -> Value {
            switch index {
            case 0: values.0
            case 1: values.1
            case 2: values.2
            case 3: values.3
            default: preconditionFailure("plane \(index) of 4")
            }
        }
    }

    let pointers: PerPlane<UnsafePointer<UInt8>?>
    let strides: PerPlane<Int>

    init(_ frame: UnsafeMutablePointer<AVFrame>) {
        let data = frame.pointee.data
        let linesize = frame.pointee.linesize
        pointers = PerPlane(values: (data.0.map { UnsafePointer($0) }, data.1.map { UnsafePointer($0) },
                                     data.2.map { UnsafePointer($0) }, data.3.map { UnsafePointer($0) }))
        strides = PerPlane(values: (Int(linesize.0), Int(linesize.1), Int(linesize.2), Int(linesize.3)))
    }

    /// The planes of the picture a band tracker follows.
    init(_ tracker: streamrecv_band_tracker) {
        let data = tracker.data
        let linesize = tracker.linesize
        pointers = PerPlane(values: (data.0, data.1, data.2, data.3))
        strides = PerPlane(values: (Int(linesize.0), Int(linesize.1), Int(linesize.2), Int(linesize.3)))
    }

    private init(pointers: PerPlane<UnsafePointer<UInt8>?>, strides: PerPlane<Int>) {
        self.pointers = pointers
        self.strides = strides
    }

    /// The same planes, each begun `offsets[plane]` bytes further (planes past the offsets given stay as they are).
    func advanced(by offsets: [Int]) -> SourcePlanes {
        func moved(_ index: Int) -> UnsafePointer<UInt8>? {
            index < offsets.count ? pointers[index].map { $0 + offsets[index] } : pointers[index]
        }
        return SourcePlanes(pointers: PerPlane(values: (moved(0), moved(1), moved(2), moved(3))), strides: strides)
    }
}

extension PixelFormat {
    /// The publishable format for a libavcodec pixel format (full-range "J" formats share the planar layout).
    init?(_ format: AVPixelFormat) {
        switch format {
        case AV_PIX_FMT_YUV420P, AV_PIX_FMT_YUVJ420P: self = .yuv420p
        case AV_PIX_FMT_YUV422P, AV_PIX_FMT_YUVJ422P: self = .yuv422p
        case AV_PIX_FMT_YUV444P, AV_PIX_FMT_YUVJ444P: self = .yuv444p
        case AV_PIX_FMT_GRAY8: self = .gray8
        case AV_PIX_FMT_NV12: self = .nv12
        case AV_PIX_FMT_P010LE: self = .p010
        case AV_PIX_FMT_YUV420P10LE: self = .yuv420p10
        case AV_PIX_FMT_YUV422P10LE: self = .yuv422p10
        case AV_PIX_FMT_YUV444P10LE: self = .yuv444p10
        case AV_PIX_FMT_GRAY10LE: self = .gray10
        case AV_PIX_FMT_YUV420P12LE: self = .yuv420p12
        case AV_PIX_FMT_YUV422P12LE: self = .yuv422p12
        case AV_PIX_FMT_YUV444P12LE: self = .yuv444p12
        case AV_PIX_FMT_GBRP: self = .gbrp
        case AV_PIX_FMT_GBRP10LE: self = .gbrp10
        default: return nil
        }
    }
}
