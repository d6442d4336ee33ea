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
final class StreamPipeline: Sendable {
    let configuration: StreamConfiguration
    private let group: EventLoopGroup
    private let logger: Logger
    /// A listening socket passed by socket activation, used instead of binding `listen`; closed by the pipeline.
    private let inheritedDescriptor: Int32?
    private let metrics: StreamMetrics
    /// Where `run()` is. The worker (ring and decode thread) and the RTSP client outlive the listener: STATUS lines
    /// read their last state after the stream stopped.
    private enum Phase: Sendable {
        case starting
        /// The ring exists and the decode thread runs; the listener is being bound (`client`: rtsp://, once made).
        case binding(StreamWorker, client: RTSPClient?)
        case listening(StreamWorker, client: RTSPClient?)
        case ended(StreamWorker?, client: RTSPClient?)

        var worker: StreamWorker? {
            switch self {
            case .starting: return nil
            case .binding(let worker, _), .listening(let worker, _): return worker
            case .ended(let worker, _): return worker
            }
        }
        var client: RTSPClient? {
            switch self {
            case .binding(_, let client), .listening(_, let client), .ended(_, let client): return client
            case .starting: return nil
            }
        }
    }
    private let phase = NIOLockedValueBox(Phase.starting)
    /// Fires once the listener is bound and the ring exists, or once `run()` has ended (then `isListening` is false).
    let settled = OneShotSignal()
    private let stopRequested = OneShotSignal()
    /// Set by `stop(removingRing:)`: the stream was removed from the configuration, so its ring goes too.
    private let removeRing = NIOLockedValueBox(false)
    /// New connections per source and second (max_connections_per_second).
    private let admissions: NIOLockedValueBox<PerSourceRateLimiter>
    /// Connections refused (allowlist, rate, second sender): logged at most once per 10 s per reason.
    private let refusalLog: NIOLockedValueBox<RateLimitedLogger>
    /// When the sender last delivered video (reported by the decode thread, read by the listener).
    private let activity = SenderActivity()
    /// The server `listen = "whip"` streams attach to.
    private let webrtc: WebRTCServer?

    init(
        configuration: StreamConfiguration, group: EventLoopGroup, logger: Logger, inheritedDescriptor: Int32? = nil,
        metrics: StreamMetrics, webrtc: WebRTCServer? = nil
    ) {
        self.configuration = configuration
        self.webrtc = webrtc
        self.group = group
        self.inheritedDescriptor = inheritedDescriptor
        self.metrics = metrics
        var logger = logger
        logger[metadataKey: "stream"] = "\(configuration.name)"
        self.logger = logger
        admissions = NIOLockedValueBox(PerSourceRateLimiter(perSecond: configuration.maxConnectionsPerSecond))
        refusalLog = NIOLockedValueBox(RateLimitedLogger(logger: logger))
    }

    /// True between the listener being bound and the stream stopping.
    var isListening: Bool { phase.withLockedValue { if case .listening = $0 { true } else { false } } }

    /// Asks this one stream to stop (a reload removed or changed it); `run()` then drains and returns. A removed
    /// stream's ring is removed as well; a changed one's is left for its new instance to take over.
    func stop(removingRing: Bool = false) {
        removeRing.withLockedValue { $0 = removingRing }
        stopRequested.fire()
    }

