import Bitstream
import CFFmpeg
@testable import Decoding
import Foundation
import FrameFormats
import StreamrecvTestSupport
import Testing

/// The rows libavcodec reports final while it decodes (`PictureBands`), where a frame lies in its coded picture
/// (`BandPlacement`), and the tracker behind them (CFFmpeg's `streamrecv_draw_horiz_band`).
@Suite struct PictureBandsTests {
    /// Layouts with every kind of crop and chroma: 4:2:0 cropped right and bottom, to NV12 and planar; 4:2:2 and
    /// 4:4:4; 10-bit 4:2:0 to P010.
    static let layouts: [(size: String, pixelFormat: String, output: DecoderConfiguration.OutputMode)] = [
        ("150x90", "yuv420p", .auto), ("150x90", "yuv420p", .native), ("96x64", "yuv422p", .auto),
        ("80x48", "yuv444p", .auto), ("120x70", "yuv420p10le", .auto), ("64x48", "yuv422p10le", .native),
    ]

    /// Each picture written as the daemon does it — the rows final when its first half was decoded copied out of
    /// the picture, the rest from the frame once out — equals the frame written whole, for every layout.
    @Test(arguments: layouts)
    func rowsWrittenInTwoGoesEqualTheFrameWrittenWhole(size: String, pixelFormat: String, output: DecoderConfiguration.OutputMode) throws {
        let stream = try encode("h264", size: size, frames: 6, parameters: "bframes=0:keyint=3:slices=4", pixelFormat: pixelFormat)
        let inputs = decoderInputs(stream)
        let decoder = try VideoDecoderTests.decoder(for: inputs[0])
        #expect(decoder.tracksBands)
        var placement: BandPlacement?
        var checked = 0
        for input in inputs {
            decoder.armBands()
            #expect(decoder.bands == nil, "no band before the picture is decoded")
            #expect(input.data.withUnsafeBytes { decoder.send($0, pts: input.pts) } == .accepted)
            while decoder.receive({ frame in
                guard let bands = decoder.bands, let format = frame.outputFormat(output) else {
                    Issue.record("no bands for a picture decoded clean")
                    return
                }
                let layout = FrameLayout(format: format, width: frame.width, height: frame.height)
                guard let learned = BandPlacement(frame: frame, bands: bands, layout: layout) else {
                    Issue.record("the frame does not lie in its picture")
                    return
                }
                if let placement {
                    #expect(placement == learned, "one geometry, one placement")
                    #expect(placement.holds(frame, of: bands))
                }
                placement = learned
                let final = layout.planes.indices.map { learned.finalRows(ofPlane: $0, in: bands) }
                #expect(final == layout.planes.map(\.rows), "a whole picture decoded: every row final")
                // As if only the top half were final when the picture was half decoded.
                let half = final.map { $0 / 2 }
                var early = [UInt8](repeating: 0xEE, count: layout.byteCount)
                early.withUnsafeMutableBytes { destination in
                    learned.copyRows(from: bands, into: destination) { 0..<half[$0] }
                    frame.writeRows(into: destination, layout: layout, from: half)
                }
                var whole = [UInt8](repeating: 0xEE, count: layout.byteCount)
                whole.withUnsafeMutableBytes { try! frame.write(into: $0, layout: layout) }
                // Samples only: the padding after a row is nobody's (a row copied with the block before it brings the
                // decoder's padding along, one copied alone does not).
                let ours = PlanarConversion.planar(early, layout: layout), reference = PlanarConversion.planar(whole, layout: layout)
                #expect(ours == reference, "\(size) \(pixelFormat) \(output): first difference at \(zip(ours, reference).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? -1)")
                checked += 1
            }) == .frame {}
        }
        #expect(checked == inputs.count)
    }

    /// Only a decoder without threads, in software, tracks bands: slice threads deblock slice edges after the rows
    /// were reported, frame threads report from their own threads.
    @Test func onlyADecoderWithoutThreadsTracksBands() throws {
        let inputs = decoderInputs(try encode("h264", size: "64x48", frames: 1))
        #expect(try VideoDecoderTests.decoder(for: inputs[0]).tracksBands)
        let sliced = try VideoDecoderTests.decoder(for: inputs[0], configuration: DecoderConfiguration(threading: .slice, threads: 2, hardware: .none))
        #expect(!sliced.tracksBands)
        let framed = try VideoDecoderTests.decoder(for: inputs[0], configuration: DecoderConfiguration(threading: .frame, threads: 2, hardware: .none))
        #expect(!framed.tracksBands)
        let h265 = decoderInputs(try encode("h265", size: "64x48", frames: 1))
        #expect(try !VideoDecoderTests.decoder(for: h265[0]).tracksBands, "libavcodec's H.265 decoder reports no bands")
    }

