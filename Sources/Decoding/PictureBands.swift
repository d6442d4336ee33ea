import CFFmpeg
import FrameFormats

/// The rows of the picture being decoded that libavcodec's H.264 decoder is done with (its `draw_horiz_band`,
/// tracked by CFFmpeg's `streamrecv_band_tracker`): deblocked, and never written again for a clean picture — the
/// rows it also tells its own frame threads they may read. Valid until the decoder is next called.
public struct PictureBands {
    /// The coded picture's planes (no cropping applied), and their strides (libavcodec's linesizes).
    let planes: SourcePlanes
    /// Luma rows [0, finalRows) of the coded picture are final.
    public let finalRows: Int
    /// Luma rows [0, reportedRows) were reported: a band of a slice that does not deblock ends at a macroblock row's
    /// bottom, whose last 3 rows the next slice's deblocking may still change (and its intra prediction borrow, for
    /// the bottom one), so the last 4 of them are not final yet.
    let reportedRows: Int
    /// The coded picture's size (the decoder's, before cropping).
    public let codedWidth: Int
    public let codedHeight: Int
    let pixelFormat: AVPixelFormat

    /// Macroblocks of 16 × 16 (H.264 frames, which parts are) some of whose rows were reported: a slice that begins
    /// before the next would be decoded over them.
    public var macroblocksReported: Int { (reportedRows + 15) / 16 * ((codedWidth + 15) / 16) }

    init?(_ tracker: streamrecv_band_tracker) {
        guard tracker.state == STREAMRECV_BANDS_TRACKING else { return nil }
        // Read into fixed storage: asked after every slice, nothing here allocates.
        planes = SourcePlanes(tracker)
        reportedRows = Int(tracker.rows_final)
        codedWidth = Int(tracker.coded_width)
        codedHeight = Int(tracker.coded_height)
        // A slice that deblocks reports rows 20 short of its last macroblock row; ending on a row's bottom, the band
        // is of one that does not, and the picture's next slice may.
        finalRows = reportedRows % 16 == 0 && reportedRows < codedHeight ? reportedRows - 4 : reportedRows
        pixelFormat = AVPixelFormat(rawValue: tracker.format)
    }

    /// Rows of each plane of the coded picture.
    fileprivate var planeRows: [Int]? {
        guard let descriptor = av_pix_fmt_desc_get(pixelFormat) else { return nil }
        let count = Int(av_pix_fmt_count_planes(pixelFormat))
        guard count >= 1, count <= 4 else { return nil }
        let shift = Int(descriptor.pointee.log2_chroma_h)
        return (0..<count).map { plane in
            // Chroma planes of YUV are subsampled; planar RGB (GBR) and grey are not (their shift is 0).
            let planeShift = plane == 0 || plane == 3 ? 0 : shift
            return (codedHeight + (1 << planeShift) - 1) >> planeShift
        }
    }
}

/// Where a picture's output frame lies inside its coded picture — the cropping libavcodec applied, as byte offsets
/// of each plane — learned from one frame and used for the next pictures of the same coded geometry, so that their
/// rows can be copied into a slot while the rest of the picture is still being decoded. Every use is checked: a
/// frame that does not lie where the placement says is copied whole.
public struct BandPlacement: Equatable {
    /// The frame as published.
    public let layout: FrameLayout
    let sourceFormat: PixelFormat
    let linesizes: [Int]
    let codedWidth: Int
    let codedHeight: Int
    let pixelFormat: Int32
    /// Bytes from each coded plane's start to the frame's plane.
    let offsets: [Int]
    /// log2 of the chroma planes' vertical subsampling.
    let verticalShift: Int

