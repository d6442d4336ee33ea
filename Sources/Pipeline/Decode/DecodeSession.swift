import Bitstream
import Decoding
import Glibc
import Logging
import NIOConcurrencyHelpers
import SharedFrames

/// One stream's decoding, on its decode thread: the stages along the data flow, and the work items that drive
/// them. Created by the thread and never handed out (not Sendable).
///
///     Work ─► ingest (AnnexBIngest | RTPIngest) ─► AccessUnitAssembler ─► early close (PictureInParts)
///          ─► AccessUnitAdmission ─► StreamDecoder ─► loss policy (LossTracker, PendingFrames, FrameVerdict) ─► FramePublisher ─► ring
///     every stage reports through StreamTelemetry (ring counters, metrics, status, log)
///
/// Ingest is in DecodeSession+Ingest.swift, decoding and publishing in DecodeSession+Decoding.swift, slices
/// decoded as they arrive in DecodeSession+Parts.swift.
final class DecodeSession {
    let worker: StreamWorker
    let configuration: StreamConfiguration
    let telemetry: StreamTelemetry
    let publisher: FramePublisher
    /// The only source of the time in the session (tests move it by hand).
    let clock: DecodeClock
    var annexB: AnnexBIngest
    /// How this connection's bytes become NAL units (DecodeSession+Framing.swift).
    var framing = Framing.annexB
    /// For `source = "rtsp://…"` streams: the session's format from its SDP (applied again when the RTP source changes).
    var sessionMedia: RTPSessionMedia?
    var assembler: AccessUnitAssembler
    let decoder: StreamDecoder
    var parts = PictureInParts()
    /// Which pictures lost data damaged: frames decoded from them follow `loss_policy`.
    var loss = LossTracker()
    var keyframeWish: KeyframeWish
    var arrivals = ArrivalLog()
    var pending = PendingFrames()
    /// The access unit being decoded now and the errors libavcodec had logged before it (`decode`).
    var decoding: FrameVerdict.DecodeCall?
    /// rtp://: data was lost inside the access unit being assembled.
    var lossInAccessUnit = false
    /// H.264 reference pictures lost whole (a frame_num gap after a loss): counted as dropped.
    var missingReferences = MissingReferences()
    var orientation: DisplayOrientation?
    /// Whom the input comes from (SenderPhase.swift).
    var sender = SenderPhase.none
    /// The connected sender's id: work items of any other are stale.
    var connection: ConnectionID? { sender.connection }
    /// When the ring's name is checked next.
    private var nextRingCheck: UInt64 = 0
    /// Reused for every chunk, NAL unit and access unit: nothing here allocates per frame in steady state.
    var nalUnitScratch: [NALUnit] = []
    var eventScratch: [AssemblerEvent] = []
    var rtpEventScratch: [RTPIngest.Event] = []
    var transportStreamEventScratch: [TransportStreamEvent] = []
    /// Fault injection, for testing the watchdog: `STREAMRECVD_FAULT_STALL_DECODE_SECONDS=N` makes the decode
    /// thread stall N seconds when the first sender connects, as a wedged decoder would.
    private var injectedStall = getenv("STREAMRECVD_FAULT_STALL_DECODE_SECONDS").flatMap { Double(String(cString: $0)) }

    /// `ring`: the stream's ring writer, sent to the decode thread; the session's publisher is its one owner.
    init(worker: StreamWorker, ring: FrameRingWriter) {
        self.worker = worker
        configuration = worker.configuration
        clock = worker.clock
        publisher = FramePublisher(writer: ring, output: configuration.decoder.output)
        telemetry = StreamTelemetry(ring: publisher, metrics: worker.metrics, snapshot: worker.snapshot, logger: worker.logger,
                                    clock: clock)
        annexB = AnnexBIngest(maximumNALUnitSize: configuration.maxAccessUnitBytes)
        assembler = AccessUnitAssembler(codec: configuration.codec, maximumAccessUnitSize: configuration.maxAccessUnitBytes)
        keyframeWish = KeyframeWish(enabled: configuration.rtp.keyframeRequest != .none)
        decoder = StreamDecoder(configuration: configuration.decoder, streamName: configuration.name)
    }

