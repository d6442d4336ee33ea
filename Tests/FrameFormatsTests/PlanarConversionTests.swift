import FrameFormats
import Testing

/// Published frames to tightly packed planes: the fast paths (rows copied whole, chroma pairs split 16 at a time)
/// give the bytes a sample-by-sample reading of the layout gives, for every width's remainder.
struct PlanarConversionTests {
    /// A frame of `layout` whose every byte differs from its neighbours, padding included.
    static func frame(_ layout: FrameLayout) -> [UInt8] {
        (0..<layout.byteCount).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }
    }

    /// The planar picture read sample by sample from the layout: the definition the conversions must meet.
    static func reference(_ pixels: [UInt8], _ layout: FrameLayout) -> [UInt8] {
        let sample = layout.format.bytesPerSample
        guard layout.format.isSemiPlanar else {
            return layout.planes.flatMap { plane in
                (0..<plane.rows).flatMap { row in pixels[(plane.offset + row * plane.stride)..<(plane.offset + row * plane.stride + plane.rowBytes)] }
            }
        }
        func value(_ offset: Int) -> [UInt8] {
            guard sample == 2 else { return [pixels[offset]] }
            let word = (UInt16(pixels[offset]) | UInt16(pixels[offset + 1]) << 8) >> 6
            return [UInt8(word & 0xff), UInt8(word >> 8)]
        }
        let luma = layout.planes[0], chroma = layout.planes[1]
        var out: [UInt8] = []
        for row in 0..<luma.rows {
            for x in stride(from: 0, to: luma.rowBytes, by: sample) { out += value(luma.offset + row * luma.stride + x) }
        }
        for component in 0..<2 {
            for row in 0..<chroma.rows {
                for x in stride(from: component * sample, to: chroma.rowBytes, by: 2 * sample) { out += value(chroma.offset + row * chroma.stride + x) }
            }
        }
        return out
    }

    @Test(arguments: [PixelFormat.nv12, .p010, .yuv420p, .yuv444p], [2, 30, 31, 32, 33, 64, 66, 94, 1920])
    func planarMatchesTheSampleBySampleReading(format: PixelFormat, width: Int) {
        let layout = FrameLayout(format: format, width: width, height: 6)
        let pixels = Self.frame(layout)
        let expected = Self.reference(pixels, layout)
        #expect(PlanarConversion.planar(pixels, layout: layout) == expected)
        var reused = [UInt8](repeating: 0xAA, count: 3)
        pixels.withUnsafeBytes { PlanarConversion.planar($0, layout: layout, into: &reused) }
        #expect(reused == expected)
    }

    @Test func packedKeepsTheLayoutWithoutPadding() {
        let layout = FrameLayout(format: .nv12, width: 33, height: 5)
        let pixels = Self.frame(layout)
        let expected = layout.planes.flatMap { plane in
            (0..<plane.rows).flatMap { row in pixels[(plane.offset + row * plane.stride)..<(plane.offset + row * plane.stride + plane.rowBytes)] }
        }
        #expect(PlanarConversion.packed(pixels, layout: layout) == expected)
        #expect(expected.count == 33 * 5 + 34 * 3)
    }
}
