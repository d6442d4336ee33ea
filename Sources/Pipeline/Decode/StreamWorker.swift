import Bitstream
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

/// A stream's decode thread and what other threads may touch of it: the work queue the listeners feed, the
/// backpressure handshake, the snapshot STATUS and the watchdog read. Everything that decodes lives in a
/// `DecodeSession`, which the thread creates and never lets go of: it is not Sendable, so the compiler keeps it
/// (and the decoder, the assembler, the publisher) on that thread.
final class StreamWorker: Sendable {
    enum Work: Sendable {
        case listening
        case connected(ConnectionID, remote: String)
        /// Annex B bytes (a TCP read, or a raw UDP datagram).
        case bytes([UInt8], receivedAt: UInt64, connection: ConnectionID)
        /// What the stream's `RTPReceiver` (on the transport's thread) made of one datagram `bytes` long: packets
        /// in sequence order, a source change, a packet discarded; or nothing yet (held in the reorder window).
        case rtp([RTPOrderedEvent], bytes: Int, receivedAt: UInt64, connection: ConnectionID)
        /// rtsp://: where the client stands, for the ring header (`streamrecvctl status`).
        case sourceStatus(String)
        /// rtsp://: the session's RTP format, from the server's SDP; comes after `.connected`, before the packets.
        case rtpSession(ConnectionID, RTPSessionMedia)
        /// MPEG-TS bytes (srt://: one or more SRT messages).
        case transportStream([UInt8], receivedAt: UInt64, connection: ConnectionID)
        /// udp://: datagrams of this sender were lost before reaching the queue, just here (srt://: SRT messages).
        case datagramsLost(ConnectionID)
        /// udp://: datagrams were lost somewhere from here on (`open`), or that gap lies before here (closed).
        case lossWindow(ConnectionID, open: Bool)
        case disconnected(ConnectionID, reason: DisconnectReason)
        /// The stream ends: the decoder is drained and the ring let go (its name removed with `removingRing`).
        case stop(removingRing: Bool)
    }

    let configuration: StreamConfiguration
    let queue = WorkQueue<Work>()
    /// Arrays for received bytes, recycled between the event loop and the decode thread.
    let bytePool = ByteArrayPool()
    /// Bytes queued for the decode thread above which the listener stops reading from the socket.
    let backlogHighWater: Int
    /// Called (on the decode thread) once the paused listeners may read again.
    private let resumeReading = NIOLockedValueBox<[@Sendable () -> Void]>([])
    /// Read by other threads (status, watchdog); written by the decode thread.
    let snapshot = NIOLockedValueBox(StreamSnapshot())
    /// Tells the stream's RTP receiver (on the network side) that the decoder wants a keyframe of a source, or no
    /// longer does; set by the listener, the RTSP session or the WebRTC server.
    let keyframeSignal = NIOLockedValueBox<(@Sendable (KeyframeWish.Signal) -> Void)?>(nil)
    let metrics: StreamMetrics
    let ringEvents: RingEventReporter
    /// Where the listener learns that the sender is delivering video.
    let activity: SenderActivity
    let logger: Logger
    /// The decode thread's time, and the watchdog's measure of it.
    let clock: DecodeClock
    private let finished = ConditionLock(value: false)
    /// `.connected` items queued and not yet taken (`admitsNewSenders`).
    private let connectsQueued = NIOLockedValueBox(0)

    init(configuration: StreamConfiguration, ringEvents: RingEventReporter,
         activity: SenderActivity, logger: Logger, metrics: StreamMetrics, clock: DecodeClock = .monotonic) {
        self.configuration = configuration
        self.clock = clock
        self.metrics = metrics
        self.ringEvents = ringEvents
        self.activity = activity
        self.logger = logger
        backlogHighWater = max(8 << 20, 2 * configuration.maxAccessUnitBytes)
    }

    /// Starts the decode thread, sending it the stream's ring writer: from here on only that thread has it. The
    /// thread holds this worker until it ends.
    func start(ring: sending FrameRingWriter) {
        runOnDedicatedThread(named: "decode-\(configuration.name)") { [self] in
            DecodeSession(worker: self, ring: ring).run()
            finished.lock()
            finished.unlock(withValue: true)
        }
    }

    /// What every work item counts against the backlog at the least: connects and disconnects are work too, and a
    /// flood of them (a new sender per datagram, taking over) must hold the listener back as bytes do.
    static let leastItemBytes = 256

    func enqueue(_ work: Work) {
        if case .connected = work { connectsQueued.withLockedValue { $0 += 1 } }
        queue.push(work, bytes: Self.leastItemBytes)
    }

    /// New senders' connects queued at most before a datagram listener lets no other one in (a flood of new source
    /// ports, each taking over, would queue a connect and a disconnect per datagram). Bytes do not count here: a
    /// sender that floods junk must not keep the real one from taking over once it delivers no video.
    static let maximumConnectsQueued = 16