    /// A picture's bands count only from its top down without a gap, all of one frame picture; a slice decoded over
    /// reported rows (`distrustBands`) ends them too.
    @Test func bandsOutOfOrderOrOfAnotherPictureAreUnusable() {
        let context = avcodec_alloc_context3(nil)!
        defer { var freed: UnsafeMutablePointer<AVCodecContext>? = context; avcodec_free_context(&freed) }
        let owner = UnsafeMutablePointer<streamrecv_decoder_owner>.allocate(capacity: 1)
        defer { owner.deallocate() }
        owner.initialize(to: streamrecv_decoder_owner())
        context.pointee.opaque = UnsafeMutableRawPointer(owner)
        let first = av_frame_alloc()!, second = av_frame_alloc()!
        defer { var a: UnsafeMutablePointer<AVFrame>? = first, b: UnsafeMutablePointer<AVFrame>? = second; av_frame_free(&a); av_frame_free(&b) }
        let pixels = UnsafeMutablePointer<UInt8>.allocate(capacity: 64)
        defer { pixels.deallocate() }
        first.pointee.data.0 = pixels
        second.pointee.data.0 = pixels + 32
        var offsets = [Int32](repeating: 0, count: 8)
        func band(_ frame: UnsafeMutablePointer<AVFrame>, _ y: Int32, _ height: Int32, type: Int32 = 3) {
            streamrecv_draw_horiz_band(context, frame, &offsets, y, type, height)
        }
        func arm() { owner.pointee.bands = streamrecv_band_tracker(); owner.pointee.bands.state = STREAMRECV_BANDS_ARMED }
        band(first, 0, 12)
        #expect(owner.pointee.bands.state == STREAMRECV_BANDS_DISARMED, "nothing tracked unless armed")
        arm()
        band(first, 0, 12)
        band(first, 12, 16)
        #expect(owner.pointee.bands.state == STREAMRECV_BANDS_TRACKING && owner.pointee.bands.rows_final == 28)
        for (name, wrong) in [("a gap", { band(first, 44, 16) }), ("rows again", { band(first, 12, 16) }),
                              ("another picture", { band(second, 28, 16) }), ("a field", { band(first, 28, 16, type: 1) })] as [(String, () -> Void)] {
            arm()
            band(first, 0, 12)
            band(first, 12, 16)
            wrong()
            #expect(owner.pointee.bands.state == STREAMRECV_BANDS_UNUSABLE, "\(name)")
            #expect((owner.pointee.bands.rows_missing != 0) == (name == "a gap"), "\(name): rows skipped, or not")
            band(first, 28, 16)
            #expect(owner.pointee.bands.state == STREAMRECV_BANDS_UNUSABLE, "\(name): for the rest of the picture")
        }
        arm()
        band(first, 44, 16)
        #expect(owner.pointee.bands.state == STREAMRECV_BANDS_UNUSABLE, "a picture's first band begins at its top")
        #expect(owner.pointee.bands.rows_missing != 0, "the rows above it were never decoded")
        arm()
        #expect(owner.pointee.bands.rows_missing == 0, "arming starts afresh")
        // A slice that deblocks leaves its last 20 rows unreported; one that does not, after it, reports its
        // macroblock row at once: rows never reported, but not missing. Beyond that, they are.
        for (label, y, missing) in [("a slice without deblocking after one with", Int32(48), false), ("a row skipped", 64, true),
                                    ("a row's top, but further", 80, true)] {
            arm()
            band(first, 0, 12)
            band(first, 12, 16)
            band(first, y, 16)
            #expect(owner.pointee.bands.state == STREAMRECV_BANDS_UNUSABLE && (owner.pointee.bands.rows_missing != 0) == missing, "\(label)")
        }
        arm()
        band(first, 16, 16)
        #expect(owner.pointee.bands.state == STREAMRECV_BANDS_UNUSABLE && owner.pointee.bands.rows_missing == 0,
                "the first macroblock row of a slice that deblocks, reported by one that does not")
    }

    /// A band that ends on a macroblock row's bottom is of a slice that does not deblock: the next slice may still
    /// deblock the row's last 3 rows (and borrow the last for intra prediction), so 4 are held back, except at the
    /// picture's bottom.
    @Test func aBandEndingOnAMacroblockRowKeepsItsLastFourRowsBack() {
        var tracker = streamrecv_band_tracker()
        tracker.state = STREAMRECV_BANDS_TRACKING
        tracker.coded_width = 64
        tracker.coded_height = 96
        for (reported, final) in [(Int32(28), 28), (48, 44), (90, 90), (96, 96)] {
            tracker.rows_final = reported
            #expect(PictureBands(tracker)?.finalRows == final, "\(reported) rows reported")
        }
    }
}
