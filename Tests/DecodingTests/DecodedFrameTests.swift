import CFFmpeg
@testable import Decoding
import FrameFormats
import Testing

/// What a decoded frame tells its consumer (format, flags, colour, aspect) and how it writes its pixels: on
/// AVFrames made here for the edge cases, and on a real clip for what libavcodec fills in.
@Suite struct DecodedFrameTests {
    /// Every publishable format is found from FFmpeg's name for it, and back: the table cannot drift from the ABI.
    @Test func everyPublishableFormatMapsFromItsLibavcodecFormat() throws {
        for format in PixelFormat.allCases {
            let native = av_get_pix_fmt(format.description)
            #expect(native != AV_PIX_FMT_NONE, "\(format)")
            #expect(PixelFormat(native) == format, "\(format)")
        }
        // Full-range "J" formats share the planar layout; big-endian and packed RGB have no published form.
        #expect(PixelFormat(AV_PIX_FMT_YUVJ420P) == .yuv420p)
        #expect(PixelFormat(AV_PIX_FMT_YUVJ422P) == .yuv422p)
        #expect(PixelFormat(AV_PIX_FMT_YUVJ444P) == .yuv444p)
        #expect(PixelFormat(AV_PIX_FMT_YUV420P10BE) == nil)
        #expect(PixelFormat(AV_PIX_FMT_RGB24) == nil)
        #expect(PixelFormat(AV_PIX_FMT_NV21) == nil, "V before U: NV12's layout with the chroma swapped")
    }

    /// `auto` turns 4:2:0 into NV12 (8-bit) or P010 (10-bit), and leaves everything else as decoded; `native`
    /// never converts.
    @Test func autoOutputIsNV12OrP010OnlyFor420() {
        let cases: [(AVPixelFormat, auto: PixelFormat?, native: PixelFormat?)] = [
            (AV_PIX_FMT_YUV420P, .nv12, .yuv420p), (AV_PIX_FMT_YUVJ420P, .nv12, .yuv420p),
            (AV_PIX_FMT_YUV420P10LE, .p010, .yuv420p10), (AV_PIX_FMT_YUV420P12LE, .yuv420p12, .yuv420p12),
            (AV_PIX_FMT_YUV422P, .yuv422p, .yuv422p), (AV_PIX_FMT_YUV444P10LE, .yuv444p10, .yuv444p10),
            (AV_PIX_FMT_GRAY8, .gray8, .gray8), (AV_PIX_FMT_RGB24, nil, nil),
        ]
        for (avFormat, auto, native) in cases {
            let frame = SyntheticFrame(.gray8, width: 2, height: 2, seed: 1, avFormat: avFormat)
            #expect(frame.decoded.outputFormat(.auto) == auto, "\(avFormat)")
            #expect(frame.decoded.outputFormat(.native) == native, "\(avFormat)")
        }
    }

