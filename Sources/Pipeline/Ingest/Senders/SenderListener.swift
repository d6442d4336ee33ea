import CoreMetrics
import Bitstream
import Decoding
import Glibc
import Logging
import NIOCore
import NIOPosix
import SharedFrames

/// Forwards a TCP sender's bytes to the stream's decode thread; closes the connection once it has delivered no
/// video for `idle_timeout` (bytes that make no valid NAL unit do not count).
final class SenderHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let id: ConnectionID
    private let worker: StreamWorker
    private let registry: SenderRegistry
    private let metrics: StreamMetrics
    private let logger: Logger
    private var reason = DisconnectReason.closedBySender
    private var idleCheck: RepeatedTask?
    /// Reads are stopped until the decode thread drains its backlog (one resume asked for per pause).
    private var readsPaused = false

    init(id: ConnectionID, worker: StreamWorker, registry: SenderRegistry, metrics: StreamMetrics, logger: Logger) {
        self.id = id
        self.worker = worker
        self.registry = registry
        self.metrics = metrics
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let timeout = registry.deadlines.idleTimeout
        guard timeout > 0 else { return }
        let channel = context.channel
        let period = TimeAmount.nanoseconds(Int64(min(1_000_000_000, max(50_000_000, timeout / 4))))
        // The handler lives on its channel's event loop: what runs later reaches it only through the loop.
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        idleCheck = context.eventLoop.scheduleRepeatedTask(initialDelay: period, delay: period) { _ in
            bound.value.checkIdle(timeout: timeout, channel: channel)
        }
    }

    private func checkIdle(timeout: UInt64, channel: Channel) {
        guard let quiet = registry.quiet(id, now: MonotonicClock.nanoseconds()), quiet > timeout else { return }
        reason = .idle(seconds: Double(quiet) / 1e9)
        metrics.idleDisconnects.increment()
        channel.close(promise: nil)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        idleCheck?.cancel()
        idleCheck = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        worker.enqueue(.connected(id, remote: context.remoteAddress?.description ?? "unknown"))
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = worker.bytePool.copy(unwrapInboundIn(data))
        guard !worker.enqueue(bytes: bytes, receivedAt: MonotonicClock.nanoseconds(), connection: id), !readsPaused else { return }
        // The decode thread is behind: stop reading; TCP flow control holds the sender back until it catches up.
        // Once a pause: the reads NIO still delivers meanwhile (it drains a closed connection) add no resume.
        readsPaused = true
        let channel = context.channel
        _ = channel.setOption(ChannelOptions.autoRead, value: false)
        logger.debug("decoder behind by \(worker.backlogHighWater) bytes: pausing reads from the sender")
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        worker.whenDrained {
            channel.eventLoop.execute {
                bound.value.readsPaused = false
                _ = channel.setOption(ChannelOptions.autoRead, value: true)
            }
        }
    }

    /// Acknowledge at once, every time: Linux delays an ACK up to 40 ms, and a sender that writes without
    /// TCP_NODELAY (FFmpeg's CLI, most programs) holds a frame's last partial segment back until its earlier bytes
    /// are acknowledged (Nagle). Quick-ACK mode ends by itself, so it is set again after every batch of reads.
    func channelReadComplete(context: ChannelHandlerContext) {
        _ = try? context.channel.syncOptions?.setOption(Self.quickAck, value: 1)
        context.fireChannelReadComplete()
    }

    private static let quickAck = ChannelOptions.Types.SocketOption(
        level: NIOBSDSocket.OptionLevel.tcp, name: .init(rawValue: TCP_QUICKACK))

    func channelInactive(context: ChannelHandlerContext) {
        // The slot lets go of a connection only once it has closed: one that is no longer the sender as it closes
        // was closed by a takeover, not by its sender.
        if case .closedBySender = reason, !registry.holds(id) { reason = .takenOver }
        worker.enqueue(.disconnected(id, reason: reason))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        reason = .connectionError("\(error)")
        context.close(promise: nil)
    }
}

