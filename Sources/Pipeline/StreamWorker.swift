import Bitstream
import Decoding
import FrameFormats
import Foundation
import Glibc
import Logging
import NIOConcurrencyHelpers
import SharedFrames

/// What a stream is doing, for STATUS lines and the watchdog; written by the decode thread.
struct StreamSnapshot: Sendable {
    var state = StreamState.starting
    var codec: String?
    var size: String?
    var path = "software"
    var framesPublished: UInt64 = 0
    /// When the decode thread took the work item it is still processing; nil while it waits for work.
    var busySince: UInt64?
}

/// The per-stream decode thread: split → assemble → decode → publish, all on one dedicated thread (never on
/// Swift's cooperative pool, never on the network event loop). Fed through a `WorkQueue` by the listener.
/// Ingest (bytes and RTP packets to access units) is in StreamWorker+Ingest.swift, decoding and publishing in
/// StreamWorker+Publishing.swift.
final class StreamWorker: @unchecked Sendable {
    enum Work {
        case listening
        case connected(ConnectionID, remote: String)
        /// Annex B bytes (a TCP read, or a raw UDP datagram).
        case bytes([UInt8], receivedAt: UInt64, connection: ConnectionID)
        /// One RTP packet.
        case rtp([UInt8], receivedAt: UInt64, connection: ConnectionID)
        /// udp://: datagrams of this sender were lost before reaching the queue, just here.
        case datagramsLost(ConnectionID)
        /// udp://: datagrams were lost somewhere from here on (`open`), or that gap lies before here (closed).
        case lossWindow(ConnectionID, open: Bool)
        case disconnected(ConnectionID, reason: DisconnectReason)
        case stop
    }

    /// Metadata of an access unit kept until its frame comes out of the decoder (matched by pts).
    struct PendingFrame {
        var timeFirstByte: UInt64
        var timeComplete: UInt64
        var keyframe: Bool
        var orientation: DisplayOrientation?
        var format: SequenceFormat?
        var afterLoss: Bool
        /// rtp://: the access unit's RTP timestamp, unwrapped.
        var mediaTimestamp: Int64?
        /// Its slices were decoded as they arrived (StreamWorker+Slices.swift), with concealment off: then the
        /// errors libavcodec had logged for the stream before its first slice (more when it comes out: damaged).
        var errorsBeforeParts: Int?
    }

    let configuration: StreamConfiguration
    let queue = WorkQueue<Work>()
    /// Arrays for received bytes, recycled between the event loop and this thread.
    let bytePool = ByteArrayPool()
    /// Reused for every chunk, NAL unit and access unit: nothing here allocates per frame in steady state.
    var nalUnitScratch: [NALUnit] = []
    var eventScratch: [AssemblerEvent] = []
    /// The H.264 picture whose slices are being decoded as they arrive (StreamWorker+Slices.swift): its pts and
    /// how many bytes of its access unit the decoder has had.
    var picturePart: (pts: Int64, fed: Int)?
    /// Set when a picture decoded slice by slice came out damaged: whole access units, with FFmpeg's concealment,
    /// until the next keyframe.
    var partsSuspended = false
    /// The bytes of one part, reused: a part is copied out of the assembler's buffer, which keeps growing.
    var partScratch: [UInt8] = []
    var rtpEventScratch: [RTPIngest.Event] = []
    /// The layout of the last frame published (it owns an array: rebuilt only when the format changes).
    var lastLayout: FrameLayout?
    var lastPublishedSize = (width: 0, height: 0)
    /// Bytes queued for this thread above which the listener stops reading from the socket.
    let backlogHighWater: Int
    /// Called (on this thread) once a paused listener may read again.
    let resumeReading = NIOLockedValueBox<(@Sendable () -> Void)?>(nil)
    /// Read by other threads (status, watchdog); updated by the decode thread.
    let snapshot = NIOLockedValueBox(StreamSnapshot())
    let metrics: StreamMetrics
    let ringEvents: RingEventReporter
    /// Where the listener learns that the sender is delivering video.
    let activity: SenderActivity
    var lastProgressReport: UInt64 = 0
    /// Frames published since `fpsWindowStart`, for the frames-per-second gauge.
    var fpsWindowFrames = 0
    var fpsWindowStart: UInt64 = 0
    let logger: Logger
    /// Every repeated line goes through here: at most one per kind per 10 s, with the count suppressed.
    var log: RateLimitedLogger
    let writer: FrameRingWriter
    var splitter: AnnexBSplitter
    var assembler: AccessUnitAssembler
    /// For `rtp://` streams: NAL units come from RTP packets instead of the Annex B splitter.
    var rtp: RTPIngest?
    /// Which pictures lost data damaged: frames decoded from them follow `loss_policy`.
    var loss = LossTracker()
    /// When the ring's name was last checked, and the next check.
    var nextRingCheck: UInt64 = 0
    /// Sends an RTCP datagram to the current RTP sender (set by the listener when `keyframe_request` is on).
    let feedbackSender = NIOLockedValueBox<(@Sendable ([UInt8]) -> Void)?>(nil)
    var lastKeyframeRequest: UInt64?
    var firSequenceNumber: UInt8 = 0
    /// This receiver's SSRC in RTCP feedback.
    let rtcpSSRC = UInt32.random(in: 1...UInt32.max)
    var decoder: StreamDecoder!
    var connection: ConnectionID?
    var bytesThisConnection: Int64 = 0
    /// (stream offset, arrival time, unwrapped RTP timestamp) of recent chunks or packets, to date each access
    /// unit's first byte and give it its packet's timestamp.
    var arrivals: [(offset: Int64, time: UInt64, mediaTimestamp: Int64?)] = []
    var pending: [Int64: PendingFrame] = [:]
    var nextPTS: Int64 = 0
    var orientation: DisplayOrientation?
    var discontinuity = true
    private var thread: Thread?
    private let finished = NSCondition()
    private var isFinished = false
    /// Fault injection, for testing the watchdog: `STREAMRECVD_FAULT_STALL_DECODE_SECONDS=N` makes the decode
    /// thread stall N seconds when the first sender connects, as a wedged decoder would.
    private var injectedStall = getenv("STREAMRECVD_FAULT_STALL_DECODE_SECONDS").flatMap { Double(String(cString: $0)) }

