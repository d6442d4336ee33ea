import Bitstream
import CFFmpeg
import Glibc

/// The decoding policy of one stream (shared/DESIGN.md "Decoder failure policy", "Parameter sets"):
/// - the decoder is opened with the active parameter sets; at a random-access point whose parameter sets (or
///   codec) differ from those it was opened with, the old decoder is drained — its frames still come out — and
///   a new one opened. Identical repeats cost nothing.
/// - creation is tried up to `maximumCreationAttempts` times; `failuresBeforeReset` consecutive failures tear
///   the decoder down and decoding resumes at the next random-access point.
/// - a hardware decoder must produce its first frame; if it fails first, or fails
///   `hardwareFailuresBeforeFallback` times in a row later (the device lost), or a GPU frame cannot be downloaded
///   (`reportHardwareFailure`), the stream falls back to software and the current GOP (kept since the last
///   random-access point, bounded in bytes) is fed again; the frames already handed out are not handed out twice.
/// Runs on the stream's decode thread; not thread-safe.
public final class StreamDecoder {
    public static let maximumCreationAttempts = 5
    public static let failuresBeforeReset = 20
    /// Failures in a row after which a working hardware decoder is taken for lost.
    public static let hardwareFailuresBeforeFallback = 3

    public let configuration: DecoderConfiguration
    public private(set) var statistics = Statistics()
    public private(set) var state = State.idle
    public let maximumGOPBytes: Int
    /// The stream's name: libavcodec's messages are limited per stream (`FFmpegLog`).
    public let streamName: String
    private let probe: HardwareDeviceProbing
    private var decoder: VideoDecoder? {
        willSet { if let decoder, newValue !== decoder { retiredDecoderErrors += decoder.loggedErrors } }
    }
    /// Errors logged by decoders this one has closed: `loggedErrors` only grows.
    private var retiredDecoderErrors = 0
    private var openedWith: (codec: VideoCodec, parameterSets: [UInt8]?)?
    private var decodingPath = DecodingPath.undecided
    private var consecutiveFailures = 0
    private var gop: GroupOfPicturesRecord
    /// Failures in a row of the hardware decoder, and frames it decoded (for an injected failure).
    private var hardwareFailures = 0
    private var hardwareFrames = 0
    private var waitingReported = false
    /// What a failure while feeding decided, acted on once the current call can publish frames.
    private var pending = PendingChange.none

    /// Which decoder the stream uses, as far as hardware goes.
    private enum DecodingPath {
        /// Nothing opened yet (or the selection failed: tried again at the next keyframe).
        case undecided
        /// `HardwareSelection` chose; `firstFrameSeen`: the current hardware decoder has handed out a frame, so
        /// a later failure means the device is lost (before it, the device may only lack this profile).
        case chosen(HardwareSelection, firstFrameSeen: Bool)
        /// A hardware decoder failed: software for the rest of the stream.
        case softwareForGood
    }

    private enum PendingChange: Equatable {
        case none
        /// The hardware decoder failed or was taken for lost: software from the current GOP on.
        case fallBack(reason: String)
        /// Too many failures in a row condemned the decoder: torn down once its frames are drained.
        case reset
    }

    private var selection: HardwareSelection? { if case .chosen(let selection, _) = decodingPath { selection } else { nil } }

    /// Whether a hardware decoder has shown it works (a software one needs not).
    private var hardwareConfirmed: Bool { if case .chosen(let chosen, let seen) = decodingPath { chosen.device == nil || seen } else { true } }

    public init(
        configuration: DecoderConfiguration, probe: HardwareDeviceProbing = FFmpegHardwareProbe(),
        maximumGOPBytes: Int = 64 << 20, streamName: String = ""
    ) {
        self.configuration = configuration
        self.streamName = streamName
        self.probe = probe
        self.maximumGOPBytes = maximumGOPBytes
        gop = GroupOfPicturesRecord(maximumBytes: maximumGOPBytes)
    }

    /// The hardware device the current decoder uses (a simulated one included); nil in software.
    private var device: HardwareDevice? { decoder == nil ? nil : selection?.device }