    /// Whether a datagram listener may let a new sender in now.
    var admitsNewSenders: Bool { connectsQueued.withLockedValue { $0 } < Self.maximumConnectsQueued }

    /// Decode thread: a `.connected` item was taken.
    func connectTaken() { connectsQueued.withLockedValue { $0 -= 1 } }

    /// Tells the network side what the decoder wants of keyframes; false where nothing listens.
    func signalKeyframe(_ news: KeyframeWish.Signal) -> Bool {
        guard let signal = keyframeSignal.withLockedValue({ $0 }) else { return false }
        signal(news)
        return true
    }

    /// Where the decoder's keyframe wishes go; called from the decode thread, must not block.
    func setKeyframeSignal(_ signal: (@Sendable (KeyframeWish.Signal) -> Void)?) {
        keyframeSignal.withLockedValue { $0 = signal }
    }

    /// Queues received bytes (Annex B, MPEG-TS). Returns false when the backlog is over the high-water mark: the caller must stop
    /// reading and call `whenDrained` to learn when to resume.
    func enqueue(bytes: [UInt8], receivedAt time: UInt64, connection: ConnectionID) -> Bool {
        let work: Work
        switch configuration.source.transport {
        case .srt: work = .transportStream(bytes, receivedAt: time, connection: connection)
        case .tcp, .udp: work = .bytes(bytes, receivedAt: time, connection: connection)
        case .rtp, .rtsp, .whip:
            assertionFailure("RTP transports queue what their receiver put in order: enqueue(_:bytes:receivedAt:connection:)")
            return true
        }
        return queue.push(work, bytes: bytes.count) < backlogHighWater
    }

    /// Queues what the stream's RTP receiver made of a datagram `bytes` long (rtp://, rtsp://, whip). Returns false
    /// when the backlog is over the high-water mark, as `enqueue(bytes:)`.
    func enqueue(_ events: [RTPOrderedEvent], bytes: Int, receivedAt time: UInt64, connection: ConnectionID) -> Bool {
        queue.push(.rtp(events, bytes: bytes, receivedAt: time, connection: connection), bytes: max(bytes, Self.leastItemBytes)) < backlogHighWater
    }

    /// Whether the decode thread is keeping up; datagrams cannot be pushed back, so they are dropped when not.
    var acceptsMoreBytes: Bool { queue.waitingBytes < backlogHighWater }

    /// How far past the high-water mark a pushed-back connection's bytes already read still go in: a read, and what
    /// the socket buffers hold on both sides, which NIO reads at once, paused or not, when the server closes the
    /// connection (it reads on to the end of the stream): about 10 MB with Debian's tcp_rmem and tcp_wmem limits.
    static let alreadyReadAllowance = 16 << 20

    /// Whether bytes already read from a connection that is pushed back (interleaved RTSP over TCP: its reads pause
    /// over the high-water mark) may still be queued. Only past the mark and `alreadyReadAllowance` is anything
    /// dropped (counted as lost): the last bound on a server that does not let itself be held back.
    var acceptsBytesAlreadyRead: Bool { queue.waitingBytes < backlogHighWater + Self.alreadyReadAllowance }

    /// `resume` runs once the backlog has drained to half the high-water mark: on the decode thread when it gets
    /// there, or at once if it already has (the thread may have drained the queue before this was registered).
    /// Every connection paused meanwhile is resumed: one ending while the next pauses must not take its turn.
    func whenDrained(_ resume: @escaping @Sendable () -> Void) {
        resumeReading.withLockedValue { $0.append(resume) }
        if queue.waitingBytes < backlogHighWater / 2 { takeResumes().forEach { $0() } }
    }

    /// Decode thread: `remaining` bytes are still queued; a paused listener resumes below half the high-water mark.
    func drained(to remaining: Int) {
        if remaining < backlogHighWater / 2 { takeResumes().forEach { $0() } }
    }

    /// The pending resume callbacks, each at most once.
    private func takeResumes() -> [@Sendable () -> Void] {
        resumeReading.withLockedValue { value in
            defer { value = [] }
            return value
        }
    }

    /// Stops after everything queued before it, draining the decoder and letting go of the ring (removing its name
    /// with `removingRing`); returns once the thread has finished.
    func stopAndWait(removingRing: Bool = false) {
        queue.push(.stop(removingRing: removingRing))
        finished.lock(whenValue: true)
        finished.unlock()
    }

    /// False when the decode thread has been inside one work item for longer than `limit`: it is wedged
    /// (a thread waiting for work is healthy however long it waits).
    func isHealthy(stallLimitNanoseconds limit: UInt64) -> Bool {
        guard let since = snapshot.withLockedValue({ $0.busySince }) else { return true }
        let now = clock.now()
        return now < since || now - since < limit
    }
}
