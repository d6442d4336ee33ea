import Decoding
import Glibc
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import ServiceLifecycle
import SharedFrames

/// One configured stream: its shared-memory ring, its decode thread and its listener. `run()` returns after a
/// graceful shutdown or `stop()` has drained the decoder and marked the ring stopped.
final class StreamPipeline: @unchecked Sendable {
    let configuration: StreamConfiguration
    private let group: EventLoopGroup
    private let logger: Logger
    /// A listening socket passed by socket activation, used instead of binding `listen`; closed by the pipeline.
    private let inheritedDescriptor: Int32?
    private let metrics: StreamMetrics
    private let worker = NIOLockedValueBox<StreamWorker?>(nil)
    /// Fires once the listener is bound and the ring exists, or once `run()` has ended (then `isListening` is false).
    let settled = OneShotSignal()
    private let stopRequested = OneShotSignal()
    private let listening = NIOLockedValueBox(false)
    /// Connections refused (allowlist, rate, second sender): logged at most once per 10 s per reason.
    private let refusals: NIOLockedValueBox<(limiter: ConnectionRateLimiter, log: RateLimitedLogger)>

    init(
        configuration: StreamConfiguration, group: EventLoopGroup, logger: Logger, inheritedDescriptor: Int32? = nil,
        metrics: StreamMetrics
    ) {
        self.configuration = configuration
        self.group = group
        self.inheritedDescriptor = inheritedDescriptor
        self.metrics = metrics
        var logger = logger
        logger[metadataKey: "stream"] = "\(configuration.name)"
        self.logger = logger
        refusals = NIOLockedValueBox((ConnectionRateLimiter(perSecond: configuration.maxConnectionsPerSecond),
                                      RateLimitedLogger(logger: logger)))
    }

    /// True between the listener being bound and the stream stopping.
    var isListening: Bool { listening.withLockedValue { $0 } }

    /// Asks this one stream to stop (a reload removed or changed it); `run()` then drains and returns.
    func stop() { stopRequested.fire() }