    func run() async throws {
        defer {
            phase.withLockedValue { $0 = .ended($0.worker, client: $0.client) }
            settled.fire()
        }
        let ringEvents = RingEventReporter(shmName: configuration.shmName, logger: logger, metrics: metrics)
        let writer: FrameRingWriter
        do {
            writer = try makeWriter(events: ringEvents)
        } catch {
            if let inheritedDescriptor { close(inheritedDescriptor) }
            throw error
        }
        let worker = StreamWorker(configuration: configuration, ringEvents: ringEvents, activity: activity,
                                  logger: logger, metrics: metrics)
        worker.start(ring: writer)
        phase.withLockedValue { $0 = .binding(worker, client: nil) }
        let registry = SenderRegistry(policy: configuration.admissionPolicy, activity: activity)
        let listener: Listener
        do {
            listener = try await bind(worker: worker, registry: registry)
        } catch {
            // The decode thread lets go of the ring at once (the next reload's instance takes it over); it keeps its
            // last frames.
            worker.stopAndWait()
            logger.error("cannot listen on \(configuration.listen): \(error)")
            throw error
        }
        worker.enqueue(.listening)
        if case .rtsp(let client) = listener { client.start() }
        if let source = configuration.rtsp {
            logger.info("pulling", metadata: ["source": "\(source)", "shm": "/dev/shm/\(configuration.shmName)"])
        } else if configuration.webrtc != nil, let webrtc {
            logger.info("taking WebRTC", metadata: ["whip": "\(webrtc.configuration.url(of: configuration.name))", "shm": "/dev/shm/\(configuration.shmName)"])
        } else {
            logger.info("listening", metadata: [
                "listen": "\(inheritedDescriptor.map { "inherited socket \($0) (socket activation)" } ?? configuration.listen.description)",
                "shm": "/dev/shm/\(configuration.shmName)",
            ])
        }
        if !configuration.retiredKeys.isEmpty { logger.warning("\(ConfigurationReport.retiredKeysWarning(configuration))") }
        phase.withLockedValue { $0 = .listening(worker, client: $0.client) }
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
        switch listener {
        case .channel(let channel):
            try? await channel.close()
            registry.closeActive()
        case .srt(let srt):
            srt.stop()
        case .rtsp(let client):
            await client.stop()
        case .webrtc(let server):
            await server.detach(stream: configuration.name)
        }
        // The ring is let go of now, not whenever the last reference goes: a changed stream's new instance takes it.
        let removing = removeRing.withLockedValue { $0 }
        worker.stopAndWait(removingRing: removing)
        logger.info(removing ? "stopped; /dev/shm/\(configuration.shmName) removed" : "stopped; /dev/shm/\(configuration.shmName) keeps the last frames")
    }

    /// source = "rtsp://…": where the client stands; listen = "whip": whether a session is there (for STATUS lines).
    var sourceState: String? {
        if configuration.webrtc != nil, let webrtc { return webrtc.sourceState(of: configuration.name) }
        return phase.withLockedValue { $0.client }?.state.withLockedValue { $0.description }
    }

    /// Why the stream has no usable ring, if it has none (for STATUS lines).
    var ringProblem: String? { phase.withLockedValue { $0.worker }?.ringEvents.problem }

    /// What the stream is doing now (for STATUS lines).
    var snapshot: StreamSnapshot {
        phase.withLockedValue { $0.worker }?.snapshot.withLockedValue { $0 } ?? StreamSnapshot()
    }

    /// False when the stream's decode thread is stuck (the watchdog is then no longer fed).
    func isHealthy(stallLimitNanoseconds limit: UInt64) -> Bool {
        phase.withLockedValue { $0.worker }?.isHealthy(stallLimitNanoseconds: limit) ?? true
    }

    private func makeWriter(events: RingEventReporter) throws -> FrameRingWriter {
        var group: gid_t?
        if let name = configuration.shmGroup, let entry = getgrnam(name) { group = entry.pointee.gr_gid }
        let writer = try FrameRingWriter(configuration: configuration.ring(group: group)) { events.report($0) }
        writer.objectMakingDelay = Self.injectedRingDelay
        return writer
    }

    /// `STREAMRECVD_INJECT_RING_DELAY_MS=N`: every new ring object is made N ms late, as a large one is on a loaded
    /// machine (the test that the decode thread does not wait for it). Unset in production.
    private static var injectedRingDelay: UInt64 {
        getenv("STREAMRECVD_INJECT_RING_DELAY_MS").flatMap { UInt64(String(cString: $0)) }.map { min($0, 60_000) * 1_000_000 } ?? 0
    }

    /// What a stream listens with: a NIO channel (tcp://, udp://, rtp://) or an SRT listener's thread; or, for
    /// source = "rtsp://…", the client that pulls.
    private enum Listener {
        case channel(Channel)
        case srt(SRTListener)
        case rtsp(RTSPClient)
        case webrtc(WebRTCServer)
    }