    /// A GPU frame could not be downloaded: the device is taken for lost, and the stream goes on in software from
    /// the current GOP (acted on when the current `decode` call returns). Called by the frame's consumer.
    public func reportHardwareFailure(_ reason: String) {
        guard device != nil else { return }
        pending = .fallBack(reason: reason)
    }

    /// The path in use: "software", or the accelerator's name.
    public var path: String { decoder?.hardware?.accelerator.rawValue ?? "software" }

    /// Whether access units may be decoded slice by slice now (`Part`): H.264 in software, without frame threads
    /// (which libavcodec cannot combine with parts of pictures), and no hardware decoder that might still fall
    /// back and need whole access units again.
    /// Parts are decoded with libavcodec's concealment off, which then reports a damaged slice only in its log:
    /// never without the log routed (`FFmpegLog.route`, `loggedErrors`).
    public func decodesInParts(_ codec: VideoCodec) -> Bool {
        codec == .h264 && configuration.threading != .frame && !mayFallBack && decoder?.hardware == nil && FFmpegLog.isRouted
    }

    /// Errors libavcodec has logged for this stream's decoders: a picture decoded in parts is damaged if this grew
    /// while its parts were decoded.
    public var loggedErrors: Int { retiredDecoderErrors + (decoder?.loggedErrors ?? 0) }

    /// The rows of the picture being decoded in parts that are final so far (`PictureBands`): tracked from each
    /// picture's first part on, where the decoder can tell them (software, no threads).
    public var bands: PictureBands? { decoder?.isChunked == true ? decoder?.bands : nil }

    /// The picture being decoded in parts skipped macroblock rows: slices of it never came (concealment being off
    /// in parts, libavcodec says nothing of it).
    public var pictureMissesRows: Bool { decoder?.isChunked == true && decoder?.bandsMissRows == true }

    /// The picture's rows reported so far may yet change (`VideoDecoder.distrustBands`).
    public func distrustBands() { decoder?.distrustBands() }

    /// The picture decoded in parts came out: its rows are not tracked further.
    public func stopTrackingBands() { decoder?.disarmBands() }

    /// Decodes one access unit, or part of one (`Part`); `emit` receives every frame that comes out, in
    /// presentation order, and what the policy did, in the order it happened.
    public func decode(_ input: DecoderInput, part: Part = .whole, _ emit: (StreamDecoderOutput) -> Void) {
        if part == .next {
            // The first part decided: nothing to do if it was skipped (no decoder while waiting for a keyframe).
            guard let decoder, decoder.isChunked else { return }
            feed(input, emit: emit)
            finishCall(emit: emit)
            return
        }
        remember(input)
        let changed = openedWith.map { $0.codec != input.codec || (input.parameterSets != nil && $0.parameterSets != input.parameterSets) } ?? true
        if decoder == nil || (changed && input.isRandomAccess) {
            guard input.isRandomAccess else {
                statistics.skippedAccessUnits += 1
                if !waitingReported {
                    waitingReported = true
                    emit(.event(.waitingForKeyframe))
                }
                return
            }
            let recreation = decoder != nil
            if recreation { drain(emit) }
            guard open(for: input, recreation: recreation, emit: emit) else { return }
        }
        decoder?.setChunked(part == .first)
        if part == .first { decoder?.armBands() } else { decoder?.disarmBands() }
        feed(input, emit: emit)
        finishCall(emit: emit)
    }

    /// A fallback or reset decided while feeding, acted on once frames can be published (a replay in software may
    /// decide a reset in turn).
    private func finishCall(emit: (StreamDecoderOutput) -> Void) {
        while true {
            switch pending {
            case .none:
                return
            case .fallBack(let reason):
                pending = .none
                fallBackToSoftware(reason, emit: emit)
            case .reset:
                pending = .none
                // Frames the decoder still holds were decoded before the failures: they are not lost.
                if let decoder, case .accepted = decoder.sendEndOfStream() { receiveAll(from: decoder, emit: emit) }
                decoder = nil
                openedWith = nil
                state = .degraded
            }
        }
    }