    func run() async throws {
        defer {
            listening.withLockedValue { $0 = false }
            settled.fire()
        }
        let writer: FrameRingWriter
        do {
            writer = try makeWriter()
        } catch {
            if let inheritedDescriptor { close(inheritedDescriptor) }
            throw error
        }
        let worker = StreamWorker(configuration: configuration, writer: writer, logger: logger, metrics: metrics)
        worker.start()
        self.worker.withLockedValue { $0 = worker }
        let registry = SenderRegistry(policy: configuration.secondSender)
        let channel: Channel
        do {
            channel = try await bind(worker: worker, registry: registry)
        } catch {
            worker.stopAndWait()
            logger.error("cannot listen on \(configuration.listen): \(error)")
            throw error
        }
        worker.enqueue(.listening)
        logger.info("listening", metadata: [
            "listen": "\(inheritedDescriptor.map { "inherited socket \($0) (socket activation)" } ?? configuration.listen.description)",
            "shm": "/dev/shm/\(configuration.shmName)",
        ])
        listening.withLockedValue { $0 = true }
        settled.fire()
        // Stopped by the daemon's graceful shutdown, by a reload (stop()), or by cancellation (a sibling failed).
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await stopRequested.wait()
            } onGracefulShutdown: { [stopRequested] in
                stopRequested.fire()
            }
        } onCancel: { [stopRequested] in
            stopRequested.fire()
        }
        try? await channel.close()
        registry.closeActive()
        worker.stopAndWait()
        logger.info("stopped; /dev/shm/\(configuration.shmName) keeps the last frames")
    }

    /// What the stream is doing now (for STATUS lines).
    var snapshot: StreamSnapshot {
        worker.withLockedValue { $0?.snapshot.withLockedValue { $0 } } ?? StreamSnapshot()
    }

    /// False when the stream's decode thread is stuck (the watchdog is then no longer fed).
    func isHealthy(stallLimitNanoseconds limit: UInt64) -> Bool {
        worker.withLockedValue { $0?.isHealthy(stallLimitNanoseconds: limit) } ?? true
    }

    private func makeWriter() throws -> FrameRingWriter {
        var group: gid_t?
        if let name = configuration.shmGroup, let entry = getgrnam(name) { group = entry.pointee.gr_gid }
        let ring = FrameRingConfiguration(
            shmName: configuration.shmName, streamName: configuration.name, slotCount: configuration.slots,
            maxWidth: configuration.maxWidth, maxHeight: configuration.maxHeight, mode: configuration.shmMode,
            group: group)
        let writer = try FrameRingWriter(configuration: ring)
        logger.info(writer.tookOver ? "took over the existing frame ring" : "created the frame ring", metadata: [
            "shm": "/dev/shm/\(configuration.shmName)", "slots": "\(configuration.slots)",
            "max_size": "\(configuration.maxWidth)x\(configuration.maxHeight)",
        ])
        return writer
    }

    private func bind(worker: StreamWorker, registry: SenderRegistry) async throws -> Channel {
        if configuration.listen.transport.isDatagram { return try await bindDatagrams(worker: worker) }
        let configuration = self.configuration
        let logger = self.logger
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 16)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.so_keepalive), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 4)
            // Whole frames per read: every read boundary inside a frame is a place where a stalled event loop can
            // make an idle flush premature. NIO reuses the buffer (reads are copied into pooled arrays).
            .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(
                minimum: 64 << 10, initial: 256 << 10, maximum: 4 << 20))
            .childChannelInitializer { [self] channel in
                if let refusal = screen(channel) {
                    refuse(refusal, remote: channel.remoteAddress)
                    return channel.close()
                }
                switch registry.admit(channel) {
                case .refused:
                    refuse(.secondSender, remote: channel.remoteAddress)
                    return channel.close()
                case .accepted(let id, let replaced):
                    if let replaced {
                        logger.warning("new sender takes over from the current one (second_sender = takeover)",
                                       metadata: ["remote": "\(channel.remoteAddress?.description ?? "unknown")"])
                        replaced.close(promise: nil)
                    }
                    Self.enableKeepaliveProbes(channel)
                    return channel.eventLoop.makeCompletedFuture {
                        if configuration.idleTimeout > 0 {
                            try channel.pipeline.syncOperations.addHandler(
                                IdleStateHandler(readTimeout: .nanoseconds(Int64(configuration.idleTimeout * 1e9))))
                        }
                        try channel.pipeline.syncOperations.addHandler(SenderHandler(
                            id: id, worker: worker, logger: logger,
                            idleTimeout: configuration.idleTimeout))
                    }
                }
            }
        if let inheritedDescriptor {
            return try await bootstrap.withBoundSocket(inheritedDescriptor).get()
        }
        return try await bootstrap.bind(host: configuration.listen.host, port: configuration.listen.port).get()
    }

    /// udp:// and rtp://: one datagram channel reading several datagrams per system call (recvmmsg). NIO splits
    /// one receive buffer across the messages of a vector read, so the buffer holds a whole datagram per message:
    /// up to 64 KiB for raw UDP (senders choose any size), 9 KiB (jumbo MTU) for RTP.
    private func bindDatagrams(worker: StreamWorker) async throws -> Channel {
        let configuration = self.configuration
        let logger = self.logger
        let metrics = self.metrics
        let (messages, messageBytes) = configuration.listen.transport == .rtp ? (16, 9216) : (8, 65536)
        let bootstrap = DatagramBootstrap(group: group)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelOption(.socketOption(.so_rcvbuf), value: 8 << 20)
            .channelOption(.datagramVectorReadMessageCount, value: messages)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: messages * messageBytes))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if configuration.idleTimeout > 0 {
                        try channel.pipeline.syncOperations.addHandler(
                            IdleStateHandler(readTimeout: .nanoseconds(Int64(configuration.idleTimeout * 1e9))))
                    }
                    try channel.pipeline.syncOperations.addHandler(DatagramSenderHandler(
                        worker: worker, logger: logger, configuration: configuration, metrics: metrics))
                }
            }
        if let inheritedDescriptor {
            return try await bootstrap.withBoundSocket(inheritedDescriptor).get()
        }
        return try await bootstrap.bind(host: configuration.listen.host, port: configuration.listen.port).get()
    }

    /// Why a new TCP connection must be turned away before the second-sender policy is asked; nil admits it.
    private func screen(_ channel: Channel) -> StreamMetrics.RefusalReason? {
        if !configuration.allow.allows(channel.remoteAddress) { return .notAllowed }
        let now = MonotonicClock.nanoseconds()
        return refusals.withLockedValue { $0.limiter.admit(now: now) } ? nil : .rateLimited
    }

    private func refuse(_ reason: StreamMetrics.RefusalReason, remote: SocketAddress?) {
        metrics.refused(reason)
        let message: String
        switch reason {
        case .notAllowed: message = "connection refused: source not in allow"
        case .rateLimited: message = "connection refused: over max_connections_per_second (\(configuration.maxConnectionsPerSecond))"
        case .secondSender: message = "second sender refused: the stream already has a sender (second_sender = refuse)"
        }
        let now = MonotonicClock.nanoseconds()
        refusals.withLockedValue { $0.log.log(.warning, key: reason.rawValue, now: now, "\(message) (remote \(remote?.description ?? "unknown"))") }
    }

    /// A sender whose host vanished (no FIN) is detected within about a minute even with idle_timeout = 0.
    private static func enableKeepaliveProbes(_ channel: Channel) {
        let tcp = NIOBSDSocket.OptionLevel.tcp
        _ = channel.setOption(ChannelOptions.Types.SocketOption(level: tcp, name: .init(rawValue: TCP_KEEPIDLE)), value: 30)
        _ = channel.setOption(ChannelOptions.Types.SocketOption(level: tcp, name: .init(rawValue: TCP_KEEPINTVL)), value: 10)
        _ = channel.setOption(ChannelOptions.Types.SocketOption(level: tcp, name: .init(rawValue: TCP_KEEPCNT)), value: 3)
    }
}