    private func bind(worker: StreamWorker, registry: SenderRegistry) async throws -> Listener {
        switch configuration.source {
        case .rtsp(let settings):
            if let inheritedDescriptor {
                logger.warning("socket activation: a source = \"rtsp://…\" stream listens on nothing; closing the socket passed to it")
                close(inheritedDescriptor)
            }
            let client = RTSPClient(source: settings.camera, configuration: configuration, worker: worker,
                                    context: RTSPClientContext(group: group, metrics: metrics, logger: logger))
            phase.withLockedValue { $0 = .binding(worker, client: client) }
            return .rtsp(client)  // started once the decode thread has been told the stream is listening
        case .srt:
            let listener = try SRTListener(configuration: configuration, worker: worker, activity: activity, metrics: metrics,
                                           logger: logger, inherited: inheritedDescriptor)
            do {
                try listener.start()
            } catch {
                listener.threadEnded()  // closes the listening socket; no thread was started
                throw error
            }
            return .srt(listener)
        case .webrtc(let settings):
            if let inheritedDescriptor {
                logger.warning("socket activation: a listen = \"whip\" stream uses the [webrtc] sockets; closing the socket passed to it")
                close(inheritedDescriptor)
            }
            guard let webrtc else { throw WebRTCUnavailable() }
            await webrtc.attach(WebRTCRoute(configuration: configuration, settings: settings, worker: worker, activity: activity, metrics: metrics))
            return .webrtc(webrtc)
        case .udp, .rtp:
            return .channel(try await bindDatagrams(worker: worker))
        case .tcp:
            return .channel(try await bindStream(worker: worker, registry: registry))
        }
    }