    func run() {
        loop: while true {
            worker.snapshot.withLockedValue { $0.busySince = nil }
            // The ring is checked once a second even while no frame flows: someone may remove or shrink it.
            let now = clock.now()
            if now >= nextRingCheck {
                publisher.checkRing(now: now)
                releaseLingeringDecoder(now: now)
                nextRingCheck = now + 1_000_000_000
            }
            // Frames held for a ring being made go into it within milliseconds of its being made.
            let wakeAt = publisher.holdsFrames ? min(nextRingCheck, now + 5_000_000) : nextRingCheck
            let next = worker.queue.pop(waitingAtMost: wakeAt > now ? wakeAt - now : 0)
            worker.snapshot.withLockedValue { $0.busySince = clock.now() }
            if publisher.holdsFrames { publishHeldFrames() }
            guard let (work, remaining) = next else { continue }
            worker.drained(to: remaining)
            switch work {
            case .listening:
                telemetry.setState(.waiting)
            case .connected(let id, let remote):
                worker.connectTaken()
                begin(id, remote: remote)
            case .bytes(let bytes, let time, let id):
                if id == connection { receive(bytes, at: time) }
                worker.bytePool.recycle(bytes)
            case .rtp(let events, let bytes, let time, let id):
                if id == connection { receive(events, bytes: bytes, at: time) }
            case .sourceStatus(let text):
                publisher.setSourceStatus(text)
            case .rtpSession(let id, let media):
                if id == connection { describe(media) }
            case .transportStream(let bytes, let time, let id):
                if id == connection { receiveTransportStream(bytes, at: time) }
                worker.bytePool.recycle(bytes)
            case .datagramsLost(let id):
                if id == connection { noteLoss(at: annexB.bytesIn) }
            case .lossWindow(let id, let open):
                guard id == connection else { continue }
                if open {
                    gap(.lossWindowOpened(at: annexB.bytesIn))
                } else {
                    loss.closeLossWindow(at: annexB.bytesIn)
                }
            case .disconnected(let id, let reason):
                guard id == connection else { continue }
                end(reason: reason)
                telemetry.setState(.waiting)
            case .stop(let removingRing):
                if connection != nil { end(reason: .daemonStopping) }
                telemetry.setState(.stopped)
                publisher.close(removingName: removingRing, report: report)
                break loop
            }
        }
    }

    // MARK: - Connections

    private func begin(_ id: ConnectionID, remote: String) {
        if let stall = injectedStall {
            injectedStall = nil
            telemetry.logger.warning("fault injection: decode thread stalls for \(stall) s")
            usleep(UInt32(stall * 1_000_000))
        }
        if connection != nil { end(reason: .takenOver) }
        sender = .connected(SenderConnection(id: id))
        sessionMedia = nil
        startAfresh()
        framing = Framing.initial(for: configuration)
        let clockRate: UInt32 = switch configuration.source {
        case .rtp(_, let settings): settings.clockRate
        case .srt, .rtsp, .webrtc: 90000  // PES timestamps; rtsp:// until the SDP says (RFC 6184/7798 fix 90 kHz)
        case .tcp, .udp: 0
        }
        publisher.setPTSClockRate(clockRate)
        telemetry.count(.connection)
        telemetry.setState(.streaming)
        telemetry.log(.info, key: "connected", "sender connected (remote \(remote))")
    }

    /// rtsp://: the session's format, from the server's SDP. Its parameter sets go to the assembler first, as
    /// though sent in-band: a camera may send them nowhere else.
    private func describe(_ media: RTPSessionMedia) {
        sessionMedia = media
        framing = .rtp(RTPIngest(codec: media.codec, payloadType: media.payloadType, maximumNALUnitSize: configuration.maxAccessUnitBytes))
        publisher.setPTSClockRate(media.clockRate)
        applySessionMedia()
    }

    /// The assembler for the session's codec, primed with its SDP parameter sets (again after `startAfresh`).
    func applySessionMedia() {
        guard let media = sessionMedia else { return }
        assembler = AccessUnitAssembler(codec: media.codec, maximumAccessUnitSize: configuration.maxAccessUnitBytes)
        for unit in media.parameterSets {
            // Offset 0: where the depacketizer, new for each session and each RTP source, starts counting.
            push(NALUnit(bytes: unit[...], startCodeOffset: 0, startCodeLength: 4))
        }
    }