    /// `frame` (published as `layout`) placed in the picture `bands` describe; nil when the frame is not that
    /// picture's (each of its planes must lie inside the coded plane of the same number: two pictures alive at
    /// once never share memory) or cannot be copied in bands (a GPU frame, another format).
    public init?(frame: DecodedFrame, bands: PictureBands, layout: FrameLayout) {
        guard !frame.isHardware, let source = frame.decoderPixelFormat, frame.width == layout.width, frame.height == layout.height,
              let codedRows = bands.planeRows, codedRows.count == (layout.format.isSemiPlanar ? 3 : layout.planes.count)
        else { return nil }
        let planes = frame.planes
        var offsets: [Int] = []
        for (index, rows) in codedRows.enumerated() {
            guard let start = bands.planes.pointers[index], let pointer = planes.pointers[index],
                  planes.strides[index] == bands.planes.strides[index], bands.planes.strides[index] > 0 else { return nil }
            let offset = pointer - start
            guard offset >= 0, offset < bands.planes.strides[index] * rows else { return nil }
            offsets.append(offset)
        }
        self.layout = layout
        sourceFormat = source
        linesizes = codedRows.indices.map { bands.planes.strides[$0] }
        verticalShift = Int(av_pix_fmt_desc_get(bands.pixelFormat)?.pointee.log2_chroma_h ?? 0)
        codedWidth = bands.codedWidth
        codedHeight = bands.codedHeight
        pixelFormat = bands.pixelFormat.rawValue
        self.offsets = offsets
        // Every row of the frame lies inside its coded plane, and a semi-planar chroma row takes its two source
        // rows from the same coded row.
        for index in offsets.indices {
            let layoutPlane = layout.format.isSemiPlanar ? min(index, 1) : index
            guard top(ofSourcePlane: index) + layout.planes[layoutPlane].rows <= codedRows[index] else { return nil }
        }
        if layout.format.isSemiPlanar && top(ofSourcePlane: 1) != top(ofSourcePlane: 2) { return nil }
    }

    /// The coded row of source plane `index` that is the frame's first.
    private func top(ofSourcePlane index: Int) -> Int { offsets[index] / linesizes[index] }


    /// Whether `bands` are of a picture this placement fits: same coded geometry and format.
    public func fits(_ bands: PictureBands) -> Bool {
        guard bands.codedWidth == codedWidth, bands.codedHeight == codedHeight, bands.pixelFormat.rawValue == pixelFormat
        else { return false }
        return linesizes.indices.allSatisfy { bands.planes.strides[$0] == linesizes[$0] }
    }

    /// Whether `frame` is the picture `bands` describe, lying where this placement says.
    public func holds(_ frame: DecodedFrame, of bands: PictureBands) -> Bool {
        guard fits(bands), !frame.isHardware, frame.decoderPixelFormat == sourceFormat,
              frame.width == layout.width, frame.height == layout.height else { return false }
        let planes = frame.planes
        for index in offsets.indices {
            guard let start = bands.planes.pointers[index], let pointer = planes.pointers[index],
                  planes.strides[index] == linesizes[index], pointer - start == offsets[index] else { return false }
        }
        return true
    }

    /// How many rows of layout plane `index` are final in `bands` (which this placement must fit).
    public func finalRows(ofPlane index: Int, in bands: PictureBands) -> Int {
        // Layout plane 1 of NV12/P010 takes source planes 1 and 2, which share their subsampling and crop.
        let planeShift = index == 0 || index == 3 ? 0 : verticalShift
        return min(layout.planes[index].rows, max(0, (bands.finalRows >> planeShift) - top(ofSourcePlane: index)))
    }

    /// Copies rows `rows(plane)` of each layout plane out of the picture `bands` describe into `destination`.
    public func copyRows(from bands: PictureBands, into destination: UnsafeMutableRawBufferPointer, rows: (Int) -> Range<Int>) {
        precondition(fits(bands) && destination.count >= layout.byteCount)
        PlaneCopier.copy(from: bands.planes.advanced(by: offsets), format: sourceFormat, into: destination, layout: layout, rows: rows)
    }
}
