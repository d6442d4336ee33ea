import CFFmpeg
@testable import Decoding
import FrameFormats
import StreamrecvTestSupport
import Testing

/// A picture laid out as a decoder's AVFrame: planes of random samples behind strides of the test's choosing
/// (odd ones too, which no decoder gives but which catch a copier that assumes alignment), padding filled with
/// `padding` so that a copier reading past a row's samples shows.
final class SyntheticFrame {
    let frame: UnsafeMutablePointer<AVFrame>
    let transfer: UnsafeMutablePointer<AVFrame>
    let format: PixelFormat
    let width: Int
    let height: Int
    /// Each plane's bytes, stride included.
    let planes: [UnsafeMutableRawBufferPointer]
    let strides: [Int]

    static let padding: UInt8 = 0xEE

    /// - Parameters:
    ///   - extraStride: bytes added to each plane's row of samples to make its stride ...
    ///   - strides: ... unless the strides are given.
    init(_ format: PixelFormat, width: Int, height: Int, extraStride: Int = 0, strides given: [Int]? = nil, seed: UInt64,
         avFormat: AVPixelFormat? = nil) {
        self.format = format
        self.width = width
        self.height = height
        var generator = SeededGenerator(seed: seed)
        var planes: [UnsafeMutableRawBufferPointer] = []
        var strides: [Int] = []
        for (index, size) in format.planes(width: width, height: height).enumerated() {
            let stride = given?[index] ?? size.rowBytes + extraStride
            let plane = UnsafeMutableRawBufferPointer.allocate(byteCount: stride * size.rows, alignment: 64)
            plane.initializeMemory(as: UInt8.self, repeating: Self.padding)
            for row in 0..<size.rows {
                for sample in 0..<(size.rowBytes / format.bytesPerSample) {
                    let value = UInt16.random(in: 0..<(1 << format.bitDepth), using: &generator)
                    if format.bytesPerSample == 1 {
                        plane[row * stride + sample] = UInt8(value)
                    } else {
                        plane.storeBytes(of: value.littleEndian, toByteOffset: row * stride + 2 * sample, as: UInt16.self)
                    }
                }
            }
            planes.append(plane)
            strides.append(stride)
        }
        self.planes = planes
        self.strides = strides
        frame = av_frame_alloc()!
        transfer = av_frame_alloc()!
        frame.pointee.format = (avFormat ?? av_get_pix_fmt(format.description)).rawValue
        frame.pointee.width = Int32(width)
        frame.pointee.height = Int32(height)
        // The planes stay ours (no buf): av_frame_free only forgets the pointers.
        withUnsafeMutableBytes(of: &frame.pointee.data) { data in
            withUnsafeMutableBytes(of: &frame.pointee.linesize) { linesize in
                for (index, plane) in planes.enumerated() {
                    data.storeBytes(of: plane.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                    toByteOffset: index * MemoryLayout<UnsafeMutablePointer<UInt8>>.stride,
                                    as: UnsafeMutablePointer<UInt8>.self)
                    linesize.storeBytes(of: Int32(strides[index]), toByteOffset: index * 4, as: Int32.self)
                }
            }
        }
    }

    deinit {
        var frame: UnsafeMutablePointer<AVFrame>? = frame
        var transfer: UnsafeMutablePointer<AVFrame>? = transfer
        av_frame_free(&frame)
        av_frame_free(&transfer)
        planes.forEach { $0.deallocate() }
    }

    var decoded: DecodedFrame { DecodedFrame(frame: frame, transfer: transfer) }

    /// Sample `x` of `row` in `plane`, as stored (8 or 16 bits).
    func sample(_ plane: Int, _ row: Int, _ x: Int) -> UInt16 {
        let offset = row * strides[plane] + x * format.bytesPerSample
        return format.bytesPerSample == 1 ? UInt16(planes[plane][offset])
            : UInt16(littleEndian: planes[plane].loadUnaligned(fromByteOffset: offset, as: UInt16.self))
    }

    /// What `layout` should hold, built sample by sample from the planes (never by row copies): chroma interleaved
    /// for NV12/P010, samples moved to the high bits for P010. Bytes outside the rows' samples keep `fill`.
    func expected(in layout: FrameLayout, fill: UInt8, extra: Int) -> [UInt8] {
        var out = [UInt8](repeating: fill, count: layout.byteCount + extra)
        func put(_ value: UInt16, bytes: Int, at offset: Int) {
            out[offset] = UInt8(truncatingIfNeeded: value)
            if bytes == 2 { out[offset + 1] = UInt8(truncatingIfNeeded: value >> 8) }
        }
        let shift: UInt16 = layout.format == .p010 ? 6 : 0
        let bytes = layout.format.bytesPerSample
        if layout.format.isSemiPlanar && !format.isSemiPlanar {
            let luma = layout.planes[0], chroma = layout.planes[1]
            for row in 0..<luma.rows {
                for x in 0..<width { put(sample(0, row, x) << shift, bytes: bytes, at: luma.offset + row * luma.stride + x * bytes) }
            }
            for row in 0..<chroma.rows {
                for x in 0..<(chroma.rowBytes / (2 * bytes)) {
                    let base = chroma.offset + row * chroma.stride + 2 * x * bytes
                    put(sample(1, row, x) << shift, bytes: bytes, at: base)
                    put(sample(2, row, x) << shift, bytes: bytes, at: base + bytes)
                }
            }
            return out
        }
        for (index, plane) in layout.planes.enumerated() {
            for row in 0..<plane.rows {
                for x in 0..<(plane.rowBytes / bytes) {
                    put(sample(index, row, x), bytes: bytes, at: plane.offset + row * plane.stride + x * bytes)
                }
            }
        }
        return out
    }
}

