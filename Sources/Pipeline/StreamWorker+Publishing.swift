import Bitstream
import Decoding
import FrameFormats
import Foundation
import Logging
import SharedFrames

/// Access units to the decoder, frames to the ring, and what the decoder says about itself, on the decode thread.
extension StreamWorker {
    func handle(_ event: AssemblerEvent) {
        let now = MonotonicClock.nanoseconds()
        switch event {
        case .codecDetected(let codec):
            writer.setCodec(codec.rawValue)
            snapshot.withLockedValue { $0.codec = codec.rawValue }
            log.log(.info, key: "codec-\(codec.rawValue)", now: now, "codec detected: \(codec.rawValue)")
        case .parameterSet(let set):
            describe(set, now: now)
            prepareRing(for: set.format)
        case .problem(let problem):
            // An oversized access unit is dropped whole: the decoder will see its picture's next part no more.
            if problem.kind == .oversizedAccessUnit { picturePart = nil }
            metrics.defect(problem.kind.rawValue)
            log.log(.warning, key: "problem-\(problem.kind.rawValue)", now: now, "stream defect: \(problem)")
        case .accessUnit(let unit):
            decode(unit)
        }
    }

    /// A stream that changes its parameter sets at every frame must not write two lines per frame: one line per
    /// kind per 10 s, saying how many more there were.
    private func describe(_ set: ParameterSetEvent, now: UInt64) {
        guard set.kind != .pps else { return }
        var text = "\(set.kind.rawValue.uppercased()) \(set.changes == nil ? "received" : "changed") (\(set.codec.rawValue), id \(set.id)"
        if let format = set.format {
            text += ", \(format.width)x\(format.height), chroma \(format.chromaFormat), \(format.bitDepthLuma)-bit"
            text += ", \(format.frameRate?.description ?? "?") fps, reorder \(format.reorderDepth.map(String.init) ?? "?")"
        }
        if let changes = set.changes { text += ", changed: \(changes.isEmpty ? "content" : changes.description)" }
        log.log(.info, key: "parameter-set-\(set.kind.rawValue)", now: now, text + ")")
    }

    /// A new SPS says how large the frames will be: size the ring for them now, while the rest of the access unit
    /// is still arriving, rather than when its frame is published.
    private func prepareRing(for format: SequenceFormat?) {
        guard let format, format.codedWidth <= configuration.maxWidth + 64, format.codedHeight <= configuration.maxHeight + 64 else { return }
        let planar: PixelFormat
        switch (format.chromaFormat, format.bitDepthLuma > 8) {
        case (.monochrome, false): planar = .gray8
        case (.monochrome, true): planar = .gray10
        case (.yuv420, false): planar = configuration.decoder.output == .auto ? .nv12 : .yuv420p
        case (.yuv420, true): planar = configuration.decoder.output == .auto ? .p010 : .yuv420p10
        case (.yuv422, false): planar = .yuv422p
        case (.yuv422, true): planar = .yuv422p10
        case (.yuv444, false): planar = .yuv444p
        case (.yuv444, true): planar = .yuv444p10
        }
        writer.prepare(for: FrameLayout(format: planar, width: format.codedWidth, height: format.codedHeight))
    }

    // MARK: - Decoding and publishing

    func decode(_ unit: AccessUnit) {
        if finishDecodingInParts(unit) { return }
        let now = MonotonicClock.nanoseconds()
        countAccessUnit()
        if let format = unit.format, format.width > configuration.maxWidth || format.height > configuration.maxHeight {
            drop(.tooLarge)
            log.log(.warning, key: "too-large", now: now,
                    "frame of \(format.width)x\(format.height) refused: larger than max_width × max_height (\(configuration.maxWidth)x\(configuration.maxHeight))")
            return
        }
        if let change = unit.displayOrientation { orientation = change }
        // No picture (the delimiter a sender writes after its last frame, parameter sets before a disconnect):
        // nothing to decode, and libavcodec's H.264 decoder calls such a packet an error ("no frame!"). An end of
        // sequence still goes: it changes how the next random-access picture is decoded.
        guard unit.hasPicture || unit.nalUnitTypes.contains(where: { Self.endsSequence($0, unit.codec) }) else { return }
        let damaged = loss.isDamaged(unit)
        if !loss.damaged { lastKeyframeRequest = nil }
        let pts = nextPTS
        nextPTS += 1
        let carrier = arrival(ofOffset: unit.streamOffset)
        pending[pts] = PendingFrame(
            timeFirstByte: carrier.time, timeComplete: now, keyframe: unit.isKeyframe, orientation: orientation,
            format: unit.format, afterLoss: damaged, mediaTimestamp: carrier.mediaTimestamp)
        if pending.count > 512 {
            // Access units that produced no frame (undecodable, dropped by the decoder) leave stale entries.
            for key in pending.keys where key < pts - 256 { pending.removeValue(forKey: key) }
        }
        decoder.decode(DecoderInput(unit, data: unit.data, pts: pts)) { publish($0) }
    }