    init(configuration: StreamConfiguration, writer: FrameRingWriter, ringEvents: RingEventReporter,
         activity: SenderActivity, logger: Logger, metrics: StreamMetrics) {
        self.configuration = configuration
        self.metrics = metrics
        self.writer = writer
        self.ringEvents = ringEvents
        self.activity = activity
        self.logger = logger
        log = RateLimitedLogger(logger: logger)
        backlogHighWater = max(8 << 20, 2 * configuration.maxAccessUnitBytes)
        splitter = AnnexBSplitter(maximumNALUnitSize: configuration.maxAccessUnitBytes)
        assembler = AccessUnitAssembler(codec: configuration.codec, maximumAccessUnitSize: configuration.maxAccessUnitBytes)
        decoder = StreamDecoder(configuration: configuration.decoder) { [unowned self] event in self.note(event) }
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "decode-\(configuration.name)"
        thread.qualityOfService = .userInteractive
        self.thread = thread
        thread.start()
    }

    func enqueue(_ work: Work) { queue.push(work) }

    /// Where RTCP keyframe requests go; called from the decode thread, must not block.
    func setFeedbackSender(_ send: @escaping @Sendable ([UInt8]) -> Void) {
        feedbackSender.withLockedValue { $0 = send }
    }

    /// Queues received bytes. Returns false when the backlog is over the high-water mark: the caller must stop
    /// reading and call `whenDrained` to learn when to resume.
    func enqueue(bytes: [UInt8], receivedAt time: UInt64, connection: ConnectionID) -> Bool {
        let work: Work = configuration.listen.transport == .rtp
            ? .rtp(bytes, receivedAt: time, connection: connection)
            : .bytes(bytes, receivedAt: time, connection: connection)
        return queue.push(work, bytes: bytes.count) < backlogHighWater
    }

    /// Whether the decode thread is keeping up; datagrams cannot be pushed back, so they are dropped when not.
    var acceptsMoreBytes: Bool { queue.waitingBytes < backlogHighWater }

    /// `resume` runs once the backlog has drained to half the high-water mark: on the decode thread when it gets
    /// there, or at once if it already has (the thread may have drained the queue before this was registered).
    func whenDrained(_ resume: @escaping @Sendable () -> Void) {
        resumeReading.withLockedValue { $0 = resume }
        if queue.waitingBytes < backlogHighWater / 2 { takeResume()?() }
    }

    /// The pending resume callback, at most once.
    private func takeResume() -> (@Sendable () -> Void)? {
        resumeReading.withLockedValue { value in
            defer { value = nil }
            return value
        }
    }

    /// Stops after everything queued before it, draining the decoder; returns once the thread has finished.
    func stopAndWait() {
        queue.push(.stop)
        finished.lock()
        while !isFinished { finished.wait() }
        finished.unlock()
        // The thread retains its block, which retains this worker: let go of it once it has ended, or a stopped
        // stream (a reload) would keep its decoder and buffers for ever.
        thread = nil
    }

