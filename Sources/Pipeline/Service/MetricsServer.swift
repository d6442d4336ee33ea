import CoreMetrics
import Glibc
import Decoding
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
import ServiceLifecycle
import SharedFrames

/// The optional Prometheus endpoint (`[daemon] metrics = "HOST:PORT"`): `GET /metrics` answers the text exposition
/// format from the registry every stream's `StreamMetrics` writes into; anything else is 404, or 405 for a
/// method other than GET/HEAD. A plain HTTP/1.1 server on the daemon's HTTP thread (not the ingest's), closed at
/// shutdown.
///
/// Bounded so that it can never take what the video path needs: at most `maximumConnections` connections at once
/// and 4 from one address (more are closed at once and counted), each closed after `idleSeconds` without a request
/// and after `lifetimeSeconds` in any case, and accept(2) failures (out of descriptors) pause accepting instead of
/// spinning.
final class MetricsServer: Service {
    /// 16, or a quarter of the descriptor limit when that is lower: the video path keeps the rest.
    static let maximumConnections: Int = {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < 1 << 30 else { return 16 }
        return max(1, min(16, Int(limit.rlim_cur) / 4))
    }()
    static let idleSeconds: Int64 = 10
    /// A scrape takes milliseconds; a client trickling bytes would otherwise never be idle.
    static let lifetimeSeconds: Int64 = 15
    let registry: PrometheusCollectorRegistry
    private let address: ListenAddress
    private let group: EventLoopGroup
    private let logger: Logger
    private let connections: ConnectionCap
    private let acceptErrors: CoreMetrics.Counter

    init(address: ListenAddress, registry: PrometheusCollectorRegistry, group: EventLoopGroup, logger: Logger) {
        self.address = address
        self.registry = registry
        self.group = group
        self.logger = logger
        let factory = Self.factory(registry: registry)
        connections = ConnectionCap(
            maximum: Self.maximumConnections, perAddress: 4, loopbackReserve: Self.maximumConnections / 4, lifetime: .seconds(Self.lifetimeSeconds), endpoint: "metrics endpoint",
            refusals: CoreMetrics.Counter(label: "streamrecvd_metrics_connections_refused_total", factory: factory), logger: logger)
        acceptErrors = CoreMetrics.Counter(label: "streamrecvd_metrics_accept_errors_total", factory: factory)
    }

    /// A swift-metrics factory writing into `registry`, with latency buckets suited to video (0.5 ms to 1 s).
    static func factory(registry: PrometheusCollectorRegistry) -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets[StreamMetrics.latencyLabel] = [0.5, 1, 2, 4, 8, 16, 33, 66, 133, 266, 1000].map {
            .microseconds(Int64($0 * 1000))
        }
        factory.durationHistogramBuckets[StreamMetrics.writeLabel] = [0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 33].map {
            .microseconds(Int64($0 * 1000))
        }
        factory.durationHistogramBuckets[StreamMetrics.creationLabel] = [0.25, 0.5, 1, 2, 5, 10, 20, 50, 100, 1000].map {
            .microseconds(Int64($0 * 1000))
        }
        return factory
    }

    func run() async throws {
        let (registry, logger, acceptErrors) = (self.registry, self.logger, self.acceptErrors)
        let channel: Channel
        do {
            channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 16)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                // Replies a client does not read stop the reading of its requests (BackPressureHandler) at 64 KiB.
                .childChannelOption(.writeBufferWaterMark, value: .init(low: 16 << 10, high: 64 << 10))
                .serverChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandlers(AcceptErrorReporter.handlers(
                            listener: "metrics endpoint", counter: acceptErrors, logger: logger))
                    }
                }
                .childChannelInitializer { [self] channel in
                    guard connections.admit(channel) else { return channel.close() }
                    return channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(BackPressureHandler())
                        try channel.pipeline.syncOperations.addHandler(
                            IdleStateHandler(allTimeout: .seconds(Self.idleSeconds)))
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                        try channel.pipeline.syncOperations.addHandler(ConnectionPhaseHandler(cap: connections))
                        try channel.pipeline.syncOperations.addHandler(MetricsHTTPHandler(registry: registry))
                    }
                }
                .bind(host: address.host, port: address.port).get()
        } catch {
            logger.error("cannot serve metrics on \(address.host):\(address.port): \(error)")
            throw error
        }
        logger.info("metrics on http://\(address.host.contains(":") ? "[\(address.host)]" : address.host):\(address.port)/metrics")
        try? await gracefulShutdown()
        try? await channel.close()
    }
}

/// Answers one request at a time on a keep-alive connection.
private final class MetricsHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// A scraper asks once per interval, and an idle connection closes after `idleSeconds`: a client pipelining
    /// more than this on one connection is cut off (replies it never reads would pile up).
    static let maximumRequestsPerConnection = 120

    private let registry: PrometheusCollectorRegistry
    private var head: HTTPRequestHead?
    private var requests = 0

    init(registry: PrometheusCollectorRegistry) { self.registry = registry }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Idle for `idleSeconds`: a connection kept open without requests holds a descriptor for nothing.
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// A request that does not parse has had its 400 (HTTPServerProtocolErrorHandler): the connection ends there,
    /// instead of reading on what follows.
    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(var request):
            requests += 1
            // The last request a connection may make is answered with Connection: close; any after it, not at all.
            guard requests <= Self.maximumRequestsPerConnection else { return head = nil }
            if requests == Self.maximumRequestsPerConnection { request.headers.replaceOrAdd(name: "Connection", value: "close") }
            head = request
        case .body:
            break
        case .end:
            guard let request = head else { return }
            head = nil
            respond(to: request, context: context)
        }
    }

    private func respond(to request: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = request.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.uri
        var status = HTTPResponseStatus.ok
        var body: [UInt8]
        var contentType = "text/plain; version=0.0.4; charset=utf-8"
        if request.method != .GET && request.method != .HEAD {
            status = .methodNotAllowed
            body = Array("only GET /metrics\n".utf8)
        } else if path == "/metrics" {
            body = registry.emitToBuffer()
        } else {
            status = .notFound
            contentType = "text/plain; charset=utf-8"
            body = Array("streamrecvd serves /metrics only\n".utf8)
        }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "Content-Length", value: String(body.count))
        if status == .methodNotAllowed { headers.add(name: "Allow", value: "GET, HEAD") }
        let keepAlive = request.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))), promise: nil)
        if request.method != .HEAD {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive { done.whenComplete { [channel = context.channel] _ in channel.close(promise: nil) } }
    }
}
