import Bitstream
import Decoding
import FrameFormats
import Foundation
import Glibc
import Logging
import NIOConcurrencyHelpers
import NIOCore
import SharedFrames

/// Identifies one sender connection.
typealias ConnectionID = UInt64

/// What a stream is doing, for STATUS lines and the watchdog; written by the decode thread.
struct StreamSnapshot: Sendable {
    var state = "starting"
    var codec: String?
    var size: String?
    var path = "software"
    var framesPublished: UInt64 = 0
    /// When the decode thread took the work item it is still processing; nil while it waits for work.
    var busySince: UInt64?
}

/// The per-stream decode thread: split → assemble → decode → publish, all on one dedicated thread (never on
/// Swift's cooperative pool, never on the network event loop). Fed through a `WorkQueue` by the listener.
final class StreamWorker: @unchecked Sendable {
    enum Work {
        case listening
        case connected(ConnectionID, remote: String)
        /// Annex B bytes (a TCP read, or a raw UDP datagram).
        case bytes([UInt8], receivedAt: UInt64, connection: ConnectionID)
        /// One RTP packet.
        case rtp([UInt8], receivedAt: UInt64, connection: ConnectionID)
        case disconnected(ConnectionID, reason: String)
        /// Queued by the sender's event loop after it has handled every read that was ready (`requestIdleBarrier`).
        case idleBarrier(UInt64)
        case stop
    }

    /// Metadata of an access unit kept until its frame comes out of the decoder (matched by pts).
    private struct PendingFrame {
        var timeFirstByte: UInt64
        var timeComplete: UInt64
        var keyframe: Bool
        var orientation: DisplayOrientation?
        var format: SequenceFormat?
        var afterLoss: Bool
        /// rtp://: the access unit's RTP timestamp, unwrapped.
        var mediaTimestamp: Int64?
    }

