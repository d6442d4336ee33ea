import Bitstream
import Decoding
import FrameFormats
import SharedFrames

/// Decoded frames into the ring. The ring writer's one owner: the slot geometry, the frame's metadata, the seqlock
/// publication, and the gap a lost frame leaves (the next one published carries the discontinuity flag); what
/// else goes into the ring's header (counters, state, codec, source status) passes through here too. Owned by the
/// decode session, on the decode thread.
final class FramePublisher {
    /// Why a frame was not published.
    enum Refusal: Error, Equatable {
        /// A pixel format the ring cannot carry.
        case pixelFormat(String)
        /// Two slots of this format exceed ring_size_limit.
        case slotCapacity(PixelFormat, needed: Int, limit: Int)
        /// The shared-memory object is gone and could not be re-created.
        case ringUnavailable
        /// Its pixels could not be written (a failed GPU download).
        case writeFailed(String)
        /// The larger ring it needs is still being made.
        case awaitingRing

        var dropReason: StreamMetrics.DropReason {
            switch self {
            case .pixelFormat: .pixelFormat
            case .slotCapacity: .slotCapacity
            case .ringUnavailable: .ringUnavailable
            case .writeFailed: .writeFailed
            case .awaitingRing: .awaitingRing
            }
        }
    }

    private let writer: FrameRingWriter
    let output: DecoderConfiguration.OutputMode
    /// The next frame published (or held) follows a gap: a frame not published, a new sender, a decoder reset.
    private(set) var discontinuity = true
    /// The layout of the last frame published (it owns an array: rebuilt only when the format changes).
    private var lastLayout: FrameLayout?
    /// Frames waiting for the larger ring they need.
    private let held: HeldFrames
    /// Where the frames of pictures decoded in parts lie in their coded pictures, learned from the last one.
    private var placement: BandPlacement?
    /// The frame whose rows are going into its slot while its picture is decoded.
    private var early: EarlyFrame?

    /// A frame being written into its slot as its picture is decoded: the slot, and how many rows of each of the
    /// frame's planes are there.
    private struct EarlyFrame {
        var slot: EarlySlot
        var rows: [Int]
    }

    init(writer: FrameRingWriter, output: DecoderConfiguration.OutputMode) {
        self.writer = writer
        self.output = output
        held = HeldFrames(countLimit: writer.configuration.slotCount - 1)
    }

    func markDiscontinuity() { discontinuity = true }

    // MARK: - The ring's header

    func count(_ counter: WritableKeyPath<RingCounters, UInt64>, _ amount: UInt64 = 1) { writer.count(counter, amount) }
    func setState(_ state: StreamState) { writer.setState(state) }
    func setCodec(_ codec: String) { writer.setCodec(codec) }
    /// Where the source stands (rtsp://, whip), for `streamrecvctl status`.
    func setSourceStatus(_ text: String) { writer.setSourceStatus(text) }
    /// The clock of the pts the frames carry (90 kHz for RTP and MPEG-TS).
    func setPTSClockRate(_ rate: UInt32) { writer.setPTSClockRate(rate) }

    /// The stream ends: the ring is marked stopped and let go (its name removed when the stream is). Frames still
    /// held for a ring that never came are let go with it.
    func close(removingName: Bool, report: (Outcome) -> Void) {
        if !held.isEmpty { publishHeld(report: report) }
        while !held.isEmpty { held.removeFirst { report(.dropped(.awaitingRing, width: $0.layout.width, height: $0.layout.height)) } }
        writer.close(removingName: removingName)
    }

    /// The ring's name is checked once a second: someone may remove or shrink it.
    func checkRing(now: UInt64) { writer.checkName(now: now) }

    /// A new SPS says how large the frames will be: the ring is sized for them while the rest of the access unit
    /// is still arriving, rather than when its frame is published. Formats over the limits are left alone.
    func prepare(for format: SequenceFormat, maxWidth: Int, maxHeight: Int) {
        guard format.codedWidth <= maxWidth + 64, format.codedHeight <= maxHeight + 64 else { return }
        let planar: PixelFormat
        switch (format.chromaFormat, format.bitDepthLuma > 8) {
        case (.monochrome, false): planar = .gray8
        case (.monochrome, true): planar = .gray10
        case (.yuv420, false): planar = output == .auto ? .nv12 : .yuv420p
        case (.yuv420, true): planar = output == .auto ? .p010 : .yuv420p10
        case (.yuv422, false): planar = .yuv422p
        case (.yuv422, true): planar = .yuv422p10
        case (.yuv444, false): planar = .yuv444p
        case (.yuv444, true): planar = .yuv444p10
        }
        writer.prepare(for: FrameLayout(format: planar, width: format.codedWidth, height: format.codedHeight))
    }

