import FrameFormats
import Glibc

/// Copies decoded planes into a published layout in one pass: row copies when the layouts match, chroma
/// interleaving for planar → NV12 / P010 (P010 also moves 10-bit samples to the high bits). Whole frames, or the
/// rows of each layout plane a picture decoded so far has final (`PictureBands`).
enum PlaneCopier {
    static func copy(from source: SourcePlanes, format: PixelFormat, into destination: UnsafeMutableRawBufferPointer,
                     layout: FrameLayout) {
        copy(from: source, format: format, into: destination, layout: layout) { 0..<layout.planes[$0].rows }
    }

    /// Copies rows `rows(plane)` of each layout plane (rows of the layout's plane, which the source's planes have
    /// at the same row numbers).
    static func copy(from source: SourcePlanes, format: PixelFormat, into destination: UnsafeMutableRawBufferPointer,
                     layout: FrameLayout, rows: (Int) -> Range<Int>) {
        let base = destination.baseAddress!
        switch (format, layout.format) {
        case (.yuv420p, .nv12):
            copyRows(source.pointers[0]!, source.strides[0], base + layout.planes[0].offset, layout.planes[0], rows(0))
            interleave8(source, base + layout.planes[1].offset, layout.planes[1], rows(1))
        case (.yuv420p10, .p010):
            shift16(source.pointers[0]!, source.strides[0], base + layout.planes[0].offset, layout.planes[0], rows(0))
            interleave16Shifted(source, base + layout.planes[1].offset, layout.planes[1], rows(1))
        default:
            precondition(format == layout.format, "no conversion from \(format) to \(layout.format)")
            for (index, plane) in layout.planes.enumerated() {
                copyRows(source.pointers[index]!, source.strides[index], base + plane.offset, plane, rows(index))
            }
        }
    }

    private static func copyRows(_ source: UnsafePointer<UInt8>, _ sourceStride: Int,
                                 _ destination: UnsafeMutableRawPointer, _ plane: FrameLayout.Plane, _ rows: Range<Int>) {
        guard !rows.isEmpty else { return }
        precondition(rows.lowerBound >= 0 && rows.upperBound <= plane.rows, "rows \(rows) of a plane of \(plane.rows)")
        if sourceStride == plane.stride {
            memcpy(destination + rows.lowerBound * plane.stride, source + rows.lowerBound * sourceStride,
                   plane.stride * (rows.count - 1) + plane.rowBytes)
            return
        }
        for row in rows {
            memcpy(destination + row * plane.stride, source + row * sourceStride, plane.rowBytes)
        }
    }

    /// U and V rows into one UV row.
    private static func interleave8(_ source: SourcePlanes, _ destination: UnsafeMutableRawPointer, _ plane: FrameLayout.Plane,
                                    _ rows: Range<Int>) {
        precondition(rows.isEmpty || (rows.lowerBound >= 0 && rows.upperBound <= plane.rows), "rows \(rows) of \(plane.rows)")
        let width = plane.rowBytes / 2
        for row in rows {
            let u = source.pointers[1]! + row * source.strides[1]
            let v = source.pointers[2]! + row * source.strides[2]
            let out = (destination + row * plane.stride).assumingMemoryBound(to: UInt8.self)
            for x in 0..<width {
                out[2 * x] = u[x]
                out[2 * x + 1] = v[x]
            }
        }
    }

    private static func shift16(_ source: UnsafePointer<UInt8>, _ sourceStride: Int,
                                _ destination: UnsafeMutableRawPointer, _ plane: FrameLayout.Plane, _ rows: Range<Int>) {
        precondition(rows.isEmpty || (rows.lowerBound >= 0 && rows.upperBound <= plane.rows), "rows \(rows) of \(plane.rows)")
        let samples = plane.rowBytes / 2
        for row in rows {
            let input = UnsafeRawPointer(source + row * sourceStride)
            let out = destination + row * plane.stride
            for x in 0..<samples {
                let value = input.loadUnaligned(fromByteOffset: 2 * x, as: UInt16.self)
                out.storeBytes(of: value << 6, toByteOffset: 2 * x, as: UInt16.self)
            }
        }
    }

    private static func interleave16Shifted(_ source: SourcePlanes, _ destination: UnsafeMutableRawPointer,
                                            _ plane: FrameLayout.Plane, _ rows: Range<Int>) {
        precondition(rows.isEmpty || (rows.lowerBound >= 0 && rows.upperBound <= plane.rows), "rows \(rows) of \(plane.rows)")
        let width = plane.rowBytes / 4
        for row in rows {
            let u = UnsafeRawPointer(source.pointers[1]! + row * source.strides[1])
            let v = UnsafeRawPointer(source.pointers[2]! + row * source.strides[2])
            let out = destination + row * plane.stride
            for x in 0..<width {
                out.storeBytes(of: u.loadUnaligned(fromByteOffset: 2 * x, as: UInt16.self) << 6, toByteOffset: 4 * x, as: UInt16.self)
                out.storeBytes(of: v.loadUnaligned(fromByteOffset: 2 * x, as: UInt16.self) << 6, toByteOffset: 4 * x + 2, as: UInt16.self)
            }
        }
    }
}