    private func run() {
        // Named for top -H and perf (15 characters at most); pthread_setname_np is not visible from Swift here.
        let descriptor = open("/proc/thread-self/comm", O_WRONLY)
        if descriptor >= 0 {
            _ = String("decode-\(configuration.name)".prefix(15)).withCString { write(descriptor, $0, strlen($0)) }
            close(descriptor)
        }
        loop: while true {
            snapshot.withLockedValue { $0.busySince = nil }
            // The ring is checked once a second even while no frame flows: someone may remove or shrink it.
            let now = MonotonicClock.nanoseconds()
            if now >= nextRingCheck {
                writer.checkName(now: now)
                nextRingCheck = now + 1_000_000_000
            }
            let next = queue.pop(deadline: nextRingCheck)
            snapshot.withLockedValue { $0.busySince = MonotonicClock.nanoseconds() }
            guard let (work, remaining) = next else { continue }
            if remaining < backlogHighWater / 2 { takeResume()?() }
            switch work {
            case .listening:
                setState(.waiting)
            case .connected(let id, let remote):
                begin(id, remote: remote)
            case .bytes(let bytes, let time, let id):
                if id == connection { receive(bytes, at: time) }
                bytePool.recycle(bytes)
            case .rtp(let bytes, let time, let id):
                if id == connection { receivePacket(bytes, at: time) }
                bytePool.recycle(bytes)
            case .datagramsLost(let id):
                if id == connection { noteLoss(at: splitter.statistics.bytesIn) }
            case .lossWindow(let id, let open):
                guard id == connection else { continue }
                if open {
                    loss.openLossWindow(at: splitter.statistics.bytesIn)
                    discontinuity = true
                } else {
                    loss.closeLossWindow(at: splitter.statistics.bytesIn)
                }
            case .disconnected(let id, let reason):
                guard id == connection else { continue }
                end(reason: reason)
                setState(.waiting)
            case .stop:
                if connection != nil { end(reason: .daemonStopping) }
                setState(.stopped)
                break loop
            }
        }
        finished.lock()
        isFinished = true
        finished.signal()
        finished.unlock()
    }

    /// False when the decode thread has been inside one work item for longer than `limit`: it is wedged
    /// (a thread waiting for work is healthy however long it waits).
    func isHealthy(stallLimitNanoseconds limit: UInt64) -> Bool {
        guard let since = snapshot.withLockedValue({ $0.busySince }) else { return true }
        let now = MonotonicClock.nanoseconds()
        return now < since || now - since < limit
    }

    // MARK: - Connections

    private func begin(_ id: ConnectionID, remote: String) {
        if let stall = injectedStall {
            injectedStall = nil
            logger.warning("fault injection: decode thread stalls for \(stall) s")
            usleep(UInt32(stall * 1_000_000))
        }
        if connection != nil { end(reason: .takenOver) }
        connection = id
        bytesThisConnection = 0
        lastProgressReport = 0
        startAfresh()
        if configuration.listen.transport == .rtp, let codec = configuration.codec {
            rtp = RTPIngest(codec: codec, payloadType: configuration.rtpPayloadType,
                            maximumNALUnitSize: configuration.maxAccessUnitBytes, reorderWindow: configuration.rtpReorderWindow)
        }
        writer.setPTSClockRate(configuration.listen.transport == .rtp ? configuration.rtpClockRate : 0)
        writer.count(\.connections)
        metrics.connections.increment()
        setState(.streaming)
        log.log(.info, key: "connected", now: MonotonicClock.nanoseconds(), "sender connected (remote \(remote))")
    }

    /// A new byte stream (a new connection, or a new RTP source): fresh framing and (with codec = auto) fresh
    /// detection, no loss carried over. The decoder stays: identical parameter sets from the new sender cost no
    /// recreation.
    func startAfresh() {
        arrivals.removeAll(keepingCapacity: true)
        splitter = AnnexBSplitter(maximumNALUnitSize: configuration.maxAccessUnitBytes)
        assembler = AccessUnitAssembler(codec: configuration.codec, maximumAccessUnitSize: configuration.maxAccessUnitBytes)
        loss.startAfresh()
        picturePart = nil
        partsSuspended = false
        discontinuity = true
    }

    private func end(reason: DisconnectReason) {
        if rtp != nil {
            rtp!.flush { rtpEventScratch.append($0) }
            handleCollectedRTPEvents(at: MonotonicClock.nanoseconds(), packetSSRC: nil)
        }
        finishInput()
        metrics.framesPerSecond.record(0)
        fpsWindowStart = 0
        log.log(.info, key: "disconnected-\(reason.kind)", now: MonotonicClock.nanoseconds(),
                "sender disconnected: \(reason) (\(bytesThisConnection) bytes, \(assembler.statistics.accessUnits) access units)")
        connection = nil
    }

    /// Everything received so far is decoded and published: the splitter's last unit, the access unit in progress
    /// and the frames the decoder still holds.
    func finishInput() {
        splitter.flush { nalUnitScratch.append($0) }
        processCollectedUnits()
        endAccessUnit()
        decoder.drain { publish($0) }
        pending.removeAll()
    }

    /// The ring's state and the snapshot's, together.
    func setState(_ state: StreamState) {
        writer.setState(state)
        snapshot.withLockedValue { $0.state = state }
    }

    // MARK: - Loss and progress

    /// Data was lost at stream offset `offset`: every frame is damaged (flagged corrupt, or withheld with
    /// loss_policy = keyframe) until a keyframe that begins after it.
    func noteLoss(at offset: Int64) {
        loss.noteLoss(at: offset)
        discontinuity = true
    }

    /// The sender delivered valid video: told to the listener at most every 50 ms.
    func reportProgress(now: UInt64) {
        guard let connection, now &- lastProgressReport >= 50_000_000 else { return }
        lastProgressReport = now
        activity.progressed(connection, at: now)
    }
}