    /// One access unit, in the ring's counters and the metrics alike.
    func countAccessUnit() {
        writer.count(\.accessUnits)
        metrics.accessUnits.increment()
    }

    private static func endsSequence(_ type: UInt8, _ codec: VideoCodec) -> Bool {
        switch codec {
        case .h264: H264NALUnitType(rawValue: type).role == .endsAccessUnit
        case .h265: H265NALUnitType(rawValue: type).role == .endsAccessUnit
        }
    }

    func publish(_ frame: DecodedFrame) {
        let decodedAt = MonotonicClock.nanoseconds()
        writer.count(\.framesDecoded)
        metrics.framesDecoded.increment()
        guard let format = frame.outputFormat(configuration.decoder.output) else {
            drop(.pixelFormat)
            log.log(.error, key: "pixel-format", now: decodedAt,
                    "frame in pixel format \(frame.decoderPixelFormatName) cannot be published; dropped")
            return
        }
        let meta = pending.removeValue(forKey: frame.pts)
        if meta?.afterLoss == true && configuration.lossPolicy == .keyframe {
            drop(.withheld)
            log.log(.warning, key: "withheld", now: decodedAt, "frame after lost data withheld until the next keyframe (loss_policy = keyframe)")
            return
        }
        var metadata = FrameMetadata()
        var flags: FrameFlags = []
        if meta?.afterLoss == true { flags.insert(.corrupt) }
        if meta?.keyframe ?? frame.isKeyframe { flags.insert(.keyframe) }
        // Decoded in parts, with concealment off, a damaged slice shows only in libavcodec's log.
        let damagedInParts = meta?.errorsBeforeParts.map { decoder.loggedErrors > $0 } ?? false
        if frame.isCorrupt || damagedInParts {
            flags.insert(.corrupt)
            // libavcodec found an error: FFmpeg's concealment, on whole access units, until the next keyframe.
            partsSuspended = true
            // Decoded in parts, the damage was not concealed as FFmpeg conceals it, so every picture that refers to
            // this one differs from FFmpeg's too: flagged, as after a loss, until a keyframe heals the stream.
            if meta?.errorsBeforeParts != nil { noteLoss(at: splitter.statistics.bytesIn) }
        }
        if discontinuity { flags.insert(.discontinuity) }
        if let orientation = meta?.orientation {
            if orientation.horizontalFlip { flags.insert(.horizontalFlip) }
            if orientation.verticalFlip { flags.insert(.verticalFlip) }
            metadata.rotation = Int32(orientation.anticlockwiseRotation)
        }
        metadata.flags = flags
        metadata.pts = meta?.mediaTimestamp ?? frame.pts
        metadata.timeFirstByte = meta?.timeFirstByte ?? 0
        metadata.timeAccessUnitComplete = meta?.timeComplete ?? 0
        metadata.timeDecoded = decodedAt
        let sar = frame.sampleAspectRatio
        metadata.sampleAspectRatio = (sar.0, sar.1)
        metadata.colorRange = frame.colorRange
        metadata.colorPrimaries = frame.colorPrimaries
        metadata.colorTransfer = frame.colorTransfer
        metadata.colorMatrix = frame.colorMatrix
        if let format = meta?.format, format.width <= frame.width, format.height <= frame.height {
            // libavcodec applied the cropping except an unaligned left/top part: that remainder is the offset.
            metadata.visible = (UInt32(frame.width - format.width), UInt32(frame.height - format.height),
                                UInt32(format.width), UInt32(format.height))
        }
        if lastLayout.map({ $0.format != format || $0.width != frame.width || $0.height != frame.height }) ?? true {
            lastLayout = FrameLayout(format: format, width: frame.width, height: frame.height)
        }
        let layout = lastLayout!
        var failure: DecoderError?
        let outcome = writer.publishChecked(layout: layout, metadata: metadata) { destination, layout in
            do throws(DecoderError) {
                try frame.write(into: destination, layout: layout)
                return true
            } catch {
                failure = error
                return false
            }
        }
        switch outcome {
        case .published:
            discontinuity = false
            let sizeChanged = layout.width != lastPublishedSize.width || layout.height != lastPublishedSize.height
            lastPublishedSize = (layout.width, layout.height)
            snapshot.withLockedValue {
                $0.framesPublished += 1
                if sizeChanged { $0.size = "\(frame.width)x\(frame.height)" }
            }
            countPublished(frame, flags: flags, completedAt: meta?.timeComplete)
        case .refused(let needed, let limit):
            drop(.slotCapacity)
            log.log(.error, key: "slot-capacity", now: decodedAt,
                    "\(frame.width)x\(frame.height) \(format) frames need \(needed) bytes each: 2 slots exceed ring_size_limit (\(limit) bytes); dropped")
        case .unavailable:
            drop(.ringUnavailable)
            discontinuity = true
        case .unfilled:
            // Never a frame with pixels that are not its own: dropped, and the next one marks the gap.
            drop(.writeFailed)
            discontinuity = true
            log.log(.error, key: "write", now: decodedAt, "frame could not be written: \(failure.map { "\($0)" } ?? "unknown"); dropped")
        }
    }