    private func bindStream(worker: StreamWorker, registry: SenderRegistry) async throws -> Channel {
        let configuration = self.configuration
        let logger = self.logger
        let metrics = self.metrics
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 16)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers(AcceptErrorReporter.handlers(
                        listener: "stream \(configuration.name)", counter: metrics.acceptErrors, logger: logger))
                }
            }
            .childChannelOption(.socketOption(.so_keepalive), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 4)
            // Large reads: fewer hops to the decode thread per frame. NIO reuses the buffer (reads are copied into
            // pooled arrays).
            .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(
                minimum: 64 << 10, initial: 256 << 10, maximum: 4 << 20))
            .childChannelInitializer { [self] channel in
                if let refusal = screen(channel) {
                    refuse(refusal, remote: channel.remoteAddress)
                    return channel.close()
                }
                return admit(channel, worker: worker, registry: registry, mayWait: true)
            }
        if let inheritedDescriptor {
            return try await bootstrap.withBoundSocket(inheritedDescriptor).get()
        }
        return try await bootstrap.bind(host: configuration.listen.host, port: configuration.listen.port).get()
    }

    /// The second-sender policy's answer for a new connection. A refusal first waits up to
    /// `refusalGraceMilliseconds` for the current sender's connection to end: a sender that closes and reconnects
    /// at once (a restarted process, `ffmpeg` in a loop) connects before its old connection's end is read, and must
    /// not be turned away by it. The new connection is not read while it waits.
    private func admit(_ channel: Channel, worker: StreamWorker, registry: SenderRegistry, mayWait: Bool) -> EventLoopFuture<Void> {
        switch registry.admit(channel, now: MonotonicClock.nanoseconds()) {
        case .refused(let current):
            guard mayWait else {
                refuse(.secondSender, remote: channel.remoteAddress)
                return channel.close()
            }
            let decided = channel.eventLoop.makePromise(of: Void.self)
            let timeout = channel.eventLoop.scheduleTask(in: .milliseconds(Self.refusalGraceMilliseconds)) { decided.succeed() }
            current.sender.closeFuture.hop(to: channel.eventLoop).whenComplete { _ in
                registry.release(current.id)
                timeout.cancel()
                decided.succeed()
            }
            return decided.futureResult.flatMap { [self] in admit(channel, worker: worker, registry: registry, mayWait: false) }
        case .admitted(let id, let replaced, let staleFor):
            if let replaced = replaced?.sender {
                metrics.takeover(staleFor == nil ? .policy : .stale)
                let why = staleFor.map { "the current one delivered no video for \(String(Double($0) / 1e9, decimals: 1)) s" }
                    ?? "second_sender = takeover"
                logRefusal(key: "takeover", "new sender takes over (\(why)) (remote \(channel.remoteAddress?.description ?? "unknown"))")
                replaced.close(promise: nil)
            }
            Self.enableKeepaliveProbes(channel)
            let (metrics, logger) = (self.metrics, self.logger)
            return channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(SenderHandler(
                    id: id, worker: worker, registry: registry, metrics: metrics, logger: logger))
            }
        }
    }

    /// Long enough for the end of a closed connection to be read on a loaded machine; short enough that a refused
    /// sender learns it at once.
    static let refusalGraceMilliseconds: Int64 = 500

    /// udp:// and rtp://: one datagram channel reading several datagrams per system call (recvmmsg). NIO splits
    /// one receive buffer across the messages of a vector read, so the buffer holds a whole datagram per message:
    /// up to 64 KiB for raw UDP (senders choose any size), 9 KiB (jumbo MTU) for RTP.
    private func bindDatagrams(worker: StreamWorker) async throws -> Channel {
        let configuration = self.configuration
        let logger = self.logger
        let metrics = self.metrics
        let (messages, messageBytes) = configuration.source.transport == .rtp ? (16, 9216) : (8, 65536)
        let activity = self.activity
        // No SO_REUSEADDR: with it, any local user could bind the same port and receive the stream.
        let bootstrap = DatagramBootstrap(group: group)
            .channelOption(.socketOption(.so_rcvbuf), value: configuration.receiveBufferBytes)
            .channelOption(.datagramVectorReadMessageCount, value: messages)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: messages * messageBytes))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(DatagramSenderHandler(
                        worker: worker, logger: logger, configuration: configuration, metrics: metrics,
                        activity: activity, messageBytes: messageBytes))
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
        return admissions.withLockedValue { $0.admit(channel.remoteAddress, now: now) } ? nil : .rateLimited
    }

    private func refuse(_ reason: StreamMetrics.RefusalReason, remote: SocketAddress?) {
        metrics.refused(reason)
        let message: String
        switch reason {
        case .notAllowed: message = "connection refused: source not in allow"
        case .rateLimited: message = "connection refused: this source is over max_connections_per_second (\(configuration.maxConnectionsPerSecond))"
        case .secondSender: message = "second sender refused: the current sender is delivering video or has only just connected (second_sender = refuse)"
        case .passphrase: message = "connection refused: encryption does not match passphrase"  // SRT only (SRTListenerThread)
        case .token: message = "WHIP request refused: wrong or missing bearer token"  // whip only (WHIPRequestHandler)
        }
        logRefusal(key: reason.rawValue, "\(message) (remote \(remote?.description ?? "unknown"))")
    }

    private func logRefusal(key: String, _ message: String) {
        let now = MonotonicClock.nanoseconds()
        refusalLog.withLockedValue { $0.log(.warning, key: key, now: now, message) }
    }

    /// A sender whose host vanished (no FIN) is detected within about a minute even with idle_timeout = 0.
    private static func enableKeepaliveProbes(_ channel: Channel) {
        let tcp = NIOBSDSocket.OptionLevel.tcp
        _ = channel.setOption(ChannelOptions.Types.SocketOption(level: tcp, name: .init(rawValue: TCP_KEEPIDLE)), value: 30)
        _ = channel.setOption(ChannelOptions.Types.SocketOption(level: tcp, name: .init(rawValue: TCP_KEEPINTVL)), value: 10)
        _ = channel.setOption(ChannelOptions.Types.SocketOption(level: tcp, name: .init(rawValue: TCP_KEEPCNT)), value: 3)
    }
}

/// A `listen = "whip"` stream added by a reload while the daemon started without `[webrtc]`.
struct WebRTCUnavailable: Error, CustomStringConvertible {
    var description: String { "no WebRTC server is running: a [webrtc] table added after start takes effect at the next restart" }
}