    /// The sender went away or the stream ends: every frame still inside the decoder comes out. The decoder stays
    /// open (reset), so a reconnecting sender with the same parameter sets costs no recreation.
    public func drain(_ emit: (StreamDecoderOutput) -> Void) {
        guard let decoder else { return }
        if case .failed(let error) = decoder.sendEndOfStream() {
            recordFailure(error, emit: emit)
        }
        receiveAll(from: decoder, emit: emit)
        decoder.reset()
    }

    /// Whether a decoder is open, or a GOP kept for a fallback: what `release` lets go of.
    public var holdsResources: Bool { decoder != nil || gop.holdsInputs }

    /// The stream has had no sender for a while: the decoder is closed, with its frame pools, threads and (on a
    /// GPU) surfaces, and the GOP kept for a fallback is forgotten. The next sender's first keyframe opens a new
    /// one, on the same path (a hardware one must show its first frame again). The heap freed goes back to the
    /// system at once: glibc would keep it in its arenas.
    public func release() {
        decoder = nil
        openedWith = nil
        gop = GroupOfPicturesRecord(maximumBytes: maximumGOPBytes)
        consecutiveFailures = 0
        hardwareFailures = 0
        if case .chosen(let selection, true) = decodingPath { decodingPath = .chosen(selection, firstFrameSeen: false) }
        state = .idle
        malloc_trim(0)
    }

    // MARK: - Creation
    private func open(for input: DecoderInput, recreation: Bool, emit: (StreamDecoderOutput) -> Void) -> Bool {
        waitingReported = false
        if case .undecided = decodingPath {
            do {
                let selection = try HardwareSelection.select(configuration.hardware, codec: input.codec, probe: probe)
                decodingPath = .chosen(selection, firstFrameSeen: false)
                emit(.event(.pathSelected(selection.summary)))
            } catch {
                statistics.creationFailures += 1
                state = .degraded
                emit(.event(.creationFailed(error, attempt: 1)))
                return false
            }
        }
        let device = selection?.device
        let started = monotonicNanoseconds()
        for attempt in 1...Self.maximumCreationAttempts {
            do {
                decoder = try VideoDecoder(
                    codec: input.codec, configuration: configuration, parameterSets: input.parameterSets,
                    reorderDepth: input.reorderDepth, lowDelay: input.reorderDepthIsSignalled,
                    assumedReorderDepth: input.decodedPictureBufferFrames,
                    hardware: device?.isSimulated == true ? nil : device, stream: streamName)
                openedWith = (input.codec, input.parameterSets)
                if let selection { decodingPath = .chosen(selection, firstFrameSeen: false) }
                hardwareFailures = 0
                hardwareFrames = 0
                consecutiveFailures = 0
                statistics.creations += 1
                if recreation { statistics.recreations += 1 }
                state = .decoding
                emit(.event(.created(recreation: recreation, hardware: device?.accelerator.rawValue, lowDelay: decoder!.lowDelay,
                               threading: decoder!.activeThreading, nanoseconds: monotonicNanoseconds() - started)))
                return true
            } catch {
                statistics.creationFailures += 1
                emit(.event(.creationFailed(error, attempt: attempt)))
            }
        }
        decoder = nil
        openedWith = nil
        state = .degraded
        return false
    }

    // MARK: - Feeding

    private func feed(_ input: DecoderInput, emit: (StreamDecoderOutput) -> Void) {
        guard let decoder else { return }
        if input.undecodable {
            // The bitstream's fault, not the device's: never a reason to leave the hardware path.
            recordFailure(.sendFailed("access unit refers to parameter sets that were never received"), deviceSuspect: false, emit: emit)
            return
        }
        var sent = false
        while !sent {
            let outcome = input.data.withUnsafeBytes { decoder.send($0, pts: input.pts) }
            switch outcome {
            case .accepted:
                sent = true
            case .full:
                // The decoder wants its frames taken first; if it still takes nothing, give up on this unit.
                let before = statistics.framesDecoded
                receiveAll(from: decoder, emit: emit)
                if statistics.framesDecoded == before {
                    recordFailure(.sendFailed("decoder accepts no input"), emit: emit)
                    return
                }
            case .failed(let error):
                recordFailure(error, emit: emit)
                return
            }
            if pending != .none { return }
        }
        if receiveAll(from: decoder, emit: emit) { consecutiveFailures = 0 }
    }