/// The datagram side (udp:// and rtp://). The first allowed source address is the sender; datagrams from other
/// sources are ignored (`second_sender = "refuse"`) while it delivers video, and take over once it has delivered
/// none for a moment (a sender that restarted from a new port) or with `second_sender = "takeover"`. A sender
/// that delivers no video for `idle_timeout` is let go; datagrams from others do not keep it. udp:// carries no
/// sequence numbers, so every datagram lost on the way in (the kernel's receive buffer overflowed, or the decode
/// thread was behind) is reported to the decode thread, which flags the frames it damaged. For rtp:// with
/// `keyframe_request`, RTCP feedback goes back to the sender from the same socket.
final class DatagramSenderHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    private let worker: StreamWorker
    private let configuration: StreamConfiguration
    private let metrics: StreamMetrics
    private var deadlines: SenderDeadlines { slot.policy.deadlines }
    /// Bytes each receive buffer holds per datagram: a datagram that fills it may have been cut short.
    private let messageBytes: Int
    private var log: RateLimitedLogger
    /// The source sending now.
    private var slot: SenderSlot<SocketAddress>
    private var idleCheck: RepeatedTask?
    /// rtp://: validates the sender's source and puts its packets in order; with `keyframe_request`, asks it for
    /// keyframes the decoder wants, and again until it has one.
    private var receiver: RTPReceiver?
    private var feedbackTimer: Scheduled<Void>?
    /// Out of its pipeline: a late wish of the decode thread sends nothing and arms no timer.
    private var removed = false
    /// The socket's drop counter (SO_MEMINFO) when last read; nil until read once or where unsupported.
    private var kernelDrops: UInt32?
    private var readingBatch = false
    /// The sender whose loss is the last item queued (`reportLoss`): another loss adds nothing until data follows it.
    private var lossQueued: ConnectionID?
    /// After a kernel drop: bytes still to read (of any source) before the gap is surely behind us, and whether
    /// the batch that revealed it is still being read (it came out of the queue before the count was taken).
    private var lossWindow: (remaining: Int, inRevealingBatch: Bool)?

    init(worker: StreamWorker, logger: Logger, configuration: StreamConfiguration, metrics: StreamMetrics,
         activity: SenderActivity, messageBytes: Int) {
        self.worker = worker
        self.configuration = configuration
        self.metrics = metrics
        self.messageBytes = messageBytes
        slot = SenderSlot(policy: configuration.admissionPolicy, activity: activity)
        log = RateLimitedLogger(logger: logger)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let period = TimeAmount.nanoseconds(Int64(min(1_000_000_000, max(50_000_000, (deadlines.idleTimeout > 0 ? deadlines.idleTimeout : deadlines.hold) / 4))))
        // The handler lives on its channel's event loop: what runs later reaches it only through the loop.
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        idleCheck = context.eventLoop.scheduleRepeatedTask(initialDelay: period, delay: period) { _ in bound.value.checkIdle() }
        guard configuration.source.transport == .rtp else { return }
        var settings = RTPReceiver.Configuration(configuration.rtp)
        // A plain RTP sender listens for no RTCP but keyframe requests (where asked for): no reports.
        settings.reportInterval = nil
        receiver = RTPReceiver(settings, now: MonotonicClock.nanoseconds())
        guard settings.keyframeRequest != nil else { return }
        let channel = context.channel
        // Called by the decode thread.
        worker.setKeyframeSignal { signal in
            channel.eventLoop.execute { bound.value.keyframe(signal, on: channel) }
        }
    }

    private func keyframe(_ signal: KeyframeWish.Signal, on channel: Channel) {
        guard !removed else { return }
        receiver?.apply(signal)
        sendFeedback(on: channel)
    }

    /// What the receiver has to send now, and a timer for when it will have more (a request asked again).
    private func sendFeedback(on channel: Channel) {
        feedbackTimer?.cancel()
        feedbackTimer = nil
        guard !removed else { return }
        let now = MonotonicClock.nanoseconds()
        guard let feedback = receiver?.poll(now: now) else { return }
        for item in feedback {
            if case .keyframeRequest = item { metrics.keyframeRequests.increment() }
            send(item.packet, on: channel)
        }
        guard let deadline = receiver?.nextDeadline else { return }
        let bound = NIOLoopBound(self, eventLoop: channel.eventLoop)
        feedbackTimer = channel.eventLoop.scheduleTask(in: .nanoseconds(Int64(clamping: deadline > now ? deadline - now : 0))) {
            bound.value.sendFeedback(on: channel)
        }
    }

    private func checkIdle() {
        guard let (current, quiet) = slot.idle(now: MonotonicClock.nanoseconds()) else { return }
        metrics.idleDisconnects.increment()
        end(current.id, reason: .idle(seconds: Double(quiet) / 1e9))
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        idleCheck?.cancel()
        idleCheck = nil
        feedbackTimer?.cancel()
        feedbackTimer = nil
        removed = true
    }

    /// RTCP to the current sender: its RTP port when `rtcp_mux`, else that port + 1.
    private func send(_ bytes: [UInt8], on channel: Channel) {
        guard var destination = slot.occupant?.sender, let port = destination.port else { return }
        if !configuration.rtp.rtcpMux { destination.port = port == 65535 ? port : port + 1 }
        let envelope = AddressedEnvelope(remoteAddress: destination, data: channel.allocator.buffer(bytes: bytes))
        channel.writeAndFlush(envelope, promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !readingBatch {
            readingBatch = true
            if configuration.source.transport == .udp { checkKernelDrops(context.channel) }
        }
        let envelope = unwrapInboundIn(data)
        defer { countTowardsLossWindow(envelope.data.readableBytes) }
        let source = envelope.remoteAddress
        let now = MonotonicClock.nanoseconds()
        guard configuration.allow.allows(source) else {
            metrics.refused(.notAllowed)
            log.log(.warning, key: "not-allowed", now: now, "datagrams from a source outside allow ignored (latest from \(source))")
            return
        }
        let fromSender = slot.occupant?.sender == source
        // rtp://: another source's datagram is parsed before it may become the sender, so that what is no RTP of the
        // stream's payload type (RTCP sent to the RTP port, say) makes no one the sender. The sender's own go through
        // the checks below first, and their payload types are the depacketizer's to judge, as they always were.
        var packet: RTPPacket?
        if receiver != nil, !fromSender {
            guard let parsed = parseRTP(envelope, now: now) else { return }
            guard parsed.payloadType == configuration.rtp.payloadType else {
                metrics.rtpPayloadsDropped.increment()
                log.log(.warning, key: "payload-type", now: now,
                        "RTP of payload type \(parsed.payloadType) from \(source), not the stream's rtp_payload_type \(configuration.rtp.payloadType): dropped (wrong_payload_type)")
                return
            }
            packet = parsed
        }
        // A new sender's connect and the last one's disconnect are work for the decode thread: while it has many
        // connects still to take, nobody new is let in (a flood of new source ports taking over one after another
        // would queue without bound).
        if !fromSender, !worker.admitsNewSenders {
            metrics.refused(.rateLimited)
            log.log(.warning, key: "new-sender-behind", now: now,
                    "datagrams from a new sender ignored while the decoder has \(StreamWorker.maximumConnectsQueued) senders' connects still to take (latest from \(source))")
            return
        }
        guard let id = sender(source, now: now) else { return }
        // A datagram that filled its buffer may have been longer (the kernel cut it): lost, not decoded damaged.
        guard envelope.data.readableBytes < messageBytes else {
            reportLoss(id, datagrams: 1, because: "longer than \(messageBytes) bytes", now: now)
            return
        }
        // UDP cannot be slowed down: when the decode thread is behind, the datagram is dropped, not queued.
        guard worker.acceptsMoreBytes else {
            reportLoss(id, datagrams: 1, because: "the decoder is behind", now: now)
            return
        }
        lossQueued = nil
        if receiver != nil, packet == nil {
            guard let parsed = parseRTP(envelope, now: now) else { return }
            packet = parsed
        }
        guard let packet else {
            _ = worker.enqueue(bytes: worker.bytePool.copy(envelope.data), receivedAt: now, connection: id)
            return
        }
        // Put in order: the decode thread takes the packets as they are.
        let events = receiver?.receiveInOrder(packet, now: now).events ?? []
        _ = worker.enqueue(events, bytes: envelope.data.readableBytes, receivedAt: now, connection: id)
    }

    /// The datagram as an RTP packet, parsed once, here; nil (counted, logged at most once per 10 s) when it is none.
    private func parseRTP(_ envelope: AddressedEnvelope<ByteBuffer>, now: UInt64) -> RTPPacket? {
        do {
            return try RTPPacket(parsing: Array(envelope.data.readableBytesView)[...])
        } catch {
            metrics.rtpDiscarded(.malformed)
            log.log(.warning, key: "malformed", now: now, "a datagram from \(envelope.remoteAddress) that is not RTP (\(error)) dropped")
            return nil
        }
    }

    /// `source`'s id as the stream's sender: the current one's, or a new one's that the policy admits; nil when
    /// refused.
    private func sender(_ source: SocketAddress, now: UInt64) -> ConnectionID? {
        if let current = slot.occupant, current.sender == source { return current.id }
        switch slot.admit(source, from: source.ipAddress, now: now) {
        case .refused:
            metrics.refused(.secondSender)
            log.log(.warning, key: "second-sender", now: now,
                    "datagrams from a second sender ignored while the current one delivers video or has only just started (second_sender = refuse; latest from \(source))")
            return nil
        case .admitted(let id, let replaced, let staleFor):
            if let replaced {
                metrics.takeover(staleFor == nil ? .policy : .stale)
                log.log(.warning, key: "takeover", now: now, staleFor.map {
                    "datagrams from \(source) take over from \(replaced.sender), which delivered no video for \(String(Double($0) / 1e9, decimals: 1)) s"
                } ?? "datagrams from \(source) take over from \(replaced.sender) (second_sender = takeover)")
                ended(replaced.id, reason: .takenOver)
            }
            worker.enqueue(.connected(id, remote: source.description))
            return id
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        readingBatch = false
        if let window = lossWindow, window.inRevealingBatch {
            lossWindow = (window.remaining, false)
            countTowardsLossWindow(0)
        }
        context.fireChannelReadComplete()
    }

    /// A datagram read (of any source): once everything that was queued when the drop was seen has been read,
    /// the gap is behind, and the decode thread may let a keyframe end the damage again.
    private func countTowardsLossWindow(_ bytes: Int) {
        guard var window = lossWindow, !window.inRevealingBatch else { return }
        window.remaining -= bytes
        guard window.remaining <= 0 else {
            lossWindow = window
            return
        }
        lossWindow = nil
        if let current = slot.occupant { worker.enqueue(.lossWindow(current.id, open: false)) }
    }

    /// Datagrams the kernel dropped since the last read batch (its receive buffer was full) precede this batch.
    private func checkKernelDrops(_ channel: Channel) {
        guard let provider = channel as? SocketOptionProvider else { return }
        let future: EventLoopFuture<MemoryInfo> = provider.unsafeGetSocketOption(
            level: .socket, name: NIOBSDSocket.Option(rawValue: 55))  // SO_MEMINFO; entry 8 is SK_MEMINFO_DROPS
        let bound = NIOLoopBound(self, eventLoop: channel.eventLoop)
        future.whenSuccess { info in bound.value.noteKernelDrops(info) }
    }

    private typealias MemoryInfo = (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32)

    private func noteKernelDrops(_ info: MemoryInfo) {
        defer { kernelDrops = info.8 }
        // Nothing queued: whatever was queued when the drop was seen has been read (by this batch at the latest).
        if info.0 == 0, lossWindow != nil { lossWindow = (0, true) }
        guard let previous = kernelDrops, info.8 != previous, let current = slot.occupant else { return }
        // The kernel drops when its queue is full, so the gap follows what was queued then: this batch and what
        // is still queued now (SK_MEMINFO_RMEM_ALLOC, entry 0; payload plus overhead, so an upper bound).
        let count = Int(info.8 &- previous)
        metrics.datagramsLost.increment(by: Int64(count))
        if lossWindow == nil { worker.enqueue(.lossWindow(current.id, open: true)) }
        lossWindow = (max(lossWindow?.remaining ?? 0, Int(info.0)), true)
        log.log(.warning, key: "lost-overflow", now: MonotonicClock.nanoseconds(),
                "\(count) datagram(s) lost: the receive buffer overflowed")
    }

    /// `datagrams` of the sender were lost right here.
    private func reportLoss(_ id: ConnectionID, datagrams: Int, because reason: String, now: UInt64) {
        metrics.datagramsLost.increment(by: Int64(datagrams))
        // Losses with nothing queued between them are one gap: one item, however many datagrams (a sender flooding
        // a decoder that is behind would otherwise queue an item per datagram).
        if lossQueued != id { worker.enqueue(.datagramsLost(id)) }
        lossQueued = id
        log.log(.warning, key: "lost-\(reason)", now: now, "\(datagrams) datagram(s) lost: \(reason)")
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let current = slot.occupant { end(current.id, reason: .listenerClosed) }
        context.fireChannelInactive()
    }

    private func end(_ id: ConnectionID, reason: DisconnectReason) {
        guard slot.release(id, now: MonotonicClock.nanoseconds()) != nil else { return }
        ended(id, reason: reason)
    }

    /// `id` is no longer the sender (released, or taken over): the decode thread hears it.
    private func ended(_ id: ConnectionID, reason: DisconnectReason) {
        lossWindow = nil
        // rtp://: what the reorder window still holds goes first; the next sender's packets are ordered afresh.
        let held = receiver?.takeHeld() ?? []
        receiver?.senderChanged()
        if !held.isEmpty { _ = worker.enqueue(held, bytes: 0, receivedAt: MonotonicClock.nanoseconds(), connection: id) }
        worker.enqueue(.disconnected(id, reason: reason))
    }
}