    func drop(_ reason: StreamMetrics.DropReason) {
        writer.count(\.framesDropped)
        metrics.dropped(reason)
    }

    private func countPublished(_ frame: DecodedFrame, flags: FrameFlags, completedAt: UInt64?) {
        let now = MonotonicClock.nanoseconds()
        metrics.framesPublished.increment()
        if flags.contains(.corrupt) { metrics.framesCorrupt.increment() }
        if let completedAt, now >= completedAt { metrics.publishLatency.recordNanoseconds(Int64(now - completedAt)) }
        metrics.width.record(frame.width)
        metrics.height.record(frame.height)
        fpsWindowFrames += 1
        if now - fpsWindowStart >= 1_000_000_000 {
            if fpsWindowStart != 0 {
                metrics.framesPerSecond.record(Double(fpsWindowFrames) * 1e9 / Double(now - fpsWindowStart))
            }
            fpsWindowStart = now
            fpsWindowFrames = 0
        }
    }

    // MARK: - Decoder events

    func note(_ event: StreamDecoderEvent) {
        let now = MonotonicClock.nanoseconds()
        switch event {
        case .pathSelected(let summary):
            log.log(.notice, key: "decoder-path", now: now, summary)
        case .created(let recreation, let hardware, let lowDelay, let threading, let nanoseconds):
            metrics.decoderCreation.recordNanoseconds(Int64(nanoseconds))
            if recreation {
                writer.count(\.decoderRecreations)
                metrics.decoderRecreations.increment()
            }
            metrics.hardware.record(hardware == nil ? 0 : 1)
            snapshot.withLockedValue { $0.path = hardware ?? "software" }
            log.log(.info, key: "decoder-created", now: now,
                    "\(recreation ? "decoder recreated for new parameter sets" : "decoder created") (path \(hardware ?? "software"), low_delay \(lowDelay), threads \(threading), creation_ms \(String(format: "%.2f", Double(nanoseconds) / 1e6)))")
            discontinuity = discontinuity || recreation
        case .creationFailed(let error, let attempt):
            log.log(.error, key: "decoder-creation", now: now,
                    "decoder creation failed (attempt \(attempt) of \(StreamDecoder.maximumCreationAttempts)): \(error)")
        case .decodeFailed(let error, let consecutive):
            partsSuspended = true
            writer.count(\.decodeErrors)
            metrics.decodeErrors.increment()
            log.log(.warning, key: "decode", now: now, "decode error (\(consecutive) in a row): \(error)")
        case .reset(let failures):
            setState(.degraded)
            discontinuity = true
            log.log(.error, key: "decoder-reset", now: now, "\(failures) consecutive decode failures: decoder reset, waiting for the next keyframe")
        case .fellBackToSoftware(let reason):
            log.log(.warning, key: "fallback", now: now, "hardware decoding failed on the first keyframe (\(reason)): falling back to software")
        case .waitingForKeyframe:
            log.log(.info, key: "waiting-keyframe", now: now, "waiting for a keyframe before decoding")
        }
        if case .created = event, connection != nil { setState(.streaming) }
    }
}
