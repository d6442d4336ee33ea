import CoreMetrics
import Decoding
import SharedFrames
import Glibc
import Logging
import MediaSecurity
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

/// The `[webrtc]` server: the WHIP endpoint (HTTP) and the ICE port (UDP) of every `listen = "whip"` stream, both
/// on one event loop, where the session table lives. Streams attach and detach as they start and stop (reloads
/// included); the server outlives them and closes at shutdown.
final class WebRTCServer: Service, Sendable {
    /// HTTP connections at once: WHIP clients post once per session.
    static let maximumConnections = 32
    /// From one address other than loopback: a browser opens up to 6 to a host.
    static let maximumConnectionsPerAddress = 8
    static let idleSeconds: Int64 = 10
    /// Long enough for a WHIP exchange on a slow link (the offer is a few kilobytes, the answer is immediate).
    static let connectionLifetimeSeconds: Int64 = 15
    /// How long a TLS handshake may take: a client that has not finished by then gives its connection's place back.
    static let handshakeSeconds: Int64 = 5
    let configuration: WebRTCServerConfiguration
    /// The media socket, the session table and its timer.
    private let loop: EventLoop
    /// HTTP and TLS of the WHIP endpoint: the daemon's HTTP thread, not the media's, so that requests (and
    /// handshakes) cost it and not the media. Replies are made on `loop` (WHIPRequestHandler).
    private let httpLoops: EventLoopGroup
    private let logger: Logger
    private let table: NIOLoopBoundBox<WebRTCSessionTable>
    let metrics: WebRTCMetrics
    /// The sockets and the timer, once `bind()` has made them.
    private let bound = NIOLockedValueBox<(media: Channel, http: Channel, ticks: RepeatedTask)?>(nil)
    private let connections: ConnectionCap
    /// Each attached stream's source status (waiting, connected from …), for STATUS= lines.
    private let sourceStates = NIOLockedValueBox<[String: String]>([:])
    /// HTTPS's certificate and key when `[webrtc]` has them; replaced by `reloadCertificate()`.
    private let certificate: NIOLockedValueBox<TLSServerCertificate?>
    /// TLS failures are said at most once per 10 s: a port scanner makes many.
    private let tlsFailures: NIOLockedValueBox<RateLimitedLogger>

    init(configuration: WebRTCServerConfiguration, group: EventLoopGroup, httpGroup: EventLoopGroup,
         metricsFactory: any MetricsFactory, logger: Logger) throws {
        self.configuration = configuration
        loop = group.next()
        httpLoops = httpGroup
        self.logger = logger
        metrics = WebRTCMetrics(factory: metricsFactory)
        connections = ConnectionCap(maximum: Self.maximumConnections, perAddress: Self.maximumConnectionsPerAddress, loopbackReserve: 8,
                                    lifetime: .seconds(Self.connectionLifetimeSeconds), endpoint: "WHIP endpoint",
                                    refusals: metrics.refusedCounter(.connections), logger: logger)
        certificate = NIOLockedValueBox(try configuration.tls.map { try TLSServerCertificate(certificatePath: $0.certificate, keyPath: $0.key) })
        tlsFailures = NIOLockedValueBox(RateLimitedLogger(logger: logger))
        let identity = try DTLSIdentity.generate()
        let states = sourceStates
        table = NIOLoopBoundBox.makeBoxSendingValue(
            WebRTCSessionTable(configuration: configuration, identity: identity, metrics: metrics, logger: logger) { stream, text in
                states.withLockedValue { $0[stream] = text }
            }, eventLoop: loop)
        logger.info("WebRTC: DTLS certificate generated (sha-256 \(identity.fingerprintText))")
    }

    /// SIGHUP: reads the certificate and key again (a renewal), for connections from now on. On failure the one in
    /// use stays, and the reason is logged.
    func reloadCertificate() {
        guard let files = configuration.tls else { return }
        do {
            let renewed = try TLSServerCertificate(certificatePath: files.certificate, keyPath: files.key)
            certificate.withLockedValue { $0 = renewed }
            logger.notice("WebRTC: HTTPS certificate read again (\(renewed.subject), \(renewed.secondsUntilExpiry / 86400) days left)")
        } catch {
            logger.error("WebRTC: HTTPS certificate not reloaded, the previous one stays: \(error)")
        }
    }

    /// A stream with `listen = "whip"` starts taking offers.
    func attach(_ route: WebRTCRoute) async {
        let table = self.table
        try? await loop.submit { table.value.attach(route) }.get()
        let stream = route.configuration.name
        route.worker.setFeedbackSender { [loop] bytes in loop.execute { table.value.sendFeedback(bytes, stream: stream) } }
    }

    /// A whip stream's source status ("WebRTC: waiting for a WHIP client at …"), for STATUS= lines.
    func sourceState(of stream: String) -> String? { sourceStates.withLockedValue { $0[stream] } }

