import CFFmpeg
import CSwscale
import FrameFormats

/// Why a frame could not be made into a PNG.
public struct SnapshotError: Error, CustomStringConvertible {
    public var description: String
}

/// One published frame as a PNG: converted to 8-bit RGB by libswscale (bicubic chroma upsampling, BT.601
/// coefficients, the frame's range; FFmpeg's CLI defaults for an untagged frame) and encoded by libavcodec's PNG
/// encoder. Used by `streamrecvctl snapshot`.
public enum PNGSnapshot {
    /// - Parameters:
    ///   - pixels: the frame as the ring publishes it (planes at `layout`'s offsets); only read.
    ///   - fullRange: the frame is full range (JPEG), not limited (MPEG).
    public static func encode(_ pixels: [UInt8], layout: FrameLayout, fullRange: Bool = false) throws(SnapshotError) -> [UInt8] {
        // Converted from the planar equivalent (NV12 → yuv420p), as the decoder's own output would be: libswscale
        // upsamples interleaved chroma differently, and FFmpeg's conversion of the frame is the reference.
        let planarFormat = layout.format.planarEquivalent
        let source = av_get_pix_fmt(planarFormat.description)
        guard source != AV_PIX_FMT_NONE else { throw SnapshotError(description: "no FFmpeg pixel format for \(planarFormat)") }
        var planar = FrameLayout(format: planarFormat, width: layout.width, height: layout.height)
        var offset = 0
        for index in planar.planes.indices {
            planar.planes[index].offset = offset
            planar.planes[index].stride = planar.planes[index].rowBytes
            offset += planar.planes[index].rowBytes * planar.planes[index].rows
        }
        let rgb = try convertToRGB(PlanarConversion.planar(pixels, layout: layout), layout: planar, from: source, fullRange: fullRange)
        return try encodePNG(rgb, width: layout.width, height: layout.height)
    }

    /// Tightly packed RGB24 rows.
    private static func convertToRGB(
        _ pixels: [UInt8], layout: FrameLayout, from source: AVPixelFormat, fullRange: Bool
    ) throws(SnapshotError) -> [UInt8] {
        guard let context = sws_getContext(
            Int32(layout.width), Int32(layout.height), source, Int32(layout.width), Int32(layout.height), AV_PIX_FMT_RGB24,
            SWS_BICUBIC, nil, nil, nil)
        else { throw SnapshotError(description: "libswscale cannot convert \(layout.format) to RGB") }
        defer { sws_freeContext(context) }
        let coefficients = sws_getCoefficients(SWS_CS_DEFAULT)
        _ = sws_setColorspaceDetails(context, coefficients, fullRange ? 1 : 0, coefficients, 1, 0, 1 << 16, 1 << 16)
        var rgb = [UInt8](repeating: 0, count: layout.width * layout.height * 3)
        let converted = pixels.withUnsafeBufferPointer { input in
            rgb.withUnsafeMutableBufferPointer { output in
                var sourcePlanes: [UnsafePointer<UInt8>?] = layout.planes.map { input.baseAddress! + $0.offset }
                var sourceStrides: [Int32] = layout.planes.map { Int32($0.stride) }
                sourcePlanes += Array(repeating: nil, count: 4 - sourcePlanes.count)
                sourceStrides += Array(repeating: 0, count: 4 - sourceStrides.count)
                var destinationPlanes: [UnsafeMutablePointer<UInt8>?] = [output.baseAddress, nil, nil, nil]
                var destinationStrides: [Int32] = [Int32(layout.width * 3), 0, 0, 0]
                return sws_scale(context, &sourcePlanes, &sourceStrides, 0, Int32(layout.height), &destinationPlanes, &destinationStrides)
            }
        }
        guard converted == Int32(layout.height) else { throw SnapshotError(description: "libswscale converted \(converted) of \(layout.height) rows") }
        return rgb
    }

    private static func encodePNG(_ rgb: [UInt8], width: Int, height: Int) throws(SnapshotError) -> [UInt8] {
        guard let codec = avcodec_find_encoder(AV_CODEC_ID_PNG) else { throw SnapshotError(description: "libavcodec has no PNG encoder") }
        var context = avcodec_alloc_context3(codec)
        var frame = av_frame_alloc()
        var packet = av_packet_alloc()
        defer {
            avcodec_free_context(&context)
            av_frame_free(&frame)
            av_packet_free(&packet)
        }
        guard let context, let frame, let packet else { throw SnapshotError(description: "out of memory") }
        context.pointee.width = Int32(width)
        context.pointee.height = Int32(height)
        context.pointee.pix_fmt = AV_PIX_FMT_RGB24
        context.pointee.time_base = AVRational(num: 1, den: 25)
        guard avcodec_open2(context, codec, nil) >= 0 else { throw SnapshotError(description: "cannot open the PNG encoder") }
        frame.pointee.width = Int32(width)
        frame.pointee.height = Int32(height)
        frame.pointee.format = AV_PIX_FMT_RGB24.rawValue
        guard av_frame_get_buffer(frame, 0) >= 0 else { throw SnapshotError(description: "out of memory") }
        let destination = frame.pointee.data.0!
        let stride = Int(frame.pointee.linesize.0)
        rgb.withUnsafeBufferPointer { source in
            for row in 0..<height {
                (destination + row * stride).update(from: source.baseAddress! + row * width * 3, count: width * 3)
            }
        }
        guard avcodec_send_frame(context, frame) >= 0, avcodec_receive_packet(context, packet) >= 0 else {
            throw SnapshotError(description: "the PNG encoder failed")
        }
        return Array(UnsafeBufferPointer(start: packet.pointee.data, count: Int(packet.pointee.size)))
    }
}