    /// Takes every available frame. Returns false when the decoder reported a failure.
    @discardableResult
    private func receiveAll(from decoder: VideoDecoder, emit: (StreamDecoderOutput) -> Void) -> Bool {
        while true {
            var fallbackReason: String?
            let outcome = decoder.receive { frame in
                if case .chosen(let selection, false) = decodingPath, selection.device != nil {
                    guard frame.isHardware || device?.simulatesWorkingDevice == true else {
                        fallbackReason = "the first frame came back in system memory"
                        return
                    }
                    decodingPath = .chosen(selection, firstFrameSeen: true)
                }
                hardwareFailures = 0
                statistics.framesDecoded += 1
                handOut(frame, emit: emit)
            }
            if let fallbackReason {
                pending = .fallBack(reason: fallbackReason)
                return false
            }
            switch outcome {
            case .frame:
                // Taken for lost (an injected failure, a download that failed): its later frames come from the replay.
                if case .fallBack = pending { return false }
            case .needsInput, .endOfStream: return true
            case .failed(let error):
                recordFailure(error, emit: emit)
                return false
            }
        }
    }

    /// A frame to `emit`, unless the replay after a fallback already handed it out.
    private func handOut(_ frame: DecodedFrame, emit: (StreamDecoderOutput) -> Void) {
        guard gop.shouldHandOut(pts: frame.pts) else { return }
        emit(.frame(frame))
        // A download that failed inside `emit` left the frame unpublished: the replay hands it out again.
        if case .fallBack = pending { return }
        gop.noteHandedOut(pts: frame.pts)
        guard let device else { return }
        hardwareFrames += 1
        if let limit = device.injectedFailureAfterFrames, hardwareFrames >= limit {
            pending = .fallBack(reason: "injected device failure after \(limit) frames")
        }
    }

    private func recordFailure(_ error: DecoderError, deviceSuspect: Bool = true, emit: (StreamDecoderOutput) -> Void) {
        if deviceSuspect, device != nil {
            hardwareFailures += 1
            if !hardwareConfirmed {
                pending = .fallBack(reason: error.description)
                return
            }
            if hardwareFailures >= Self.hardwareFailuresBeforeFallback {
                pending = .fallBack(reason: "the device failed \(hardwareFailures) times in a row: \(error)")
                return
            }
        }
        statistics.decodeErrors += 1
        consecutiveFailures += 1
        emit(.event(.decodeFailed(error, consecutive: consecutiveFailures)))
        // A fallback pending replaces the decoder anyway.
        if consecutiveFailures >= Self.failuresBeforeReset && pending == .none {
            statistics.resets += 1
            emit(.event(.reset(consecutiveFailures: consecutiveFailures)))
            consecutiveFailures = 0
            pending = .reset
        }
    }

    /// The hardware decoder failed before its first frame: software from now on, GOP fed again.
    private func fallBackToSoftware(_ reason: String, emit: (StreamDecoderOutput) -> Void) {
        statistics.hardwareFallbacks += 1
        emit(.event(.fellBackToSoftware(reason: reason)))
        // Worked, then failed: the device is lost (one that never gave a frame may only lack this profile).
        if case .chosen(let selection, true) = decodingPath, let lost = selection.device { probe.deviceLost(lost) }
        decodingPath = .softwareForGood
        decoder = nil
        openedWith = nil
        let replay = gop.isComplete ? gop.inputs : []
        guard let first = replay.first, first.isRandomAccess, open(for: first, recreation: true, emit: emit) else { return }
        gop.isReplaying = true
        for input in replay { feed(input, emit: emit) }
        gop.isReplaying = false
    }

    /// A hardware decoder may still fail (before its first frame, or lost later) and the GOP be fed again in software.
    private var mayFallBack: Bool {
        switch decodingPath {
        case .undecided: configuration.hardware != .none
        case .chosen(let selection, _): selection.device != nil
        case .softwareForGood: false
        }
    }

    /// Keeps the access units since the last random-access point, up to `maximumGOPBytes`, while a fallback may
    /// need them (on the software path nothing is kept: the assembler can then reuse its buffers).
    private func remember(_ input: DecoderInput) {
        gop.remember(input, keeping: mayFallBack)
    }
}
