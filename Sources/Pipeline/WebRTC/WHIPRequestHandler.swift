import Decoding
import SharedFrames
import Logging
import NIOCore
import NIOHTTP1

/// WHIP (RFC 9725) over HTTP/1.1: `POST /whip/STREAM` with an SDP offer answers 201 with the SDP answer and the
/// session's `Location`; `DELETE` of that location ends the session; `OPTIONS` answers CORS preflights so that a
/// page of another origin may post; `PATCH` (trickle ICE) is 405: our candidates are all in the answer and the
/// client's are learnt from its checks. Every request but OPTIONS carries the stream's bearer token (RFC 6750).
/// Before that, `WHIPGate`: a `Host:` this endpoint serves (else 421), and no wait owed for wrong tokens (else 429).
///
/// HTTP (and TLS) run on a loop of their own: a request, once whole, is answered on the session table's loop (the
/// media socket's), and the reply is written through the channel. A flood of requests then costs the HTTP thread,
/// not the media; HTTPServerPipelineHandler holds a connection's next request until the reply's `.end`.
final class WHIPRequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// An SDP offer is a few kilobytes; Chromium's with every codec about 10.
    static let maximumBodyBytes = 64 << 10
    /// Requests on one connection: a WHIP client makes two or three, the share page's picture about 5 a second for
    /// the connection's 15 s. The last is answered with Connection: close (replies a client pipelines and never
    /// reads would otherwise pile up).
    static let maximumRequestsPerConnection = 120
    /// From accept to the first request's head, TLS handshake included: a connection that says nothing gives its
    /// place back.
    static let firstRequestSeconds: Int64 = 5

    private let endpoint: NIOLoopBoundBox<WebRTCEndpoint>
    private let gate: WHIPGate
    /// Who sent this connection's requests (the address, or the local user on loopback), found on first need.
    private var party: ConnectionParty?
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var oversized = false
    private var requests = 0
    private var firstRequestDeadline: Scheduled<Void>?
    /// A whole request that waits while the client does not read its replies (the channel is not writable): made
    /// once it reads again, so that what waits for it is one reply, not one per request it pipelined.
    private var parked: (head: HTTPRequestHead, body: [UInt8], oversized: Bool)?

    init(endpoint: NIOLoopBoundBox<WebRTCEndpoint>, gate: WHIPGate) {
        self.endpoint = endpoint
        self.gate = gate
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        firstRequestDeadline = context.eventLoop.scheduleTask(in: .seconds(Self.firstRequestSeconds)) { channel.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        firstRequestDeadline?.cancel()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent { return context.close(promise: nil) }
        context.fireUserInboundEventTriggered(event)
    }

    /// A request that does not parse has had its 400 (HTTPServerProtocolErrorHandler): the connection ends there,
    /// instead of reading on what follows.
    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, let (head, body, oversized) = parked {
            parked = nil
            dispatch(head, body: body, oversized: oversized, context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(var request):
            firstRequestDeadline?.cancel()
            requests += 1
            guard requests <= Self.maximumRequestsPerConnection else { return head = nil }
            if requests == Self.maximumRequestsPerConnection { request.headers.replaceOrAdd(name: "Connection", value: "close") }
            head = request
            body = []
            oversized = false
        case .body(let chunk):
            guard !oversized else { return }
            if body.count + chunk.readableBytes > Self.maximumBodyBytes {
                oversized = true
                body = []
            } else {
                body += chunk.readableBytesView
            }
        case .end:
            guard let request = head else { return }
            head = nil
            let body = self.body
            self.body = []
            if context.channel.isWritable {
                dispatch(request, body: body, oversized: oversized, context: context)
            } else {
                parked = (request, body, oversized)
            }
        }
    }

    private func dispatch(_ request: HTTPRequestHead, body: [UInt8], oversized: Bool, context: ChannelHandlerContext) {
        let (endpoint, channel, remote, gate) = (self.endpoint, context.channel, context.remoteAddress, self.gate)
        let now = MonotonicClock.nanoseconds()
        if let refusal = gate.hostRefusal(request, remote: remote?.description ?? "unknown", now: now) {
            return Self.write(refusal, for: request, channel: channel)
        }
        let party = self.party ?? gate.party(of: channel)
        self.party = party
        if request.method != .OPTIONS, let refusal = gate.throttled(party, now: now) {
            return Self.write(refusal, for: request, channel: channel)
        }
        if oversized {
            return Self.write(Reply(.payloadTooLarge, "an SDP offer is at most \(Self.maximumBodyBytes >> 10) KiB\n"), for: request, channel: channel)
        }
        let authorized: @Sendable (HTTPHeaders, WebRTCRoute) -> Bool = { gate.authorize($0, route: $1, party: party, now: MonotonicClock.nanoseconds()) }
        endpoint.eventLoop.execute {
            // GET and HEAD: the share page, its stream list and each stream's live picture (SharePageRoutes.swift);
            // a frame's answer comes later, once encoded off the loop, so those routes write their own replies.
            if request.method == .GET || request.method == .HEAD,
               SharePageRoutes.serve(request, table: endpoint.value.table, channel: channel, remote: remote, authorized: authorized) { return }
            // An offer may take over a session, a DELETE ends one: each tells its client (outputs of the table).
            let reply = endpoint.value.drive { Self.respond(to: request, body: body, tables: $0, remote: remote, authorized: authorized) }
            Self.write(reply, for: request, channel: channel)
        }
    }

    struct Reply: Sendable {
        var status: HTTPResponseStatus
        var headers: [(String, String)] = []
        var body: String

        init(_ status: HTTPResponseStatus, _ body: String, headers: [(String, String)] = []) {
            self.status = status
            self.body = body
            self.headers = headers
        }
    }

    /// On the table's loop.
    private static func respond(
        to request: HTTPRequestHead, body: [UInt8], tables: WebRTCSessionTable, remote: SocketAddress?, authorized: (HTTPHeaders, WebRTCRoute) -> Bool
    ) -> Reply {
        let path = request.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.uri
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        // "", "whip", STREAM[, SESSION]
        guard parts.count >= 3, parts.count <= 4, parts[0].isEmpty, parts[1] == "whip", !parts[2].isEmpty else {
            return Reply(.notFound, "WHIP endpoints are /whip/STREAM\n")
        }
        let now = MonotonicClock.nanoseconds()
        if request.method == .OPTIONS { return Reply(.noContent, "", headers: [("Accept-Post", "application/sdp")]) }
        guard let route = tables.routes[parts[2]] else {
            tables.metrics.refused(.unknownStream)
            return Reply(.notFound, "no WebRTC stream named '\(printable(parts[2]))'\n")
        }
        guard authorized(request.headers, route) else {
            tables.metrics.refused(.token)
            route.metrics.refused(.token)
            tables.logRefusal(key: "token", now: now, "WHIP request for stream \(route.configuration.name) refused: missing or wrong bearer token (remote \(remote?.description ?? "unknown"))")
            return Reply(.unauthorized, "a valid bearer token is needed (Authorization: Bearer …)\n", headers: [("WWW-Authenticate", "Bearer realm=\"streamrecvd\"")])
        }
        switch (request.method, parts.count) {
        case (.POST, 3):
            return offer(request, body: body, stream: parts[2], tables: tables, remote: remote, now: now)
        case (.DELETE, 4):
            return tables.delete(stream: parts[2], session: parts[3], now: now)
                ? Reply(.ok, "") : Reply(.notFound, "no such session\n")
        case (.PATCH, 4):
            return Reply(.methodNotAllowed, "trickle ICE is not supported: every candidate is in the answer\n", headers: [("Allow", "DELETE, OPTIONS")])
        default:
            return Reply(.methodNotAllowed, "POST /whip/STREAM, DELETE /whip/STREAM/SESSION\n",
                         headers: [("Allow", parts.count == 3 ? "POST, OPTIONS" : "DELETE, OPTIONS")])
        }
    }

    private static func offer(
        _ request: HTTPRequestHead, body: [UInt8], stream: String, tables: WebRTCSessionTable, remote: SocketAddress?, now: UInt64
    ) -> Reply {
        let type = request.headers.first(name: "Content-Type")?.split(separator: ";").first?.trimmingCharacters(in: " ").lowercased()
        guard type == "application/sdp" else {
            return Reply(.unsupportedMediaType, "the offer must be sent as Content-Type: application/sdp\n")
        }
        guard let text = String(validating: body, as: UTF8.self) else {
            tables.metrics.refused(.badOffer)
            return Reply(.badRequest, "the offer is not UTF-8 text\n")
        }
        switch tables.offer(stream: stream, sdp: text, from: remote, now: now) {
        case .created(let id, let answer):
            return Reply(.created, answer, headers: [("Content-Type", "application/sdp"), ("Location", "/whip/\(stream)/\(id)")])
        case .refused(let reason, let status, let message):
            tables.metrics.refused(reason)
            tables.logRefusal(key: "offer-\(reason.rawValue)", now: now,
                                   "WHIP offer for stream \(stream) refused (\(status.code)): \(message) (remote \(remote?.description ?? "unknown"))")
            // A session that goes quiet is taken over after the hold (a couple of seconds): say when to try again.
            return Reply(status, message + "\n", headers: status == .conflict ? [("Retry-After", "2")] : [])
        }
    }

    /// Through the channel (from any thread): the reply is made on the table's loop.
    private static func write(_ reply: Reply, for request: HTTPRequestHead, channel: Channel) {
        var headers = HTTPHeaders()
        for (name, value) in reply.headers { headers.add(name: name, value: value) }
        if !headers.contains(name: "Content-Type") { headers.add(name: "Content-Type", value: "text/plain; charset=utf-8") }
        let bytes = Array(reply.body.utf8)
        headers.add(name: "Content-Length", value: String(bytes.count))
        // CORS: a page of another origin may post (the token, not the origin, is what authorizes).
        headers.add(name: "Access-Control-Allow-Origin", value: "*")
        headers.add(name: "Access-Control-Allow-Methods", value: "POST, DELETE, OPTIONS, PATCH")
        headers.add(name: "Access-Control-Allow-Headers", value: "Authorization, Content-Type")
        headers.add(name: "Access-Control-Expose-Headers", value: "Location")
        let keepAlive = request.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        channel.write(HTTPServerResponsePart.head(HTTPResponseHead(version: request.version, status: reply.status, headers: headers)), promise: nil)
        if !bytes.isEmpty { channel.write(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: bytes))), promise: nil) }
        let done = channel.writeAndFlush(HTTPServerResponsePart.end(nil))
        if !keepAlive { done.whenComplete { _ in channel.close(promise: nil) } }
    }

    /// A stream name from a URL, safe in a reply or a log line.
    private static func printable(_ text: String) -> String {
        String(text.unicodeScalars.prefix(64).map { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7f ? Character($0) : "?" })
    }
}