    /// What became of a frame (or of one held earlier).
    enum Outcome {
        /// In the ring; `late`: it was held while its ring was made; `writtenWhileDecoded`: most of its rows went
        /// into the slot while its picture was being decoded.
        case published(FrameLayout, FrameMetadata, late: Bool, writtenWhileDecoded: Bool = false)
        /// Kept until its larger ring is made (`HeldFrames`).
        case held(FrameLayout, count: Int)
        case dropped(Refusal, width: Int, height: Int)
    }

    // MARK: - Rows written while the picture is decoded

    /// A picture begins to be decoded in parts: rows written for one that never came out are not its.
    func pictureBegins() {
        guard let planes = early?.rows.indices else { return }
        for plane in planes { early!.rows[plane] = 0 }
    }

    /// Writes the rows of the picture being decoded that became final since the last call (`bands`) into the slot
    /// its frame will have, opening the slot at the first: after the picture's last slice only the rest is left to
    /// copy. Nothing before a frame of this geometry has shown where its pictures' frames lie (`placement`).
    func writeFinalRows(_ bands: PictureBands) {
        guard let placement, placement.fits(bands) else { return }
        let planes = placement.layout.planes.indices
        if early?.slot.layout != placement.layout {
            guard planes.contains(where: { placement.finalRows(ofPlane: $0, in: bands) > 0 }),
                  let slot = writer.beginFrame(layout: placement.layout) else { return }
            early = EarlyFrame(slot: slot, rows: Array(repeating: 0, count: planes.count))
        }
        guard let slot = early?.slot,
              planes.contains(where: { placement.finalRows(ofPlane: $0, in: bands) > early!.rows[$0] }) else { return }
        // Read and updated in place: after every slice, nothing here allocates.
        let written = writer.writeEarly(slot) { destination in
            placement.copyRows(from: bands, into: destination) { plane in
                early!.rows[plane]..<max(early!.rows[plane], placement.finalRows(ofPlane: plane, in: bands))
            }
        }
        guard written else {
            early = nil
            return
        }
        for plane in planes { early!.rows[plane] = max(early!.rows[plane], placement.finalRows(ofPlane: plane, in: bands)) }
    }

    /// No frame is coming for rows written early (the input ended): an open slot is closed holding no frame, whether
    /// or not this publisher still remembers its frame (a frame published since may have been held or refused).
    func abandonEarlyFrame() {
        early = nil
        writer.abandonFrame()
    }

    /// Writes `frame` into the next slot with `metadata` (its flags gain the discontinuity flag after a gap), after
    /// the frames held before it; kept in order while its larger ring is being made. Never a frame with pixels that
    /// are not its own: on any refusal nothing is published and the next frame marks the gap.
    ///
    /// `bands`: the picture being decoded in parts, for a frame that came out clean (no error logged since its
    /// first part, not marked corrupt): if the frame is that picture, lying where `placement` says, the rows
    /// written while it was decoded stand and only the rest is copied. Anything else is copied whole.
    func publish(_ frame: DecodedFrame, metadata: FrameMetadata, bands: PictureBands? = nil, report: (Outcome) -> Void) {
        guard let format = frame.outputFormat(output) else {
            discontinuity = true
            return report(.dropped(.pixelFormat(frame.decoderPixelFormatName), width: frame.width, height: frame.height))
        }
        if lastLayout.map({ $0.format != format || $0.width != frame.width || $0.height != frame.height }) ?? true {
            lastLayout = FrameLayout(format: format, width: frame.width, height: frame.height)
        }
        let layout = lastLayout!
        var continuing: EarlyFrame?
        if let early, let bands, let placement, placement.layout == layout, placement.holds(frame, of: bands) { continuing = early }
        early = nil
        // Learned from a frame that does not lie where the last one did (the first of a geometry).
        if let bands, continuing == nil, placement?.holds(frame, of: bands) != true {
            placement = BandPlacement(frame: frame, bands: bands, layout: layout) ?? placement
        }
        if !held.isEmpty { publishHeld(report: report) }
        guard held.isEmpty else { return hold(frame, layout: layout, metadata: metadata, report: report) }
        var metadata = metadata
        if discontinuity { metadata.flags.insert(.discontinuity) }
        var failure: DecoderError?
        var continued = false
        let outcome = writer.publishChecked(layout: layout, metadata: metadata, continuing: continuing?.slot) { destination, layout, rowsThere in
            continued = rowsThere && continuing != nil
            guard continued, let rows = continuing?.rows else { return Self.write(frame, into: destination, layout: layout, failure: &failure) }
            frame.writeRows(into: destination, layout: layout, from: rows)
            return true
        }
        if case .awaitingRing = outcome { return hold(frame, layout: layout, metadata: metadata, report: report) }
        report(settle(outcome, layout: layout, metadata: metadata, late: false, failure: failure, writtenWhileDecoded: continued))
    }

    /// Whether frames wait for their ring (the decode thread then looks for it every few milliseconds).
    var holdsFrames: Bool { !held.isEmpty }

