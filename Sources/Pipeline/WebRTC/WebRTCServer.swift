import Bitstream
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
    /// HTTP connections at once: WHIP clients post once per session. A connection waiting for its request is
    /// cheap (a socket and a TLS state, about 100 kB together), and the more places there are, the more addresses
    /// and networks strangers need to hold each of them (ConnectionPlaces).
    static let maximumConnections = 256
    /// From one network (an IPv4 /24, an IPv6 /48): strangers need 7 networks to hold the places of other machines.
    static let maximumConnectionsPerNetwork = 32
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
    private let endpoint: NIOLoopBoundBox<WebRTCEndpoint>
    let metrics: WebRTCMetrics
    /// The sockets and the timer, once `bind()` has made them.
    private let bound = NIOLockedValueBox<Bound?>(nil)
    private let connections: ConnectionCap

    private struct Bound {
        var media: Channel
        var http: Channel
        var ticks: RepeatedTask
    }
    /// Host names served and wrong-token waits, before any request reaches a stream.
    private let gate: WHIPGate
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
        connections = ConnectionCap(maximum: Self.maximumConnections, perAddress: Self.maximumConnectionsPerAddress, loopbackReserve: 32,
                                    perNetwork: Self.maximumConnectionsPerNetwork, lifetime: .seconds(Self.connectionLifetimeSeconds), endpoint: "WHIP endpoint",
                                    refusals: metrics.refusedCounter(.connections), evictions: metrics.connectionsGivenUp, logger: logger)
        certificate = NIOLockedValueBox(try configuration.tls.map { try TLSServerCertificate(certificatePath: $0.certificate, keyPath: $0.key) })
        tlsFailures = NIOLockedValueBox(RateLimitedLogger(logger: logger))
        gate = WHIPGate(configuration: configuration, certificate: certificate, connections: connections, metrics: metrics, logger: logger)
        let identity = try DTLSIdentity.generate()
        let states = sourceStates
        endpoint = NIOLoopBoundBox.makeBoxSendingValue(WebRTCEndpoint(table:
            WebRTCSessionTable(configuration: configuration, identity: identity, metrics: metrics, logger: logger) { stream, text in
                states.withLockedValue { $0[stream] = text }
            }, loop: loop), eventLoop: loop)
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
        let endpoint = self.endpoint
        try? await loop.submit { endpoint.value.drive { $0.attach(route, now: MonotonicClock.nanoseconds()) } }.get()
        let stream = route.configuration.name
        route.worker.setKeyframeSignal { [loop] signal in
            loop.execute { endpoint.value.drive { $0.keyframe(signal, stream: stream, now: MonotonicClock.nanoseconds()) } }
        }
    }

    /// A whip stream's source status ("WebRTC: waiting for a WHIP client at …"), for STATUS= lines.
    func sourceState(of stream: String) -> String? { sourceStates.withLockedValue { $0[stream] } }

    /// The stream stops: its session ends, its offers are refused.
    func detach(stream: String) async {
        let endpoint = self.endpoint
        try? await loop.submit { endpoint.value.drive { $0.detach(stream: stream, now: MonotonicClock.nanoseconds()) } }.get()
    }

    /// Binds both sockets, or adopts those socket activation passed (`inherited`, checked first), and starts the
    /// timers; called before any stream starts, so that a port that is taken ends the daemon at once, before READY=1.
    func bind(inherited: InheritedWebRTCSockets = InheritedWebRTCSockets()) async throws {
        let media: Channel
        let http: Channel
        do {
            media = try await bindMedia(inherited: inherited.media)
            do {
                http = try await bindHTTP(inherited: inherited.http)
            } catch {
                try? await media.close()
                throw error
            }
        } catch {
            logger.error("WebRTC: cannot listen (\(configuration.http) for WHIP, \(configuration.media) for media): \(error)")
            throw error
        }
        let endpoint = self.endpoint
        // The sessions' timers are the endpoint's (at each deadline); this one sees to the certificate's renewal and the
        // share page's pictures.
        let ticks = loop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { _ in
            endpoint.value.tick(now: MonotonicClock.nanoseconds())
        }
        bound.withLockedValue { $0 = Bound(media: media, http: http, ticks: ticks) }
        let scheme = configuration.tls == nil ? "http" : "https"
        logger.info("WebRTC: WHIP on \(scheme)://\(configuration.http.host):\(configuration.http.port)/whip/STREAM, media on udp \(configuration.media.host):\(configuration.media.port)")
        if let certificate = certificate.withLockedValue({ $0 }) {
            logger.info("WebRTC: HTTPS certificate \(certificate.subject), \(certificate.secondsUntilExpiry / 86400) days left")
        }
    }

    /// Until shutdown; then both sockets close (after the streams, which stop first).
    func run() async throws {
        try? await gracefulShutdown()
        if let bound = bound.withLockedValue({ $0 }) {
            bound.ticks.cancel()
            let endpoint = self.endpoint
            try? await loop.submit { endpoint.value.stop() }.get()
            try? await bound.http.close()
            try? await bound.media.close()
        }
    }

    /// The options below are set on an inherited socket too (NIO applies them to an adopted one).
    private func bindMedia(inherited: Int32?) async throws -> Channel {
        let endpoint = self.endpoint
        // Decided before the channel exists: its handler tells datagrams' local addresses apart on a wildcard.
        let wildcard: WildcardMediaSocket?
        let descriptor: Int32?
        if let inherited {
            let name = InheritedWebRTCSockets.mediaName
            let address = try InheritedSocket.check(inherited, name: name, kind: .udp, expected: configuration.media, key: "media")
            if try !InheritedSocket.claimUDPPort(inherited, name: name) {
                logger.warning("WebRTC: /proc/net/udp does not show the inherited socket '\(name)': whether another socket shares its port was not checked")
            }
            // check() found it bound to `media`: a wildcard when that is one.
            wildcard = configuration.mediaIsWildcard ? WildcardMediaSocket.adopting(inherited, media: configuration.media) : nil
            descriptor = inherited
            logger.notice("WebRTC: media on the inherited socket '\(name)' (\(address), socket activation)")
        } else if configuration.mediaIsWildcard {
            // SO_REUSEPORT as below; made here to ask for each datagram's destination before the first arrives.
            let socket = try WildcardMediaSocket.bind(configuration.media)
            (wildcard, descriptor) = (socket, socket.descriptor)
        } else {
            (wildcard, descriptor) = (nil, nil)
        }
        // No SO_REUSEADDR (claimUDPPort clears an inherited socket's): another local user binding the same port
        // would receive the media.
        var bootstrap = DatagramBootstrap(group: loop)
            .channelOption(.socketOption(.so_rcvbuf), value: StreamSource.defaultReceiveBufferBytes)
            // A flood is read 64 datagrams a system call (recvmmsg) and screened where it lies (WebRTCMediaHandler).
            .channelOption(.datagramVectorReadMessageCount, value: 64)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 64 * 2048))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(WebRTCMediaHandler(endpoint: endpoint, wildcard: wildcard))
                }
            }
        if wildcard != nil { bootstrap = bootstrap.channelOption(.receivePacketInfo, value: true) }
        let channel: Channel
        if let descriptor {
            channel = try await bootstrap.withBoundSocket(descriptor).get()
        } else {
            // SO_REUSEPORT: each session's own connected socket binds the same port (ConnectedMediaSockets); the
            // kernel lets only this user's sockets share it.
            channel = try await bootstrap.channelOption(ChannelOptions.Types.SocketOption(level: .socket, name: NIOBSDSocket.Option(rawValue: SO_REUSEPORT)), value: 1)
                .bind(host: configuration.media.host, port: configuration.media.port).get()
        }
        if wildcard != nil {
            let names = HostCandidates.select(from: HostCandidates.interfaceAddresses(), ipv6Socket: configuration.media.host.contains(":"),
                                              limit: WebRTCAnswer.maximumCandidates)
            logger.info("WebRTC: media on every address of the machine; answers name the interfaces' addresses (now \(names.joined(separator: ", ")))")
        }
        let (loop, logger, metrics) = (self.loop, self.logger, self.metrics)
        try await loop.submit {
            endpoint.value.transmit = { bytes, destination, source in
                // A closed channel's descriptor may already be another file's.
                guard channel.isActive else { return }
                if let wildcard, let source {
                    if !wildcard.send(bytes, to: destination, from: source) { metrics.datagramsNotSent.increment() }
                    return
                }
                let target = wildcard?.isIPv6 == true ? destination.mapped ?? destination : destination
                channel.writeAndFlush(AddressedEnvelope(remoteAddress: target, data: channel.allocator.buffer(bytes: bytes)), promise: nil)
            }
            guard let local = channel.localAddress else { return }
            endpoint.value.sockets = ConnectedMediaSockets(loop: loop, local: local, wildcard: wildcard, endpoint: endpoint, logger: logger)
        }.get()
        return channel
    }

    private func bindHTTP(inherited: Int32?) async throws -> Channel {
        let endpoint = self.endpoint
        let bootstrap = ServerBootstrap(group: httpLoops)
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
                    try channel.pipeline.syncOperations.addHandler(ConnectionPhaseHandler(cap: connections))
                    try channel.pipeline.syncOperations.addHandler(WHIPRequestHandler(endpoint: endpoint, gate: gate))
                }
            }
        guard let inherited else { return try await bootstrap.bind(host: configuration.http.host, port: configuration.http.port).get() }
        let name = InheritedWebRTCSockets.httpName
        let address = try InheritedSocket.check(inherited, name: name, kind: .tcpListener, expected: configuration.http, key: "listen")
        let channel = try await bootstrap.withBoundSocket(inherited).get()
        logger.notice("WebRTC: WHIP listener on the inherited socket '\(name)' (\(address), socket activation)")
        return channel
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

    private let endpoint: NIOLoopBoundBox<WebRTCEndpoint>
    /// Where the socket is bound to a wildcard: each datagram's local address is read from its packet info.
    private let wildcard: WildcardMediaSocket?
    /// A session's own socket of a wildcard server: the one local address it is bound to.
    private let boundLocal: SocketAddress?

    init(endpoint: NIOLoopBoundBox<WebRTCEndpoint>, wildcard: WildcardMediaSocket?, boundLocal: SocketAddress? = nil) {
        self.endpoint = endpoint
        self.wildcard = wildcard
        self.boundLocal = boundLocal
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        let (endpoint, now) = (self.endpoint.value, MonotonicClock.nanoseconds())
        var source = envelope.remoteAddress
        if let wildcard {
            guard let peer = wildcard.peer(source, arrivedAt: boundLocal ?? envelope.metadata?.packetInfo?.destinationAddress) else { return }
            source = peer
        }
        // Strangers' datagrams are dropped before they are copied or parsed: a flood costs as little as it can.
        let dropped = envelope.data.withUnsafeReadableBytes { endpoint.table.screen($0, from: source, now: now) }
        guard !dropped else { return }
        let local = boundLocal ?? wildcard?.local(from: envelope.metadata?.packetInfo)
        endpoint.drive { $0.receive(Array(envelope.data.readableBytesView), from: source, to: local, now: now) }
    }
}