    /// A frame with no published form says which format it is, and refuses to be written rather than guessing.
    @Test func aFormatWithNoPublishedFormIsRefusedByName() {
        let frame = SyntheticFrame(.gray8, width: 4, height: 2, seed: 1, avFormat: AV_PIX_FMT_RGB24)
        #expect(frame.decoded.decoderPixelFormatName == "rgb24")
        #expect(frame.decoded.decoderPixelFormat == nil)
        var buffer = [UInt8](repeating: 0, count: 4096)
        let layout = FrameLayout(format: .gray8, width: 4, height: 2)
        #expect(throws: DecoderError.unsupportedPixelFormat("rgb24")) {
            try buffer.withUnsafeMutableBytes { try frame.decoded.write(into: $0, layout: layout) }
        }
        #expect(buffer.allSatisfy { $0 == 0 }, "nothing written")
    }

    /// A full-range frame written for `auto`: NV12, the same samples as the copier's reference.
    @Test func writeConvertsFullRangePlanarToNV12() throws {
        let frame = SyntheticFrame(.yuv420p, width: 21, height: 13, extraStride: 3, seed: 9, avFormat: AV_PIX_FMT_YUVJ420P)
        let format = try #require(frame.decoded.outputFormat(.auto))
        let layout = FrameLayout(format: format, width: frame.decoded.width, height: frame.decoded.height)
        var buffer = [UInt8](repeating: 0x5A, count: layout.byteCount)
        buffer.withUnsafeMutableBytes { try! frame.decoded.write(into: $0, layout: layout) }
        #expect(layout.format == .nv12)
        #expect(buffer == frame.expected(in: layout, fill: 0x5A, extra: 0))
    }

    /// Damage is reported whether libavcodec flags it in `decode_error_flags` or with AV_FRAME_FLAG_CORRUPT.
    @Test func eitherOfLibavcodecsDamageMarksMakesTheFrameCorrupt() {
        let frame = SyntheticFrame(.gray8, width: 2, height: 2, seed: 1)
        #expect(!frame.decoded.isCorrupt)
        frame.frame.pointee.decode_error_flags = Int32(FF_DECODE_ERROR_CONCEALMENT_ACTIVE)
        #expect(frame.decoded.isCorrupt)
        frame.frame.pointee.decode_error_flags = 0
        frame.frame.pointee.flags = Int32(AV_FRAME_FLAG_DISCARD)
        #expect(!frame.decoded.isCorrupt, "another flag is no damage")
        frame.frame.pointee.flags |= Int32(AV_FRAME_FLAG_CORRUPT)
        #expect(frame.decoded.isCorrupt)
    }

    /// An unknown or invalid aspect ratio (0/1 as libavcodec leaves it, a negative one) is reported as 0:0.
    @Test func onlyAPositiveSampleAspectRatioIsReported() {
        let frame = SyntheticFrame(.gray8, width: 2, height: 2, seed: 1)
        for (ratio, expected) in [(AVRational(num: 0, den: 1), (0, 0)), (AVRational(num: 16, den: 11), (16, 11)),
                                  (AVRational(num: -4, den: 3), (0, 0)), (AVRational(num: 4, den: 0), (0, 0))] {
            frame.frame.pointee.sample_aspect_ratio = ratio
            let reported = frame.decoded.sampleAspectRatio
            #expect(reported.0 == UInt32(expected.0) && reported.1 == UInt32(expected.1), "\(ratio)")
        }
    }

    /// A frame in GPU memory is described by its frames context: hardware, with the download's software format.
    @Test func aGPUFrameReportsItsSoftwareFormat() throws {
        let allocated = try #require(av_hwdevice_ctx_alloc(AV_HWDEVICE_TYPE_VAAPI), "libavutil without VA-API")
        var device: UnsafeMutablePointer<AVBufferRef>? = allocated
        defer { av_buffer_unref(&device) }
        let frames = try #require(av_hwframe_ctx_alloc(device))
        UnsafeMutableRawPointer(frames.pointee.data).assumingMemoryBound(to: AVHWFramesContext.self).pointee.sw_format = AV_PIX_FMT_P010LE
        let frame = SyntheticFrame(.gray8, width: 2, height: 2, seed: 1, avFormat: AV_PIX_FMT_VAAPI)
        #expect(!frame.decoded.isHardware)
        frame.frame.pointee.hw_frames_ctx = frames  // the frame's reference now, freed with it
        #expect(frame.decoded.isHardware)
        #expect(frame.decoded.decoderPixelFormatName == "p010le")
        #expect(frame.decoded.decoderPixelFormat == .p010)
        #expect(frame.decoded.outputFormat(.auto) == .p010)
        av_buffer_unref(&frame.frame.pointee.hw_frames_ctx)
    }

    /// What libavcodec reads from the stream reaches the consumer: the cropped size (not the 16-pixel coded one),
    /// the VUI's aspect ratio and colour description, the pts sent, the keyframe.
    @Test func aRealFrameCarriesTheStreamsSizeAspectAndColour() throws {
        let stream = try VideoDecoderTests.ffmpegClip(
            source: "testsrc2=size=66x38:rate=25,setsar=4/3", frames: 2,
            options: ["-color_range", "pc", "-color_primaries", "bt709", "-color_trc", "smpte2084", "-colorspace", "bt2020nc",
                      "-x264-params", "bframes=0"])
        let inputs = decoderInputs(stream)
        let decoder = try VideoDecoderTests.decoder(for: inputs[0])
        var seen: [String] = []
        for input in inputs {
            #expect(input.data.withUnsafeBytes { decoder.send($0, pts: 40 + input.pts) } == .accepted)
            _ = decoder.receive { frame in
                let aspect = frame.sampleAspectRatio
                seen.append("\(frame.pts) \(frame.width)x\(frame.height) \(aspect.0):\(aspect.1) key \(frame.isKeyframe) "
                    + "\(frame.decoderPixelFormatName) hw \(frame.isHardware) corrupt \(frame.isCorrupt)")
                #expect(frame.colorRange == UInt8(AVCOL_RANGE_JPEG.rawValue))
                #expect(frame.colorPrimaries == UInt8(AVCOL_PRI_BT709.rawValue))
                #expect(frame.colorTransfer == UInt8(AVCOL_TRC_SMPTE2084.rawValue))
                #expect(frame.colorMatrix == UInt8(AVCOL_SPC_BT2020_NCL.rawValue))
            }
        }
        // x264 codes full range as yuvj420p's samples with the range flag: libavcodec reports yuvj420p.
        #expect(seen == ["40 66x38 4:3 key true yuvj420p hw false corrupt false", "41 66x38 4:3 key false yuvj420p hw false corrupt false"])
    }
}
