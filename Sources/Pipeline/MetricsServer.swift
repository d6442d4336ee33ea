import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
import ServiceLifecycle

/// The optional Prometheus endpoint (`[daemon] metrics = "HOST:PORT"`): `GET /metrics` answers the text exposition
/// format from the registry every stream's `StreamMetrics` writes into; anything else is 404, or 405 for a
/// method other than GET/HEAD. A plain HTTP/1.1 server on the daemon's event loop, closed at shutdown.
final class MetricsServer: Service, @unchecked Sendable {
    let registry: PrometheusCollectorRegistry
    private let address: ListenAddress
    private let group: EventLoopGroup
    private let logger: Logger

    init(address: ListenAddress, registry: PrometheusCollectorRegistry, group: EventLoopGroup, logger: Logger) {
        self.address = address
        self.registry = registry
        self.group = group
        self.logger = logger
    }

    /// A swift-metrics factory writing into `registry`, with latency buckets suited to video (0.5 ms to 1 s).
    static func factory(registry: PrometheusCollectorRegistry) -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets[StreamMetrics.latencyLabel] = [0.5, 1, 2, 4, 8, 16, 33, 66, 133, 266, 1000].map {
            .microseconds(Int64($0 * 1000))
        }
        factory.durationHistogramBuckets[StreamMetrics.creationLabel] = [0.25, 0.5, 1, 2, 5, 10, 20, 50, 100, 1000].map {
            .microseconds(Int64($0 * 1000))
        }
        return factory
    }

    func run() async throws {
        let registry = self.registry
        let channel: Channel
        do {
            channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 16)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline()
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

    private let registry: PrometheusCollectorRegistry
    private var head: HTTPRequestHead?

    init(registry: PrometheusCollectorRegistry) { self.registry = registry }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let request):
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