    let configuration: StreamConfiguration
    private let queue = WorkQueue<Work>()
    /// Arrays for received bytes, recycled between the event loop and this thread.
    let bytePool = ByteArrayPool()
    /// Reused for every chunk, NAL unit and access unit: nothing here allocates per frame in steady state.
    private var nalUnitScratch: [NALUnit] = []
    private var eventScratch: [AssemblerEvent] = []
    private var rtpEventScratch: [RTPDepacketizerEvent] = []
    /// The layout of the last frame published (it owns an array: rebuilt only when the format changes).
    private var lastLayout: FrameLayout?
    private var lastPublishedSize = (width: 0, height: 0)
    /// Bytes queued for this thread above which the listener stops reading from the socket.
    let backlogHighWater: Int
    /// Called (on this thread) once a paused listener may read again.
    private let resumeReading = NIOLockedValueBox<(@Sendable () -> Void)?>(nil)
    /// Read by other threads (status, watchdog); updated by the decode thread.
    let snapshot = NIOLockedValueBox(StreamSnapshot())
    private let metrics: StreamMetrics
    /// Frames published since `fpsWindowStart`, for the frames-per-second gauge.
    private var fpsWindowFrames = 0
    private var fpsWindowStart: UInt64 = 0
    private var logger: Logger
    private var warnings: RateLimitedLogger
    private var writer: FrameRingWriter
    private var splitter: AnnexBSplitter
    private var assembler: AccessUnitAssembler
    /// For `rtp://` streams: NAL units come from RTP packets instead of the Annex B splitter.
    private var depacketizer: RTPDepacketizer?
    private var reorder: RTPReorderBuffer?
    /// Data was lost since the last random-access point: frames decoded now follow `loss_policy`.
    private var lostSinceKeyframe = false
    /// When the ring's name was last checked (`ringIsUsable`).
    private var lastNameCheck: UInt64 = 0
    /// Sends an RTCP datagram to the current RTP sender (set by the listener when `keyframe_request` is on).
    private let feedbackSender = NIOLockedValueBox<(@Sendable ([UInt8]) -> Void)?>(nil)
    private var lastKeyframeRequest: UInt64?
    private var firSequenceNumber: UInt8 = 0
    /// This receiver's SSRC in RTCP feedback.
    private let rtcpSSRC = UInt32.random(in: 1...UInt32.max)
    private var decoder: StreamDecoder!
    private var connection: ConnectionID?
    private var bytesThisConnection: Int64 = 0
    /// (stream offset, arrival time, unwrapped RTP timestamp) of recent chunks or packets, to date each access
    /// unit's first byte and give it its packet's timestamp.
    private var arrivals: [(offset: Int64, time: UInt64, mediaTimestamp: Int64?)] = []
    /// The last RTP timestamp extended to 64 bits (RTP's 32 bits wrap after 13 h at 90 kHz).
    private var lastMediaTimestamp: Int64?
    private var pending: [Int64: PendingFrame] = [:]
    private var nextPTS: Int64 = 0
    private var orientation: DisplayOrientation?
    private var discontinuity = true
    /// tcp:// and udp://: when to close an access unit on a quiet transport; nil when idle_flush = "off" or rtp://.
    private var idleFlush: IdleFlushPolicy?
    /// Arrival time of the newest bytes.
    private var lastArrival: UInt64 = 0
    /// Set by an idle flush until the next bytes show whether it was right: when the bytes before it arrived,
    /// and the pts given to the access unit it closed.
    private var idleFlushed: (after: UInt64, pts: Int64?)?
    /// Runs a closure on the current sender's event loop (set by the listener).
    private let senderEventLoop = NIOLockedValueBox<(any EventLoop)?>(nil)
    /// The idle-flush barrier in flight, if any: its token. Bytes arriving meanwhile cancel it.
    private var pendingBarrier: UInt64?
    private var barrierCount: UInt64 = 0
    /// The token the barrier task carries, and the task itself, made once: a closure per flush would allocate.
    private let barrierToken = NIOLockedValueBox<UInt64>(0)
    private lazy var barrierTask: @Sendable () -> Void = { [queue, barrierToken] in
        queue.push(.idleBarrier(barrierToken.withLockedValue { $0 }))
    }
    private var thread: Thread?
    private let finished = NSCondition()
    private var isFinished = false
    /// Fault injection, for testing the watchdog: `STREAMRECVD_FAULT_STALL_DECODE_SECONDS=N` makes the decode
    /// thread stall N seconds when the first sender connects, as a wedged decoder would.
    private var injectedStall = getenv("STREAMRECVD_FAULT_STALL_DECODE_SECONDS").flatMap { Double(String(cString: $0)) }

