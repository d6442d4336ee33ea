/// Pixel layouts a published frame can have. Raw values are the ABI's `enum streamrecv_pixel_format`
/// (streamrecv_shm.h); a test checks they agree. Pure Swift so that Decoding, SharedFrames and the tools share it
/// without depending on each other.
public enum PixelFormat: UInt32, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case yuv420p = 1, nv12 = 2, p010 = 3, yuv422p = 4, yuv444p = 5, gray8 = 6
    case yuv420p10 = 7, yuv422p10 = 8, yuv444p10 = 9, gray10 = 10
    case yuv420p12 = 11, yuv422p12 = 12, yuv444p12 = 13, gbrp = 14, gbrp10 = 15

    public var description: String {
        switch self {
        case .yuv420p: return "yuv420p"
        case .nv12: return "nv12"
        case .p010: return "p010"
        case .yuv422p: return "yuv422p"
        case .yuv444p: return "yuv444p"
        case .gray8: return "gray"
        case .yuv420p10: return "yuv420p10le"
        case .yuv422p10: return "yuv422p10le"
        case .yuv444p10: return "yuv444p10le"
        case .gray10: return "gray10le"
        case .yuv420p12: return "yuv420p12le"
        case .yuv422p12: return "yuv422p12le"
        case .yuv444p12: return "yuv444p12le"
        case .gbrp: return "gbrp"
        case .gbrp10: return "gbrp10le"
        }
    }

    /// Significant bits per sample.
    public var bitDepth: Int {
        switch self {
        case .yuv420p, .nv12, .yuv422p, .yuv444p, .gray8, .gbrp: return 8
        case .p010, .yuv420p10, .yuv422p10, .yuv444p10, .gray10, .gbrp10: return 10
        case .yuv420p12, .yuv422p12, .yuv444p12: return 12
        }
    }

    public var bytesPerSample: Int { bitDepth > 8 ? 2 : 1 }

    /// Chroma subsampling as (log2 horizontal, log2 vertical); nil for single-plane grey.
    var chromaShift: (Int, Int)? {
        switch self {
        case .yuv420p, .nv12, .p010, .yuv420p10, .yuv420p12: return (1, 1)
        case .yuv422p, .yuv422p10, .yuv422p12: return (1, 0)
        case .yuv444p, .yuv444p10, .yuv444p12, .gbrp, .gbrp10: return (0, 0)
        case .gray8, .gray10: return nil
        }
    }

    public var isSemiPlanar: Bool { self == .nv12 || self == .p010 }

    /// The fully planar format with the same samples: what a y4m file carries.
    public var planarEquivalent: PixelFormat {
        switch self {
        case .nv12: return .yuv420p
        case .p010: return .yuv420p10
        default: return self
        }
    }

    /// Size of each plane of a `width` × `height` picture: bytes of samples per row, and rows.
    public func planes(width: Int, height: Int) -> [PlaneSize] {
        let luma = PlaneSize(rowBytes: width * bytesPerSample, rows: height)
        guard let (shiftX, shiftY) = chromaShift else { return [luma] }
        let chromaWidth = (width + (1 << shiftX) - 1) >> shiftX
        let chromaHeight = (height + (1 << shiftY) - 1) >> shiftY
        if isSemiPlanar {
            return [luma, PlaneSize(rowBytes: 2 * chromaWidth * bytesPerSample, rows: chromaHeight)]
        }
        let chroma = PlaneSize(rowBytes: chromaWidth * bytesPerSample, rows: chromaHeight)
        return [luma, chroma, chroma]
    }
}

public struct PlaneSize: Sendable, Hashable {
    public var rowBytes: Int
    public var rows: Int
    public init(rowBytes: Int, rows: Int) {
        self.rowBytes = rowBytes
        self.rows = rows
    }
}

/// Where each plane of a frame lies inside one buffer: offsets and strides, rows aligned for SIMD readers.
public struct FrameLayout: Sendable, Hashable {
    public struct Plane: Sendable, Hashable {
        public var offset: Int
        public var stride: Int
        public var rowBytes: Int
        public var rows: Int
    }

    public static let rowAlignment = 64

    public var format: PixelFormat
    public var width: Int
    public var height: Int
    public var planes: [Plane]
    /// Bytes from the first plane's start to the last plane's end.
    public var byteCount: Int

    public init(format: PixelFormat, width: Int, height: Int) {
        self.format = format
        self.width = width
        self.height = height
        var offset = 0
        var planes: [Plane] = []
        for size in format.planes(width: width, height: height) {
            let stride = (size.rowBytes + Self.rowAlignment - 1) / Self.rowAlignment * Self.rowAlignment
            planes.append(Plane(offset: offset, stride: stride, rowBytes: size.rowBytes, rows: size.rows))
            offset += stride * size.rows
        }
        self.planes = planes
        byteCount = offset
    }

    /// Bytes the largest frame of `width` × `height` needs in any 4:2:0 layout up to 16-bit samples (and 4:2:2
    /// 8-bit, 4:4:4 8-bit): the default slot size. Alignment padding included.
    public static func defaultCapacity(maxWidth: Int, maxHeight: Int) -> Int {
        let alignedWidth = (maxWidth + rowAlignment - 1) / rowAlignment * rowAlignment
        return alignedWidth * 3 * (maxHeight + 1) + rowAlignment * (maxHeight + 4)
    }
}