    /// A new byte stream (a new connection, or a new RTP source): fresh framing and (with codec = auto) fresh
    /// detection, no loss carried over. The decoder stays: identical parameter sets from the new sender cost no
    /// recreation.
    func startAfresh() {
        arrivals.removeAll()
        annexB = AnnexBIngest(maximumNALUnitSize: configuration.maxAccessUnitBytes)
        assembler = AccessUnitAssembler(codec: configuration.codec, maximumAccessUnitSize: configuration.maxAccessUnitBytes)
        missingReferences.reset()
        parts.reset()
        settleKeyframeWish(healed: false)
        gap(.startedAfresh)
    }

    private func end(reason: DisconnectReason) {
        if framing.withRTP({ $0.flush { rtpEventScratch.append($0) } }) != nil {
            handleCollectedRTPEvents(at: clock.now(), packetSSRC: nil)
        }
        finishInput()
        settleKeyframeWish(healed: false)
        telemetry.senderEnded()
        let bytes = if case .connected(let gone) = sender { gone.bytes } else { Int64(0) }
        telemetry.log(.info, key: "disconnected-\(reason.kind)",
                      "sender disconnected: \(reason) (\(bytes) bytes, \(assembler.statistics.accessUnits) access units)")
        sender = .gone(since: clock.now())
    }

    /// `decoder_linger` after the sender left, the decoder is closed: a 1080p decoder holds about 25 MB of frames
    /// (4K: about 100), for nothing while no one sends.
    private func releaseLingeringDecoder(now: UInt64) {
        guard case .gone(let since) = sender, now >= since &+ UInt64(configuration.decoderLinger * 1e9) else { return }
        sender = .none
        guard decoder.holdsResources else { return }
        decoder.release()
        telemetry.log(.info, key: "decoder-released",
                      "decoder closed after \(String(configuration.decoderLinger, decimals: 1)) s without a sender (decoder_linger); the next sender's first keyframe opens a new one")
    }

    /// Everything received so far is decoded and published: the splitter's last unit, the access unit in progress
    /// and the frames the decoder still holds.
    func finishInput() {
        annexB.flush { collect($0) }
        processCollectedUnits()
        endAccessUnit()
        decoder.drain { take($0) }
        // A picture decoded in parts that never came out leaves its slot holding no frame, not half of one.
        publisher.abandonEarlyFrame()
        pending.removeAll()
        countAbandonedFrames()
    }

    // MARK: - Loss and progress

    /// Data was lost at stream offset `offset`: every frame is damaged (flagged corrupt, or withheld with
    /// loss_policy = keyframe) until a keyframe that begins after it.
    func noteLoss(at offset: Int64) { gap(.lost(at: offset)) }

    /// Why the frames published next do not follow on from the last one.
    enum Gap {
        /// Data lost at this stream offset: damaged until a keyframe that begins after it.
        case lost(at: Int64)
        /// Data lost somewhere after this offset, where is known when the window closes (udp://).
        case lossWindowOpened(at: Int64)
        /// A new byte stream (a new sender, or RTP source): damaged until its first whole random-access point.
        case startedAfresh
        /// The decoder was recreated for new parameter sets, or reset after failures.
        case decoderReplaced
    }

    /// The one place a gap is marked: the loss tracker learns what the frames after it may lack, and the next frame
    /// published carries the discontinuity flag.
    func gap(_ gap: Gap) {
        switch gap {
        case .lost(let offset): loss.noteLoss(at: offset)
        case .lossWindowOpened(let offset): loss.openLossWindow(at: offset)
        case .startedAfresh: loss.startAfresh()
        case .decoderReplaced: break
        }
        publisher.markDiscontinuity()
    }

    /// The sender delivered valid video: told to the listener at most every 50 ms.
    func reportProgress(now: UInt64) {
        guard let connection = sender.progressDue(now: now) else { return }
        worker.activity.progressed(connection, at: now)
    }
}
