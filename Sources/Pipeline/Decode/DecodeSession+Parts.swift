import Bitstream
import CoreMetrics
import Decoding
import SharedFrames

/// H.264 slices decoded as they arrive (shared/DESIGN.md "Latency"): each slice goes to the decoder as soon as it
/// is known complete (the next NAL unit's start code), so when the picture's last byte is in, only its last slice
/// is left to decode. libavcodec emits the frame once the picture's last macroblock row is decoded
/// (`VideoDecoder.setChunked`). Used where nothing can be lost inside a picture — tcp:// is a byte stream that
/// loses nothing, while an RTP or UDP gap can open in the middle of a picture — and while the stream is clean: a
/// damaged stream is decoded as whole access units with FFmpeg's concealment, as FFmpeg itself would. The state
/// is `PictureInParts`.
extension DecodeSession {
    /// A slice has just joined the picture in progress: the decoder gets everything of its access unit it has
    /// not had yet. The picture's first slice decides whether the picture is decoded in parts; `last` says that
    /// the next NAL unit begins the next access unit (its first bytes are in), so this slice is the picture's last.
    func decodeNewSlice(last: Bool) {
        let now = clock.now()
        guard !parts.isDecodingAPicture else {
            feedPart(now: now)
            return
        }
        // A keyframe ends a suspension, whether or not it is decoded in parts itself (IDR pictures are not).
        if parts.suspended, assembler.pictureInProgress()?.isKeyframe == true { parts.keyframeBegins() }
        // A picture of one slice is decoded whole: nothing would be gained.
        guard !last, let picture = pictureToDecodeInParts() else { return }
        if let change = picture.displayOrientation { orientation = change }
        let pts = pending.add(PendingFrame(
            timeFirstByte: arrival(ofOffset: picture.streamOffset).time, timeComplete: now, keyframe: picture.isKeyframe,
            orientation: orientation, format: picture.format, afterLoss: false, mediaTimestamp: nil,
            errorsBeforeParts: decoder.loggedErrors))
        parts.begin(pts: pts)
        publisher.pictureBegins()
        feedPart(now: now, first: picture)
    }

    /// The access unit whose picture was decoded in parts is complete. What followed its last slice (filler data,
    /// an end of sequence: nothing libavcodec decodes into pixels) is not fed: a packet after a finished picture
    /// would make libavcodec's chunk mode finish it a second time. False when `unit` was not decoded in parts.
    func finishDecodingInParts(_ unit: AccessUnit) -> Bool {
        guard parts.finish() else { return false }
        telemetry.count(.accessUnit)
        telemetry.metrics.picturesDecodedInParts.increment()
        return true
    }

    /// The picture in progress, if it is to be decoded in parts: a clean tcp:// stream, a picture the assembler
    /// says can be (frames, slices in raster order), beginning with its first slice, decoded in software, and not
    /// an IDR picture: an IDR picture of 8 slices decoded in parts after a GOP failed at its second part ("no
    /// frame!") and came out flagged (seen here; libavcodec 59 seems to reset its references at every packet that
    /// holds an IDR slice).
    private func pictureToDecodeInParts() -> AccessUnit? {
        guard configuration.source.transport == .tcp, !parts.suspended, assembler.pictureInProgressDecodesInParts,
              decoder.decodesInParts(.h264), let picture = assembler.pictureInProgress(), picture.beginsWithFirstSlice,
              picture.randomAccess != .idr,
              let format = picture.format, format.width <= configuration.maxWidth, format.height <= configuration.maxHeight
        else { return nil }
        // Whether the picture is damaged is known at its first slice: nothing is lost inside a TCP stream. A
        // damaged one is left to the whole-access-unit path, which asks the tracker itself.
        var tracker = loss
        guard !tracker.isDamaged(picture) else { return nil }
        loss = tracker
        return picture
    }

    /// The part of the access unit so far that the decoder has not had goes to it. `first` describes the picture
    /// for the first part (parameter sets, random access: whether to open or recreate the decoder).
    private func feedPart(now: UInt64, first picture: AccessUnit? = nil) {
        guard let part = parts.nextPart(of: assembler.bytesInProgress, slices: assembler.slicesInProgress) else { return }
        pending.completed(part.pts, at: now)
        let input = picture.map { DecoderInput($0, data: part.bytes, pts: part.pts) }
            ?? DecoderInput(codec: .h264, data: part.bytes, pts: part.pts, isRandomAccess: false, parameterSets: nil, reorderDepth: nil)
        if picture == nil { checkSliceStart(newSlices: part.newSlices) }
        decoder.decode(input, part: picture != nil ? .first : .next) { take($0) }
        // Still not out: the rows its slices so far finished go into its slot now, not after its last slice.
        if parts.current?.pts == part.pts, let bands = decoder.bands { publisher.writeFinalRows(bands) }
    }

    /// Slices come in raster order (the assembler starts a new picture otherwise), but one may still begin inside
    /// the macroblocks before it, which libavcodec would decode over: rows already reported final would change.
    /// Such a picture's rows are not trusted (its frame is copied whole once out), nor a part of several slices.
    private func checkSliceStart(newSlices: Int) {
        guard let bands = decoder.bands else { return }
        if newSlices != 1 || (assembler.firstMacroblockOfLastSlice ?? 0) < bands.macroblocksReported { decoder.distrustBands() }
    }
}

extension DecoderInput {
    /// The decoder's view of an access unit (or of the first part of its picture), carrying `data`.
    init(_ unit: AccessUnit, data: [UInt8], pts: Int64) {
        self.init(
            codec: unit.codec, data: data, pts: pts, isRandomAccess: unit.isKeyframe,
            parameterSets: unit.parameterSets, reorderDepth: unit.format?.reorderDepth,
            reorderDepthIsSignalled: unit.format?.reorderDepthIsSignalled ?? false,
            decodedPictureBufferFrames: unit.format?.decodedPictureBufferFrames ?? 16,
            undecodable: unit.hasPicture && unit.format == nil)
    }
}