    init(configuration: StreamConfiguration, writer: FrameRingWriter, logger: Logger, metrics: StreamMetrics) {
        self.configuration = configuration
        self.metrics = metrics
        self.writer = writer
        self.logger = logger
        warnings = RateLimitedLogger(logger: logger)
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

    /// The event loop reading from the sender: an idle flush first sends it a barrier (`Work.idleBarrier`).
    func setIdleBarrier(on eventLoop: any EventLoop) {
        senderEventLoop.withLockedValue { $0 = eventLoop }
    }

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
            let next = queue.pop(deadline: pendingBarrier == nil ? idleFlushDeadline() : nil)
            snapshot.withLockedValue { $0.busySince = MonotonicClock.nanoseconds() }
            guard let (work, remaining) = next else {
                requestIdleBarrier()
                continue
            }
            if remaining < backlogHighWater / 2 { takeResume()?() }
            switch work {
            case .listening:
                setState(.waiting)
            case .connected(let id, let remote):
                begin(id, remote: remote)
            case .bytes(let bytes, let time, let id):
                if id == connection {
                    pendingBarrier = nil
                    receive(bytes, at: time)
                }
                bytePool.recycle(bytes)
            case .idleBarrier(let token):
                // Every read the event loop had ready went before this: if none came, the transport is quiet.
                guard token == pendingBarrier else { continue }
                pendingBarrier = nil
                if idleFlushDeadline() != nil { flushIdleTransport() }
            case .rtp(let bytes, let time, let id):
                if id == connection { receivePacket(bytes, at: time) }
                bytePool.recycle(bytes)
            case .disconnected(let id, let reason):
                guard id == connection else { continue }
                end(reason: reason)
                setState(.waiting)
            case .stop:
                if connection != nil { end(reason: "daemon stopping") }
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
        if connection != nil { end(reason: "taken over by \(remote)") }
        connection = id
        bytesThisConnection = 0
        arrivals.removeAll(keepingCapacity: true)
        // A new connection is a new byte stream: fresh framing and (with codec = auto) fresh detection. The
        // decoder stays: identical parameter sets from the new sender cost no recreation.
        splitter = AnnexBSplitter(maximumNALUnitSize: configuration.maxAccessUnitBytes)
        assembler = AccessUnitAssembler(codec: configuration.codec, maximumAccessUnitSize: configuration.maxAccessUnitBytes)
        if configuration.listen.transport == .rtp, let codec = configuration.codec {
            depacketizer = RTPDepacketizer(
                codec: codec, payloadType: configuration.rtpPayloadType, maximumNALUnitSize: configuration.maxAccessUnitBytes)
            reorder = RTPReorderBuffer(window: configuration.rtpReorderWindow)
        }
        lostSinceKeyframe = false
        lastMediaTimestamp = nil
        // Per connection: a new sender may come over a different path.
        if configuration.idleFlush && configuration.listen.transport != .rtp {
            idleFlush = IdleFlushPolicy(minimum: UInt64(configuration.idleFlushMinimum * 1e9))
        }
        idleFlushed = nil
        pendingBarrier = nil
        writer.setPTSClockRate(configuration.listen.transport == .rtp ? configuration.rtpClockRate : 0)
        discontinuity = true
        writer.count(\.connections)
        metrics.connections.increment()
        setState(.streaming)
        logger.info("sender connected", metadata: ["remote": "\(remote)"])
    }

    private func end(reason: String) {
        var held: [RTPPacket] = []
        reorder?.flush { held.append($0) }
        for packet in held { depacketize(packet, at: MonotonicClock.nanoseconds()) }
        splitter.flush { nalUnitScratch.append($0) }
        processCollectedUnits()
        endAccessUnit()
        decoder.drain { publish($0) }
        pending.removeAll()
        pendingBarrier = nil
        metrics.framesPerSecond.record(0)
        fpsWindowStart = 0
        logger.info("sender disconnected: \(reason)", metadata: [
            "bytes": "\(bytesThisConnection)", "access_units": "\(assembler.statistics.accessUnits)",
        ])
        connection = nil
    }

    /// The ring's state and the snapshot's, together.
    private func setState(_ state: StreamState) {
        writer.setState(state)
        snapshot.withLockedValue { $0.state = state.description }
    }

    // MARK: - Bytes to access units

    private func receive(_ bytes: [UInt8], at time: UInt64) {
        let pendingUnit = splitter.completeLookingUnitHeader
        let previousArrival = lastArrival
        lastArrival = time
        arrivals.append((splitter.statistics.bytesIn, time, nil))
        if arrivals.count > 4096 { arrivals.removeFirst(2048) }
        bytesThisConnection += Int64(bytes.count)
        writer.count(\.bytesReceived, UInt64(bytes.count))
        metrics.bytesReceived.increment(by: Int64(bytes.count))
        let before = splitter.statistics
        splitter.append(bytes) { nalUnitScratch.append($0) }
        let after = splitter.statistics
        metrics.discardedBytes.increment(by: after.discardedBytes - before.discardedBytes)
        if after.oversizedNALUnits > before.oversizedNALUnits {
            metrics.defect("oversized_nal_unit", count: after.oversizedNALUnits - before.oversizedNALUnits)
            warnings.log(.warning, key: "oversized-nal", now: time,
                         "NAL unit over \(configuration.maxAccessUnitBytes) bytes discarded to the next start code")
        }
        let continuations = after.continuationsAfterFlush - before.continuationsAfterFlush
        if let flushed = idleFlushed, bytes.contains(where: { $0 != 0 }) {
            idleFlushed = nil
            if continuations > 0 {
                prematureIdleFlush(gap: time &- flushed.after, pts: flushed.pts, now: time)
            } else {
                idleFlush?.flushWasRight()
            }
        } else if pendingUnit != nil, !AnnexBSplitter.startsWithStartCode(bytes[...]), time > previousArrival {
            // The bytes went on with a unit that looked complete: a gap inside a NAL unit the interval must cover.
            idleFlush?.continued(afterGap: time - previousArrival)
        }
        if after.discardedBytes > before.discardedBytes && after.oversizedNALUnits == before.oversizedNALUnits
            && continuations == 0 {
            warnings.log(.warning, key: "garbage", now: time, "bytes outside any NAL unit discarded (\(after.discardedBytes) so far)")
        }
        if after.emptyNALUnits > before.emptyNALUnits {
            metrics.defect("empty_nal_unit", count: after.emptyNALUnits - before.emptyNALUnits)
            warnings.log(.warning, key: "empty-nal", now: time, "start codes with no NAL unit between them skipped (\(after.emptyNALUnits) so far)")
        }
        processCollectedUnits()
        // The next access unit's first bytes are in: close the one in progress now, not once that NAL unit is whole.
        if let prefix = splitter.unitInProgress, assembler.startsAccessUnit(prefix) { endAccessUnit() }
    }

    // MARK: - Idle flush

    /// When to close the access unit in progress if no bytes come: after a complete-looking unit that can end a
    /// picture, the policy's interval after the last bytes arrived (and never at once: the event loop may hold
    /// bytes it has not handed over yet). Nil: wait for work without a deadline.
    private func idleFlushDeadline() -> UInt64? {
        guard let policy = idleFlush, connection != nil, let header = splitter.completeLookingUnitHeader,
              let codec = assembler.codec else { return nil }
        let endsPicture: Bool
        switch codec {
        case .h264:
            let type = header & 0x1f
            endsPicture = (1...5).contains(type) || (assembler.hasPictureInProgress && type == 12)  // slice; filler
        case .h265:
            let type = (header >> 1) & 0x3f
            endsPicture = type < 32 || (assembler.hasPictureInProgress && (type == 38 || type == 40))  // VCL; FD, suffix SEI
        }
        guard endsPicture else { return nil }
        return max(lastArrival + policy.interval, MonotonicClock.nanoseconds() + policy.minimum / 4)
    }

    /// The deadline passed with no bytes. The sender's event loop may still hold bytes the kernel has (it may not
    /// have run: two busy cores): a barrier through it comes back after every read that was ready, and only then,
    /// if no bytes came, is the access unit flushed. One event-loop round trip, tens of microseconds when idle.
    private func requestIdleBarrier() {
        guard let eventLoop = senderEventLoop.withLockedValue({ $0 }) else {
            flushIdleTransport()
            return
        }
        barrierCount &+= 1
        let token = barrierCount
        pendingBarrier = token
        barrierToken.withLockedValue { $0 = token }
        eventLoop.execute(barrierTask)
    }

    /// The transport went quiet after a complete-looking NAL unit: hand it and its access unit on now.
    private func flushIdleTransport() {
        splitter.flush { nalUnitScratch.append($0) }
        processCollectedUnits()
        let firstPTS = nextPTS
        endAccessUnit()
        idleFlushed = (lastArrival, nextPTS > firstPTS ? firstPTS : nil)
        metrics.idleFlushes.increment()
    }

    private func recordIdleFlushInterval() {
        if let interval = idleFlush?.interval { metrics.idleFlushInterval.record(Double(interval) / 1e9) }
    }

    /// Bytes after an idle flush continued the unit it closed (or a slice continued its picture): the sender
    /// paused inside a frame for `gap`. The interval backs off; the frame is damaged, and so are those that
    /// refer to it until the next keyframe.
    private func prematureIdleFlush(gap: UInt64, pts: Int64?, now: UInt64) {
        idleFlush?.flushWasPremature(gap: gap)
        recordIdleFlushInterval()
        metrics.defect("premature_idle_flush")
        lostSinceKeyframe = true
        discontinuity = true
        if let pts, pending[pts] != nil { pending[pts]!.afterLoss = true }
        let interval = Double(idleFlush?.interval ?? 0) / 1e6
        warnings.log(.warning, key: "premature-flush", now: now,
                     "the sender paused \(String(format: "%.1f", Double(gap) / 1e6)) ms inside a NAL unit after an idle flush: frames flagged corrupt until the next keyframe; idle interval now \(String(format: "%.2f", interval)) ms")
    }

    /// One RTP packet: depacketized into NAL units; the marker bit ends the access unit at once.
    private func receivePacket(_ datagram: [UInt8], at time: UInt64) {
        bytesThisConnection += Int64(datagram.count)
        writer.count(\.bytesReceived, UInt64(datagram.count))
        metrics.bytesReceived.increment(by: Int64(datagram.count))
        let packet: RTPPacket
        do {
            packet = try RTPPacket(parsing: datagram[...])
        } catch {
            warnings.log(.warning, key: "rtp-header", now: time, "datagram is not RTP: \(error); dropped")
            return
        }
        var ordered: [RTPPacket] = []
        reorder?.push(packet) { ordered.append($0) }
        for packet in ordered { depacketize(packet, at: time) }
    }

    /// `timestamp` extended to 64 bits: the nearest value to the previous one with the same low 32 bits.
    private func unwrap(_ timestamp: UInt32) -> Int64 {
        guard let last = lastMediaTimestamp else {
            lastMediaTimestamp = Int64(timestamp)
            return Int64(timestamp)
        }
        let value = last + Int64(Int32(bitPattern: timestamp &- UInt32(truncatingIfNeeded: last)))
        lastMediaTimestamp = value
        return value
    }

    private func depacketize(_ packet: RTPPacket, at time: UInt64) {
        // Recorded in sequence order, at the depacketizer's offset: an access unit's first byte names its packet.
        arrivals.append((depacketizer?.offset ?? 0, time, unwrap(packet.timestamp)))
        if arrivals.count > 4096 { arrivals.removeFirst(2048) }
        depacketizer?.push(packet) { rtpEventScratch.append($0) }
        defer { rtpEventScratch.removeAll(keepingCapacity: true) }
        for index in rtpEventScratch.indices {
            switch rtpEventScratch[index] {
            case .nalUnit(let unit, _):
                push(unit)
            case .endOfAccessUnit:
                endAccessUnit()
            case .packetsLost(let count):
                metrics.rtpPacketsLost.increment(by: Int64(count))
                discontinuity = true
                lostSinceKeyframe = true
                warnings.log(.warning, key: "rtp-loss", now: time, "\(count) RTP packet(s) lost (\(depacketizer?.statistics.lostPackets ?? 0) so far)")
            case .dropped(let reason):
                metrics.rtpPayloadsDropped.increment()
                // A duplicate or another payload type's packet takes nothing from the video; other drops leave a hole.
                if reason != .duplicate && reason != .wrongPayloadType { lostSinceKeyframe = true }
                warnings.log(.warning, key: "rtp-\(reason.rawValue)", now: time, "RTP payload dropped: \(reason.rawValue)")
            }
        }
        // Asked again every keyframe_request_interval until a keyframe arrives: the request itself may be lost.
        if lostSinceKeyframe { requestKeyframe(mediaSSRC: packet.ssrc, now: time) }
    }

    /// RTCP PLI or FIR to the sender, at most once per `keyframe_request_interval`.
    private func requestKeyframe(mediaSSRC: UInt32, now: UInt64) {
        guard configuration.keyframeRequest != .none, let send = feedbackSender.withLockedValue({ $0 }) else { return }
        if let last = lastKeyframeRequest, now >= last, now - last < UInt64(configuration.keyframeRequestInterval * 1e9) { return }
        lastKeyframeRequest = now
        let kind: RTCPFeedback.Kind
        if configuration.keyframeRequest == .fir {
            firSequenceNumber &+= 1
            kind = .fullIntraRequest(sequenceNumber: firSequenceNumber)
        } else {
            kind = .pictureLossIndication
        }
        send(RTCPFeedback.keyframeRequest(kind, senderSSRC: rtcpSSRC, mediaSSRC: mediaSSRC))
        metrics.keyframeRequests.increment()
        warnings.log(.info, key: "keyframe-request", now: now,
                     "asked the sender for a keyframe (RTCP \(configuration.keyframeRequest.rawValue.uppercased()))")
    }

    /// The NAL units the splitter put in `nalUnitScratch`, to the assembler; the scratch array is emptied (its
    /// views of the splitter's carry buffer must be gone before the next append).
    private func processCollectedUnits() {
        for index in nalUnitScratch.indices { push(nalUnitScratch[index]) }
        nalUnitScratch.removeAll(keepingCapacity: true)
    }

    private func push(_ unit: NALUnit) {
        assembler.push(unit) { eventScratch.append($0) }
        handleCollectedEvents()
    }

    /// Closes the access unit in progress (transport idle, RTP marker, next unit's first bytes, end of input).
    private func endAccessUnit() {
        assembler.endAccessUnit { eventScratch.append($0) }
        handleCollectedEvents()
    }

    private func handleCollectedEvents() {
        for index in eventScratch.indices { handle(eventScratch[index]) }
        // Emptied only now: the access units in it are decoded, so the assembler gets its buffers back.
        eventScratch.removeAll(keepingCapacity: true)
    }

    /// The chunk or packet that carried byte `offset` of the stream.
    private func arrival(ofOffset offset: Int64) -> (time: UInt64, mediaTimestamp: Int64?) {
        for arrival in arrivals.reversed() where arrival.offset <= offset { return (arrival.time, arrival.mediaTimestamp) }
        return (arrivals.first?.time ?? MonotonicClock.nanoseconds(), arrivals.first?.mediaTimestamp)
    }

    private func handle(_ event: AssemblerEvent) {
        switch event {
        case .codecDetected(let codec):
            writer.setCodec(codec.rawValue)
            snapshot.withLockedValue { $0.codec = codec.rawValue }
            logger.info("codec detected", metadata: ["codec": "\(codec.rawValue)"])
        case .parameterSet(let set):
            describe(set)
        case .problem(let problem):
            if problem.kind == .prematureEnd, idleFlush != nil {
                // A slice went on with the picture an idle flush had closed (the pause fell between slices).
                let gap = 2 * (idleFlush?.interval ?? 0)
                prematureIdleFlush(gap: gap, pts: nil, now: MonotonicClock.nanoseconds())
            }
            metrics.defect(problem.kind.rawValue)
            warnings.log(.warning, key: "problem-\(problem.kind.rawValue)", now: MonotonicClock.nanoseconds(),
                         "stream defect: \(problem)")
        case .accessUnit(let unit):
            decode(unit)
        }
    }

    private func describe(_ set: ParameterSetEvent) {
        var metadata: Logger.Metadata = ["codec": "\(set.codec.rawValue)", "id": "\(set.id)"]
        if let format = set.format {
            metadata["size"] = "\(format.width)x\(format.height)"
            metadata["chroma"] = "\(format.chromaFormat)"
            metadata["bit_depth"] = "\(format.bitDepthLuma)"
            metadata["fps"] = "\(format.frameRate?.description ?? "?")"
            metadata["reorder"] = "\(format.reorderDepth.map(String.init) ?? "?")"
        }
        if let changes = set.changes {
            metadata["changes"] = "\(changes.isEmpty ? "content" : changes.description)"
        }
        logger.log(level: set.kind == .pps ? .debug : .info,
                   "\(set.kind.rawValue.uppercased()) \(set.changes == nil ? "received" : "changed")", metadata: metadata)
    }

    // MARK: - Decoding and publishing

    private func decode(_ unit: AccessUnit) {
        let now = MonotonicClock.nanoseconds()
        idleFlush?.accessUnitCompleted()
        writer.count(\.accessUnits)
        metrics.accessUnits.increment()
        if let format = unit.format, format.width > configuration.maxWidth || format.height > configuration.maxHeight {
            drop(.tooLarge)
            warnings.log(.warning, key: "too-large", now: now,
                         "frame of \(format.width)x\(format.height) refused: larger than max_width × max_height (\(configuration.maxWidth)x\(configuration.maxHeight))")
            return
        }
        if let change = unit.displayOrientation { orientation = change }
        if unit.isKeyframe {
            lostSinceKeyframe = false
            lastKeyframeRequest = nil
        }
        let pts = nextPTS
        nextPTS += 1
        let carrier = arrival(ofOffset: unit.streamOffset)
        pending[pts] = PendingFrame(
            timeFirstByte: carrier.time, timeComplete: now, keyframe: unit.isKeyframe, orientation: orientation,
            format: unit.format, afterLoss: lostSinceKeyframe, mediaTimestamp: carrier.mediaTimestamp)
        if pending.count > 512 {
            // Access units that produced no frame (undecodable, dropped by the decoder) leave stale entries.
            for key in pending.keys where key < pts - 256 { pending.removeValue(forKey: key) }
        }
        let input = DecoderInput(
            codec: unit.codec, data: unit.data, pts: pts, isRandomAccess: unit.isKeyframe,
            parameterSets: unit.parameterSets, reorderDepth: unit.format?.reorderDepth,
            reorderDepthIsSignalled: unit.format?.reorderDepthIsSignalled ?? false,
            decodedPictureBufferFrames: unit.format?.decodedPictureBufferFrames ?? 16,
            undecodable: unit.hasPicture && unit.format == nil)
        decoder.decode(input) { publish($0) }
    }

    private func publish(_ frame: DecodedFrame) {
        let decodedAt = MonotonicClock.nanoseconds()
        writer.count(\.framesDecoded)
        metrics.framesDecoded.increment()
        guard let format = frame.outputFormat(configuration.decoder.output) else {
            drop(.pixelFormat)
            warnings.log(.error, key: "pixel-format", now: decodedAt,
                         "frame in pixel format \(frame.decoderPixelFormatName) cannot be published; dropped")
            return
        }
        let meta = pending.removeValue(forKey: frame.pts)
        if meta?.afterLoss == true && configuration.lossPolicy == .keyframe {
            drop(.withheld)
            warnings.log(.warning, key: "withheld", now: decodedAt, "frame after lost data withheld until the next keyframe (loss_policy = keyframe)")
            return
        }
        var metadata = FrameMetadata()
        var flags: FrameFlags = []
        if meta?.afterLoss == true { flags.insert(.corrupt) }
        if meta?.keyframe ?? frame.isKeyframe { flags.insert(.keyframe) }
        if frame.isCorrupt { flags.insert(.corrupt) }
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
        guard ringIsUsable(now: decodedAt) else {
            drop(.ringUnavailable)
            return
        }
        if lastLayout.map({ $0.format != format || $0.width != frame.width || $0.height != frame.height }) ?? true {
            lastLayout = FrameLayout(format: format, width: frame.width, height: frame.height)
        }
        let layout = lastLayout!
        var failure: DecoderError?
        let outcome = writer.publish(layout: layout, metadata: metadata) { destination, layout in
            do throws(DecoderError) { try frame.write(into: destination, layout: layout) } catch { failure = error }
        }
        if let failure {
            warnings.log(.error, key: "write", now: decodedAt, "frame could not be written: \(failure)")
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
        case .refused(let needed, let capacity):
            drop(.slotCapacity)
            warnings.log(.error, key: "slot-capacity", now: decodedAt,
                         "\(frame.width)x\(frame.height) \(format) frame needs \(needed) bytes, slots hold \(capacity): dropped (raise max_width/max_height)")
        }
    }

    private func drop(_ reason: StreamMetrics.DropReason) {
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
            recordIdleFlushInterval()
            fpsWindowStart = now
            fpsWindowFrames = 0
        }
    }