/// Planes out of a decoder's frame into the published layout: compared with a sample-by-sample reference, rows'
/// padding and the bytes after the layout untouched.
@Suite struct PlaneCopierTests {
    /// Filled into the destination beforehand: what the copier must not write.
    static let untouched: UInt8 = 0x5A
    /// Bytes past the layout's end in the destination.
    static let tail = 64

    static func copy(_ source: SyntheticFrame, to format: PixelFormat) -> (result: [UInt8], layout: FrameLayout) {
        let layout = FrameLayout(format: format, width: source.width, height: source.height)
        var destination = [UInt8](repeating: untouched, count: layout.byteCount + tail)
        destination.withUnsafeMutableBytes {
            PlaneCopier.copy(from: SourcePlanes(source.frame), format: source.format, into: $0, layout: layout)
        }
        return (destination, layout)
    }

    /// 8-bit planar into NV12: U and V interleaved, at odd sizes (chroma rounded up) and odd source strides.
    @Test(arguments: [(64, 48), (37, 23), (1, 1), (2, 3), (129, 7), (1920, 34), (100, 4)])
    func planarToNV12InterleavesChroma(width: Int, height: Int) {
        let source = SyntheticFrame(.yuv420p, width: width, height: height, extraStride: 13, seed: UInt64(width * 1000 + height))
        let (result, layout) = Self.copy(source, to: .nv12)
        #expect(layout.planes[1].rowBytes == 2 * ((width + 1) / 2) && layout.planes[1].rows == (height + 1) / 2)
        #expect(result == source.expected(in: layout, fill: Self.untouched, extra: Self.tail))
    }

    /// 10-bit planar into P010: samples moved to the high 10 bits (the low 6 zero), chroma interleaved.
    @Test(arguments: [(64, 48), (37, 23), (3, 1)])
    func tenBitPlanarToP010ShiftsAndInterleaves(width: Int, height: Int) {
        let source = SyntheticFrame(.yuv420p10, width: width, height: height, extraStride: 7, seed: UInt64(width * 1000 + height))
        let (result, layout) = Self.copy(source, to: .p010)
        #expect(result == source.expected(in: layout, fill: Self.untouched, extra: Self.tail))
        // The sample-by-sample reference spelled out once: the first luma and the first V sample.
        let first = UInt16(result[0]) | UInt16(result[1]) << 8
        #expect(first == source.sample(0, 0, 0) << 6 && first & 0x3F == 0)
        let v = layout.planes[1].offset + 2
        #expect(UInt16(result[v]) | UInt16(result[v + 1]) << 8 == source.sample(2, 0, 0) << 6)
    }

    /// Same format in and out: planes copied row by row whatever the source stride, for every bit depth and
    /// subsampling (4:2:2 and 4:4:4 keep their chroma widths; grey has one plane; NV12 stays interleaved).
    @Test(arguments: [PixelFormat.yuv420p, .yuv422p, .yuv444p, .gray8, .nv12, .p010, .yuv420p10, .yuv422p10, .yuv444p12, .gray10, .gbrp10])
    func sameFormatCopiesEveryPlane(format: PixelFormat) {
        let source = SyntheticFrame(format, width: 35, height: 19, extraStride: 5, seed: format.rawValue.toSeed)
        let (result, layout) = Self.copy(source, to: format)
        #expect(layout.planes.count == format.planes(width: 35, height: 19).count)
        #expect(result == source.expected(in: layout, fill: Self.untouched, extra: Self.tail))
    }

    /// A source whose strides equal the layout's is copied in one block per plane: its row padding then comes along
    /// (the source's padding is what lands there), but nothing past the last row's samples.
    @Test func matchingStridesCopyEachPlaneInOneBlockAndStopAtItsLastSample() {
        let layout = FrameLayout(format: .yuv420p, width: 40, height: 9)
        let source = SyntheticFrame(.yuv420p, width: 40, height: 9, strides: layout.planes.map(\.stride), seed: 3)
        let (result, _) = Self.copy(source, to: .yuv420p)
        var expected = source.expected(in: layout, fill: SyntheticFrame.padding, extra: 0)
        // After each plane's last row: the next plane's start (or, after the last plane, the destination's tail).
        for plane in layout.planes {
            let end = plane.offset + plane.stride * (plane.rows - 1) + plane.rowBytes
            for offset in end..<(plane.offset + plane.stride * plane.rows) { expected[offset] = Self.untouched }
        }
        expected += [UInt8](repeating: Self.untouched, count: Self.tail)
        #expect(result == expected)
    }
}

extension UInt32 {
    fileprivate var toSeed: UInt64 { UInt64(self) &* 0x9E37_79B9 }
}
