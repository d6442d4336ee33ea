import Glibc
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import ServiceLifecycle
import SharedFrames

/// One configured stream as a Service: its shared-memory ring, its decode thread and its TCP listener.
/// `run()` returns after a graceful shutdown has drained the decoder and marked the ring stopped.
public final class StreamPipeline: Service, @unchecked Sendable {
    public let configuration: StreamConfiguration
    private let group: EventLoopGroup
    private let logger: Logger
    /// A listening socket passed by socket activation, used instead of binding `listen`.
    private let inheritedDescriptor: Int32?
    private let onReady: @Sendable () -> Void
    private let worker = NIOLockedValueBox<StreamWorker?>(nil)

    init(
        configuration: StreamConfiguration, group: EventLoopGroup, logger: Logger, inheritedDescriptor: Int32? = nil,
        onReady: @escaping @Sendable () -> Void = {}
    ) {
        self.configuration = configuration
        self.group = group
        self.inheritedDescriptor = inheritedDescriptor
        self.onReady = onReady
        var logger = logger
        logger[metadataKey: "stream"] = "\(configuration.name)"
        self.logger = logger
    }

    public func run() async throws {
        let writer = try makeWriter()
        let worker = StreamWorker(configuration: configuration, writer: writer, logger: logger)
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
        onReady()
        try? await gracefulShutdown()
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
            .childChannelInitializer { channel in
                switch registry.admit(channel) {
                case .refused:
                    logger.warning("second sender refused: the stream already has a sender (second_sender = refuse)",
                                   metadata: ["remote": "\(channel.remoteAddress?.description ?? "unknown")"])
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
                        worker: worker, logger: logger, policy: configuration.secondSender,
                        idleTimeout: configuration.idleTimeout))
                }
            }
        if let inheritedDescriptor {
            return try await bootstrap.withBoundSocket(inheritedDescriptor).get()
        }
        return try await bootstrap.bind(host: configuration.listen.host, port: configuration.listen.port).get()
    }

    /// A sender whose host vanished (no FIN) is detected within about a minute even with idle_timeout = 0.
    private static func enableKeepaliveProbes(_ channel: Channel) {
        let tcp = NIOBSDSocket.OptionLevel.tcp
        _ = channel.setOption(ChannelOptions.Types.SocketOption(level: tcp, name: .init(rawValue: TCP_KEEPIDLE)), value: 30)
        _ = channel.setOption(ChannelOptions.Types.SocketOption(level: tcp, name: .init(rawValue: TCP_KEEPINTVL)), value: 10)
        _ = channel.setOption(ChannelOptions.Types.SocketOption(level: tcp, name: .init(rawValue: TCP_KEEPCNT)), value: 3)
    }
}