    /// The ring can take a frame: not truncated (checked every frame: a truncated mapping faults) and still
    /// reachable by name (checked once a second). Otherwise it is re-created.
    private func ringIsUsable(now: UInt64) -> Bool {
        if !writer.isIntact { return recreateWriter(because: "was truncated by another process") }
        if now >= lastNameCheck + 1_000_000_000 {
            lastNameCheck = now
            if !writer.isStillNamed { return recreateWriter(because: "was removed or replaced by another process") }
        }
        return true
    }

    /// Someone else damaged the shm object: make a new one rather than fault on, or hide behind, the old.
    private func recreateWriter(because reason: String) -> Bool {
        metrics.ringRecreations.increment()
        logger.error("shared-memory object /dev/shm/\(configuration.shmName) \(reason); re-creating it")
        do {
            writer.unlink()
            writer = try FrameRingWriter(configuration: writer.configuration)
            setState(connection == nil ? .waiting : .streaming)
            if let codec = assembler.codec { writer.setCodec(codec.rawValue) }
            writer.setPTSClockRate(configuration.listen.transport == .rtp ? configuration.rtpClockRate : 0)
            return true
        } catch {
            logger.error("cannot re-create /dev/shm/\(configuration.shmName): \(error)")
            return false
        }
    }

    // MARK: - Decoder events

