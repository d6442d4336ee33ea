import Bitstream
import CoreMetrics
import Decoding
import FrameFormats
import Logging
import SharedFrames

/// Access units to the decoder, frames to the publisher, and what the decoder says about itself, on the decode
/// thread.
extension DecodeSession {
    func handle(_ event: AssemblerEvent) {
        let now = clock.now()
        switch event {
        case .codecDetected(let codec):
            telemetry.codecDetected(codec)
            telemetry.log(.info, key: "codec-\(codec.rawValue)", now: now, "codec detected: \(codec.rawValue)")
        case .parameterSet(let set):
            describe(set, now: now)
            if let format = set.format { publisher.prepare(for: format, maxWidth: configuration.maxWidth, maxHeight: configuration.maxHeight) }
        case .problem(let problem):
            // An oversized access unit is dropped whole: the decoder will see its picture's next part no more.
            if problem.kind == .oversizedAccessUnit { parts.abandon() }
            telemetry.defect(.accessUnit(problem.kind))
            telemetry.log(.warning, key: "problem-\(problem.kind.rawValue)", now: now, "stream defect: \(problem)")
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
        telemetry.log(.info, key: "parameter-set-\(set.kind.rawValue)", now: now, text + ")")
    }

    // MARK: - Decoding

    func decode(_ unit: AccessUnit) {
        if finishDecodingInParts(unit) { return }
        let now = clock.now()
        telemetry.count(.accessUnit)
        let admission = AccessUnitAdmission(unit, maxWidth: configuration.maxWidth, maxHeight: configuration.maxHeight,
                                            lostWithin: lossInAccessUnit)
        if case .tooLarge(let width, let height) = admission {
            telemetry.dropped(.tooLarge)
            telemetry.log(.warning, key: "too-large", now: now,
                          "frame of \(width)x\(height) refused: larger than max_width × max_height (\(configuration.maxWidth)x\(configuration.maxHeight))")
            return
        }
        if let change = unit.displayOrientation { orientation = change }
        lossInAccessUnit = false
        if case .nothingToDecode(let pictureLost) = admission {
            if pictureLost {
                telemetry.dropped(.lost)
                missingReferences.lostPicture()
            }
            return
        }
        let damaged = loss.isDamaged(unit)
        for _ in 0..<missingReferences.missing(before: unit, afterLoss: damaged) { telemetry.dropped(.lost) }
        if !loss.damaged { settleKeyframeWish(healed: true) }
        let carrier = arrival(ofOffset: unit.streamOffset)
        let pts = pending.add(PendingFrame(
            timeFirstByte: carrier.time, timeComplete: now, keyframe: unit.isKeyframe, orientation: orientation,
            format: unit.format, afterLoss: damaged, mediaTimestamp: carrier.mediaTimestamp))
        let errorsBefore = decoder.loggedErrors
        decoding = FrameVerdict.DecodeCall(pts: pts, errorsBefore: errorsBefore)
        decoder.decode(DecoderInput(unit, data: unit.data, pts: pts)) { take($0) }
        decoding = nil
        if decoder.loggedErrors > errorsBefore { damagedInDecoder(pts, unit) }
        countAbandonedFrames()
    }

    /// libavcodec logged errors while it decoded the access unit `pts`: its picture is damaged, and so is every
    /// picture decoded after it that may refer to it, until a keyframe heals the stream — whatever order they come
    /// out in (B-frames decoded after it come out before it).
    private func damagedInDecoder(_ pts: Int64, _ unit: AccessUnit) {
        pending.markDamaged(pts)
        parts.suspend()
        noteLoss(at: unit.streamOffset + 1)
    }

    /// Frames the decoder will never output (`PendingFrames`) are counted as dropped.
    func countAbandonedFrames() {
        for _ in 0..<pending.takeAbandoned() { telemetry.dropped(.undecodable) }
    }

    // MARK: - Publishing

    /// What came out of the decoder, in its order: a frame to publish, or what the decoder policy did.
    func take(_ output: StreamDecoderOutput) {
        switch output {
        case .frame(let frame): publish(frame)
        case .event(let event): note(event)
        }
    }

    /// A frame out of the decoder: withheld or flagged by its verdict (FrameVerdict.swift), then published.
    func publish(_ frame: DecodedFrame) {
        let decodedAt = clock.now()
        telemetry.count(.frameDecoded)
        if let connection { worker.activity.decodedFrame(connection, at: decodedAt) }
        let meta = pending.take(frame.pts)
        let inParts = parts.current?.pts == frame.pts && meta?.errorsBeforeParts != nil
        let facts = FrameVerdict.Facts(pending: meta, markedKeyframe: frame.isKeyframe, markedCorrupt: frame.isCorrupt,
                                       pts: frame.pts, loggedErrors: decoder.loggedErrors, decoding: decoding,
                                       rowsMissing: inParts && decoder.pictureMissesRows)
        // The rows of the picture decoded in parts, as far as libavcodec reported them; tracked no further once it is out.
        let pictureBands = inParts ? decoder.bands : nil
        if inParts { decoder.stopTrackingBands() }
        let verdict = FrameVerdict(facts, lossPolicy: configuration.lossPolicy)
        if verdict.suspendsParts { parts.suspend() }
        if verdict.damagesLaterPictures { noteLoss(at: annexB.bytesIn) }
        guard case .publish(let flags) = verdict.decision else {
            telemetry.dropped(.withheld)
            telemetry.log(.warning, key: "withheld", now: decodedAt, "frame after lost data withheld until the next keyframe (loss_policy = keyframe)")
            return
        }
        let metadata = FramePublisher.metadata(of: frame, pending: meta, flags: flags, decodedAt: decodedAt)
        // Come out clean, the rows written while it was decoded may stand.
        let bands = !flags.contains(.corrupt) && !frame.isCorrupt ? pictureBands : nil
        publisher.publish(frame, metadata: metadata, bands: bands) { outcome in
            report(outcome)
            // A GPU frame that cannot be downloaded: the device is taken for lost, and the GOP decoded again in
            // software (this frame included).
            if case .dropped(.writeFailed(let why), _, _) = outcome, frame.isHardware {
                decoder.reportHardwareFailure("GPU frame download failed: \(why)")
            }
        }
    }

    /// Frames held for their ring go into it once it is made (called every few milliseconds while there are some).
    func publishHeldFrames() {
        publisher.publishHeld(report: report)
    }

    /// Counts, logs and measures what became of a frame.
    func report(_ outcome: FramePublisher.Outcome) {
        let now = clock.now()
        switch outcome {
        case .published(let layout, let metadata, let late, let writtenWhileDecoded):
            if writtenWhileDecoded { telemetry.metrics.framesWrittenWhileDecoded.increment() }
            let completedAt = metadata.timeAccessUnitComplete == 0 ? nil : metadata.timeAccessUnitComplete
            // How long writing a frame takes is measured on frames written as they were decoded.
            telemetry.published(width: layout.width, height: layout.height, corrupt: metadata.flags.contains(.corrupt),
                                completedAt: completedAt, decodedAt: late ? nil : metadata.timeDecoded)
        case .held(let layout, let count):
            telemetry.log(.notice, key: "held", now: now,
                          "\(layout.width)x\(layout.height) frames held until their larger ring is made (\(count) now; decoding goes on)")
        case .dropped(let refusal, let width, let height):
            telemetry.dropped(refusal.dropReason)
            switch refusal {
            case .pixelFormat(let name):
                telemetry.log(.error, key: "pixel-format", now: now, "frame in pixel format \(name) cannot be published; dropped")
            case .slotCapacity(let format, let needed, let limit):
                telemetry.log(.error, key: "slot-capacity", now: now,
                              "\(width)x\(height) \(format) frames need \(needed) bytes each: 2 slots exceed ring_size_limit (\(limit) bytes); dropped")
            case .ringUnavailable:
                break  // The ring's own events say why (RingEventReporter).
            case .awaitingRing:
                telemetry.log(.warning, key: "awaiting-ring", now: now,
                              "\(width)x\(height) frame dropped: its larger ring is still being made and no more frames can be held for it (decoding goes on)")
            case .writeFailed(let why):
                telemetry.log(.error, key: "write", now: now, "frame could not be written: \(why); dropped")
            }
        }
    }

    // MARK: - Decoder events

    func note(_ event: StreamDecoderEvent) {
        let now = clock.now()
        switch event {
        case .pathSelected(let summary):
            telemetry.log(.notice, key: "decoder-path", now: now, summary)
        case .created(let recreation, let hardware, let lowDelay, let threading, let nanoseconds):
            telemetry.metrics.decoderCreation.recordNanoseconds(Int64(nanoseconds))
            if recreation {
                telemetry.count(.decoderRecreation)
                gap(.decoderReplaced)
            }
            telemetry.decodingPath(hardware)
            telemetry.log(.info, key: "decoder-created", now: now,
                          "\(recreation ? "decoder recreated for new parameter sets" : "decoder created") (path \(hardware ?? "software"), low_delay \(lowDelay), threads \(threading), creation_ms \(String(Double(nanoseconds) / 1e6, decimals: 2)))")
            if connection != nil { telemetry.setState(.streaming) }
        case .creationFailed(let error, let attempt):
            telemetry.log(.error, key: "decoder-creation", now: now,
                          "decoder creation failed (attempt \(attempt) of \(StreamDecoder.maximumCreationAttempts)): \(error)")
        case .decodeFailed(let error, let consecutive):
            parts.suspend()
            telemetry.count(.decodeError)
            telemetry.log(.warning, key: "decode", now: now, "decode error (\(consecutive) in a row): \(error)")
        case .reset(let failures):
            telemetry.setState(.degraded)
            gap(.decoderReplaced)
            telemetry.log(.error, key: "decoder-reset", now: now, "\(failures) consecutive decode failures: decoder reset, waiting for the next keyframe")
        case .fellBackToSoftware(let reason):
            telemetry.metrics.hardwareFallbacks.increment()
            telemetry.log(.warning, key: "fallback", now: now, "hardware decoding failed (\(reason)): falling back to software, the current GOP decoded again")
        case .waitingForKeyframe:
            telemetry.log(.info, key: "waiting-keyframe", now: now, "waiting for a keyframe before decoding")
        }
    }
}
