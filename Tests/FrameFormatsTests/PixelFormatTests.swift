import FrameFormats
import Testing

/// Every published format's planes and layout: what readers in every language derive from (format, width,
/// height) alone, so these are the ABI as much as the header's fields.
struct PixelFormatTests {
    /// (bytes per row, rows) of each plane of a 5 × 3 picture: odd sizes round chroma up.
    static let planesOf5x3: [PixelFormat: [[Int]]] = [
        .yuv420p: [[5, 3], [3, 2], [3, 2]], .nv12: [[5, 3], [6, 2]], .p010: [[10, 3], [12, 2]],
        .yuv422p: [[5, 3], [3, 3], [3, 3]], .yuv444p: [[5, 3], [5, 3], [5, 3]], .gray8: [[5, 3]],
        .yuv420p10: [[10, 3], [6, 2], [6, 2]], .yuv422p10: [[10, 3], [6, 3], [6, 3]], .yuv444p10: [[10, 3], [10, 3], [10, 3]],
        .gray10: [[10, 3]], .yuv420p12: [[10, 3], [6, 2], [6, 2]], .yuv422p12: [[10, 3], [6, 3], [6, 3]],
        .yuv444p12: [[10, 3], [10, 3], [10, 3]], .gbrp: [[5, 3], [5, 3], [5, 3]], .gbrp10: [[10, 3], [10, 3], [10, 3]],
    ]

    @Test(arguments: PixelFormat.allCases)
    func planesRoundChromaUp(format: PixelFormat) {
        let planes = format.planes(width: 5, height: 3).map { [$0.rowBytes, $0.rows] }
        #expect(planes == Self.planesOf5x3[format], "\(format)")
    }

    @Test(arguments: PixelFormat.allCases)
    func samplesAndTheirPlanarEquivalent(format: PixelFormat) {
        #expect(format.bytesPerSample == (format.bitDepth > 8 ? 2 : 1))
        #expect([8, 10, 12].contains(format.bitDepth))
        let equivalent = format.planarEquivalent
        #expect(!equivalent.isSemiPlanar)
        #expect(equivalent.bitDepth == format.bitDepth)
        // The planar equivalent carries the same samples: as many bytes once the interleaved chroma is split.
        let bytes = { (f: PixelFormat) in f.planes(width: 33, height: 17).reduce(0) { $0 + $1.rowBytes * $1.rows } }
        #expect(bytes(equivalent) == bytes(format))
        #expect(format.isSemiPlanar == (equivalent != format))
    }

    /// Rows start 64-byte aligned, planes follow one another, and `byteCount` ends at the last plane.
    @Test(arguments: PixelFormat.allCases, [(1, 1), (5, 3), (64, 2), (1920, 1080), (4096, 2160)])
    func layoutsAlignRowsAndPackPlanes(format: PixelFormat, size: (Int, Int)) {
        let layout = FrameLayout(format: format, width: size.0, height: size.1)
        var offset = 0
        for (plane, expected) in zip(layout.planes, format.planes(width: size.0, height: size.1)) {
            #expect(plane.offset == offset && plane.offset % FrameLayout.rowAlignment == 0)
            #expect(plane.stride % FrameLayout.rowAlignment == 0 && plane.stride >= plane.rowBytes && plane.stride - plane.rowBytes < 64)
            #expect(plane.rowBytes == expected.rowBytes && plane.rows == expected.rows)
            offset += plane.stride * plane.rows
        }
        #expect(layout.byteCount == offset)
        // The default slot holds any 8-bit format, and 4:2:0 or grey up to 16 bits, at the configured maximum size
        // (4:2:2 and 4:4:4 beyond 8 bits grow the ring when they come).
        if format.bitDepth == 8 || [.p010, .yuv420p10, .yuv420p12, .gray10].contains(format) {
            #expect(layout.byteCount <= FrameLayout.defaultCapacity(maxWidth: size.0, maxHeight: size.1), "\(format) \(size)")
        }
    }

    @Test func namesAreFFmpegs() {
        #expect(PixelFormat.allCases.map(\.description) == [
            "yuv420p", "nv12", "p010", "yuv422p", "yuv444p", "gray", "yuv420p10le", "yuv422p10le", "yuv444p10le",
            "gray10le", "yuv420p12le", "yuv422p12le", "yuv444p12le", "gbrp", "gbrp10le",
        ])
    }
}