    private func note(_ event: StreamDecoderEvent) {
        let now = MonotonicClock.nanoseconds()
        switch event {
        case .pathSelected(let summary):
            logger.notice("\(summary)")
        case .created(let recreation, let hardware, let lowDelay, let threading, let nanoseconds):
            metrics.decoderCreation.recordNanoseconds(Int64(nanoseconds))
            if recreation {
                writer.count(\.decoderRecreations)
                metrics.decoderRecreations.increment()
            }
            metrics.hardware.record(hardware == nil ? 0 : 1)
            snapshot.withLockedValue { $0.path = hardware ?? "software" }
            logger.info(recreation ? "decoder recreated for new parameter sets" : "decoder created", metadata: [
                "path": "\(hardware ?? "software")", "low_delay": "\(lowDelay)", "threads": "\(threading)",
                "creation_ms": "\(String(format: "%.2f", Double(nanoseconds) / 1e6))",
            ])
            discontinuity = discontinuity || recreation
        case .creationFailed(let error, let attempt):
            logger.error("decoder creation failed (attempt \(attempt) of \(StreamDecoder.maximumCreationAttempts)): \(error)")
        case .decodeFailed(let error, let consecutive):
            writer.count(\.decodeErrors)
            metrics.decodeErrors.increment()
            warnings.log(.warning, key: "decode", now: now, "decode error (\(consecutive) in a row): \(error)")
        case .reset(let failures):
            setState(.degraded)
            discontinuity = true
            logger.error("\(failures) consecutive decode failures: decoder reset, waiting for the next keyframe")
        case .fellBackToSoftware(let reason):
            logger.warning("hardware decoding failed on the first keyframe (\(reason)): falling back to software")
        case .waitingForKeyframe:
            logger.info("waiting for a keyframe before decoding")
        }
        if case .created = event, connection != nil { setState(.streaming) }
    }
}