    /// The stream stops: its session ends, its offers are refused.
    func detach(stream: String) async {
        let table = self.table
        try? await loop.submit { table.value.detach(stream: stream) }.get()
    }

    /// Binds both sockets and starts the timers; called before any stream starts, so that a port that is taken
    /// ends the daemon at once, before READY=1.
    func bind() async throws {
        let media: Channel
        let http: Channel
        do {
            media = try await bindMedia()
            do {
                http = try await bindHTTP()
            } catch {
                try? await media.close()
                throw error
            }
        } catch {
            logger.error("WebRTC: cannot listen (\(configuration.http) for WHIP, \(configuration.media) for media): \(error)")
            throw error
        }
        let table = self.table
        let ticks = loop.scheduleRepeatedTask(initialDelay: .milliseconds(20), delay: .milliseconds(20)) { _ in
            table.value.tick(now: MonotonicClock.nanoseconds())
        }
        bound.withLockedValue { $0 = (media, http, ticks) }
        let scheme = configuration.tls == nil ? "http" : "https"
        logger.info("WebRTC: WHIP on \(scheme)://\(configuration.http.host):\(configuration.http.port)/whip/STREAM, media on udp \(configuration.media.host):\(configuration.media.port)")
        if let certificate = certificate.withLockedValue({ $0 }) {
            logger.info("WebRTC: HTTPS certificate \(certificate.subject), \(certificate.secondsUntilExpiry / 86400) days left")
        }
    }

    /// Until shutdown; then both sockets close (after the streams, which stop first).
    func run() async throws {
        try? await gracefulShutdown()
        if let (media, http, ticks) = bound.withLockedValue({ $0 }) {
            ticks.cancel()
            try? await http.close()
            try? await media.close()
        }
    }

    private func bindMedia() async throws -> Channel {
        let table = self.table
        // No SO_REUSEADDR: another local user binding the same port would receive the media.
        let channel = try await DatagramBootstrap(group: loop)
            .channelOption(.socketOption(.so_rcvbuf), value: StreamSource.defaultReceiveBufferBytes)
            .channelOption(.datagramVectorReadMessageCount, value: 16)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 16 * 2048))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(WebRTCMediaHandler(table: table))
                }
            }
            .bind(host: configuration.media.host, port: configuration.media.port).get()
        try await loop.submit {
            table.value.send = { bytes, destination in
                channel.writeAndFlush(AddressedEnvelope(remoteAddress: destination, data: channel.allocator.buffer(bytes: bytes)), promise: nil)
            }
        }.get()
        return channel
    }

    private func bindHTTP() async throws -> Channel {
        let table = self.table
        return try await ServerBootstrap(group: httpLoops)
            .serverChannelOption(.backlog, value: 128)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            // Replies a client does not read stop the reading of its requests (BackPressureHandler) at 64 KiB.
            .childChannelOption(.writeBufferWaterMark, value: .init(low: 16 << 10, high: 64 << 10))
            .childChannelInitializer { [self] channel in
                guard connections.admit(channel) else { return channel.close() }
                return channel.eventLoop.makeCompletedFuture {
                    if let tls = try makeTLSHandler(for: channel) { try channel.pipeline.syncOperations.addHandler(tls) }
                    try channel.pipeline.syncOperations.addHandler(BackPressureHandler())
                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(allTimeout: .seconds(Self.idleSeconds)))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(WHIPRequestHandler(table: table))
                }
            }
            .bind(host: configuration.http.host, port: configuration.http.port).get()
    }
}

extension WebRTCServer {
    /// The connection's TLS layer when HTTPS is configured, else nil.
    fileprivate func makeTLSHandler(for channel: Channel) throws -> TLSServerHandler? {
        guard let certificate = certificate.withLockedValue({ $0 }) else { return nil }
        let remote = channel.remoteAddress?.description ?? "unknown"
        let (metrics, failures) = (self.metrics, self.tlsFailures)
        return TLSServerHandler(connection: try certificate.makeConnection(), handshakeDeadline: .seconds(Self.handshakeSeconds)) { reason in
            metrics.refused(.tls)
            let now = MonotonicClock.nanoseconds()
            failures.withLockedValue { $0.log(.warning, key: "tls", now: now, "WHIP endpoint: TLS with \(remote) failed: \(reason)") }
        }
    }
}

/// The ICE port: every datagram to the session table, which tells them apart (RFC 7983).
final class WebRTCMediaHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>

    private let table: NIOLoopBoundBox<WebRTCSessionTable>

    init(table: NIOLoopBoundBox<WebRTCSessionTable>) { self.table = table }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        table.value.receive(Array(envelope.data.readableBytesView), from: envelope.remoteAddress, now: MonotonicClock.nanoseconds())
    }
}