    /// Publishes the frames held, in order, as far as their ring is there; all are let go if it cannot be made.
    func publishHeld(report: (Outcome) -> Void) {
        while let frame = held.first {
            let outcome = writer.publishChecked(layout: frame.layout, metadata: frame.metadata) { destination, layout in
                destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: frame.pixels[..<layout.byteCount]))
                return true
            }
            if case .awaitingRing = outcome { return }
            held.removeFirst()
            let settled = settle(outcome, layout: frame.layout, metadata: frame.metadata, late: true, failure: nil)
            report(settled)
            if case .dropped(let refusal, _, _) = settled {
                while !held.isEmpty { held.removeFirst { report(.dropped(refusal, width: $0.layout.width, height: $0.layout.height)) } }
            }
        }
    }

    /// Keeps `frame` until its ring is made, letting the oldest kept go when there is no room.
    private func hold(_ frame: DecodedFrame, layout: FrameLayout, metadata: FrameMetadata, report: (Outcome) -> Void) {
        guard held.canEverHold(layout.byteCount) else {
            discontinuity = true
            return report(.dropped(.awaitingRing, width: layout.width, height: layout.height))
        }
        while !held.hasRoom(for: layout.byteCount) {
            held.removeFirst { report(.dropped(.awaitingRing, width: $0.layout.width, height: $0.layout.height)) }
            held.markFirstDiscontinuous()
            if held.isEmpty { discontinuity = true }
        }
        var metadata = metadata
        if discontinuity { metadata.flags.insert(.discontinuity) }
        var failure: DecoderError?
        let kept = held.append(layout: layout, metadata: metadata) { Self.write(frame, into: $0, layout: layout, failure: &failure) }
        guard kept else {
            discontinuity = true
            return report(.dropped(.writeFailed(failure.map { "\($0)" } ?? "unknown"), width: layout.width, height: layout.height))
        }
        discontinuity = false
        report(.held(layout, count: held.count))
    }

    /// `frame`'s pixels into `destination` (a slot, or memory it is held in); false, with why, when they could not be
    /// written (a failed GPU download).
    private static func write(_ frame: DecodedFrame, into destination: UnsafeMutableRawBufferPointer, layout: FrameLayout,
                              failure: inout DecoderError?) -> Bool {
        do throws(DecoderError) {
            try frame.write(into: destination, layout: layout)
            return true
        } catch {
            failure = error
            return false
        }
    }

    /// A publication's outcome as the session sees it (the discontinuity flag is owed after any refusal).
    private func settle(_ outcome: PublishOutcome, layout: FrameLayout, metadata: FrameMetadata, late: Bool,
                        failure: DecoderError?, writtenWhileDecoded: Bool = false) -> Outcome {
        let refusal: Refusal
        switch outcome {
        case .published:
            if !late { discontinuity = false }
            return .published(layout, metadata, late: late, writtenWhileDecoded: writtenWhileDecoded)
        case .refused(let needed, let limit): refusal = .slotCapacity(layout.format, needed: needed, limit: limit)
        case .unavailable: refusal = .ringUnavailable
        case .unfilled: refusal = .writeFailed(failure.map { "\($0)" } ?? "unknown")
        case .awaitingRing: refusal = .awaitingRing
        }
        discontinuity = true
        return .dropped(refusal, width: layout.width, height: layout.height)
    }

    /// The metadata a frame carries: timing, orientation, colour, and the visible rectangle (libavcodec applied
    /// the cropping except an unaligned left/top part: that remainder is the offset).
    static func metadata(of frame: DecodedFrame, pending: PendingFrame?, flags: FrameFlags, decodedAt: UInt64) -> FrameMetadata {
        var metadata = FrameMetadata()
        var flags = flags
        if let orientation = pending?.orientation {
            if orientation.horizontalFlip { flags.insert(.horizontalFlip) }
            if orientation.verticalFlip { flags.insert(.verticalFlip) }
            metadata.rotation = Int32(orientation.anticlockwiseRotation)
        }
        metadata.flags = flags
        metadata.pts = pending?.mediaTimestamp ?? frame.pts
        metadata.timeFirstByte = pending?.timeFirstByte ?? 0
        metadata.timeAccessUnitComplete = pending?.timeComplete ?? 0
        metadata.timeDecoded = decodedAt
        let sar = frame.sampleAspectRatio
        metadata.sampleAspectRatio = (sar.0, sar.1)
        metadata.colorRange = frame.colorRange
        metadata.colorPrimaries = frame.colorPrimaries
        metadata.colorTransfer = frame.colorTransfer
        metadata.colorMatrix = frame.colorMatrix
        if let format = pending?.format, format.width <= frame.width, format.height <= frame.height {
            metadata.visible = (UInt32(frame.width - format.width), UInt32(frame.height - format.height),
                                UInt32(format.width), UInt32(format.height))
        }
        return metadata
    }
}
