/// Turns a published frame into tightly packed planes (no row padding), as y4m and raw video files carry them.
public enum PlanarConversion {
    /// The frame's planes without stride padding, in its own layout (NV12 stays NV12): raw video.
    public static func packed(_ pixels: [UInt8], layout: FrameLayout) -> [UInt8] {
        var out: [UInt8] = []
        pixels.withUnsafeBytes { packed($0, layout: layout, into: &out) }
        return out
    }

    /// `packed` from the frame where it lies (a slot in the ring) into `out`, reused from frame to frame.
    public static func packed(_ source: UnsafeRawBufferPointer, layout: FrameLayout, into out: inout [UInt8]) {
        let count = layout.planes.reduce(0) { $0 + $1.rowBytes * $1.rows }
        if out.count != count { out = [UInt8](repeating: 0, count: count) }
        out.withUnsafeMutableBytes { destination in
            var cursor = 0
            for plane in layout.planes {
                for row in 0..<plane.rows {
                    destination.baseAddress!.advanced(by: cursor)
                        .copyMemory(from: source.baseAddress! + plane.offset + row * plane.stride, byteCount: plane.rowBytes)
                    cursor += plane.rowBytes
                }
            }
        }
    }

    /// The frame as fully planar samples (`format.planarEquivalent`): NV12 → yuv420p, P010 → yuv420p10 (samples
    /// shifted back down to the low bits), planar formats unchanged. Lossless.
    public static func planar(_ pixels: [UInt8], layout: FrameLayout) -> [UInt8] {
        var out: [UInt8] = []
        pixels.withUnsafeBytes { planar($0, layout: layout, into: &out) }
        return out
    }

    /// `planar` from the frame where it lies (a slot in the ring) into `out`, reused from frame to frame.
    public static func planar(_ source: UnsafeRawBufferPointer, layout: FrameLayout, into out: inout [UInt8]) {
        guard layout.format.isSemiPlanar else { return packed(source, layout: layout, into: &out) }
        let luma = layout.planes[0]
        let chroma = layout.planes[1]
        let sampleBytes = layout.format.bytesPerSample
        let chromaSamples = chroma.rowBytes / (2 * sampleBytes)
        let count = luma.rowBytes * luma.rows + 2 * chromaSamples * sampleBytes * chroma.rows
        if out.count != count { out = [UInt8](repeating: 0, count: count) }
        out.withUnsafeMutableBytes { destination in
            var cursor = 0
            for row in 0..<luma.rows {
                let start = luma.offset + row * luma.stride
                if sampleBytes == 1 {
                    destination.baseAddress!.advanced(by: cursor)
                        .copyMemory(from: source.baseAddress! + start, byteCount: luma.rowBytes)
                } else {
                    for x in 0..<(luma.rowBytes / 2) {
                        let value = source.loadUnaligned(fromByteOffset: start + 2 * x, as: UInt16.self) >> 6
                        destination.storeBytes(of: value, toByteOffset: cursor + 2 * x, as: UInt16.self)
                    }
                }
                cursor += luma.rowBytes
            }
            let planeBytes = chromaSamples * sampleBytes * chroma.rows
            for row in 0..<chroma.rows {
                let start = chroma.offset + row * chroma.stride
                let u = cursor + row * chromaSamples * sampleBytes
                let v = u + planeBytes
                if sampleBytes == 1 {
                    deinterleave(source.baseAddress! + start, into: destination.baseAddress! + u, and: destination.baseAddress! + v,
                                 count: chromaSamples)
                    continue
                }
                for x in 0..<chromaSamples {
                    let uValue = source.loadUnaligned(fromByteOffset: start + 4 * x, as: UInt16.self) >> 6
                    let vValue = source.loadUnaligned(fromByteOffset: start + 4 * x + 2, as: UInt16.self) >> 6
                    destination.storeBytes(of: uValue, toByteOffset: u + 2 * x, as: UInt16.self)
                    destination.storeBytes(of: vValue, toByteOffset: v + 2 * x, as: UInt16.self)
                }
            }
        }
    }

    /// Splits `count` interleaved byte pairs into two rows, 16 pairs at a time where they fit.
    private static func deinterleave(_ source: UnsafeRawPointer, into first: UnsafeMutableRawPointer,
                                     and second: UnsafeMutableRawPointer, count: Int) {
        var x = 0
        while x + 16 <= count {
            let pairs = source.loadUnaligned(fromByteOffset: 2 * x, as: SIMD32<UInt8>.self)
            first.storeBytes(of: pairs.evenHalf, toByteOffset: x, as: SIMD16<UInt8>.self)
            second.storeBytes(of: pairs.oddHalf, toByteOffset: x, as: SIMD16<UInt8>.self)
            x += 16
        }
        while x < count {
            first.storeBytes(of: source.load(fromByteOffset: 2 * x, as: UInt8.self), toByteOffset: x, as: UInt8.self)
            second.storeBytes(of: source.load(fromByteOffset: 2 * x + 1, as: UInt8.self), toByteOffset: x, as: UInt8.self)
            x += 1
        }
    }

    /// The y4m colour-space tag for a planar format (what FFmpeg's yuv4mpegpipe reads), or nil when y4m cannot
    /// carry it (RGB).
    public static func y4mColourSpace(_ format: PixelFormat) -> String? {
        switch format.planarEquivalent {
        case .yuv420p: return "420jpeg"
        case .yuv422p: return "422"
        case .yuv444p: return "444"
        case .gray8: return "mono"
        case .yuv420p10: return "420p10"
        case .yuv422p10: return "422p10"
        case .yuv444p10: return "444p10"
        case .gray10: return "mono10"
        case .yuv420p12: return "420p12"
        case .yuv422p12: return "422p12"
        case .yuv444p12: return "444p12"
        default: return nil
        }
    }
}
