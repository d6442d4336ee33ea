import Bitstream
import Glibc
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SharedFrames

/// Why one RTSP session attempt ended, or could not start.
enum RTSPFailure: Error, Equatable, CustomStringConvertible {
    /// No TCP connection (refused, unreachable, timed out, name not resolved).
    case unreachable(String)
    /// 401 after the credentials were sent, or 401 with none configured.
    case unauthorized(credentialsSent: Bool)
    /// A status other than 2xx and 401, for `method`.
    case refused(method: String, status: Int, reason: String)
    /// Bytes that are not RTSP, an SDP without usable video, an unusable Transport.
    case protocolError(String)
    /// No answer to a request within the timeout.
    case timedOut(method: String)
    /// The server closed the connection.
    case closed
    /// The session played, then no RTP arrived for the stall limit.
    case stalled(seconds: Double)
    /// The server said RTCP BYE: the stream ended.
    case ended
    /// The session played, packets arrived, but no frame decoded for the stall limit (no parameter sets anywhere,
    /// or not the codec the SDP names).
    case undecodable(seconds: Double)
    /// The password was not sent: the server asks for Basic (in clear) where that is not allowed, or offers
    /// Digest only in a form this client does not speak next to Basic.
    case insecureAuthentication(String)
    /// A redirect (301, 302, 303, 307) to follow: its Location. Handled within the session.
    case redirected(String)
    /// A redirect not followed: too many, to another scheme, or unusable.
    case redirectRefused(String)

    /// The metric label, and the key for logging each kind once per change.
    var kind: String {
        switch self {
        case .unreachable: "unreachable"
        case .unauthorized: "unauthorized"
        case .refused: "refused"
        case .protocolError: "protocol"
        case .timedOut: "timeout"
        case .closed: "closed"
        case .stalled: "stalled"
        case .ended: "ended"
        case .undecodable: "undecodable"
        case .insecureAuthentication: "insecure_auth"
        case .redirected, .redirectRefused: "redirect"
        }
    }

    static let kinds = ["unreachable", "unauthorized", "refused", "protocol", "timeout", "closed", "stalled", "ended", "undecodable",
                        "insecure_auth", "redirect"]

    var description: String {
        switch self {
        case .unreachable(let why): "cannot connect: \(why)"
        case .unauthorized(let sent): sent ? "the server refused the credentials (401 Unauthorized)"
            : "the server wants credentials (401 Unauthorized) and source has none"
        case .refused(let method, let status, let reason): "\(method) answered \(status) \(reason)"
        case .protocolError(let why): "protocol error: \(why)"
        case .timedOut(let method): "no answer to \(method)"
        case .closed: "the server closed the connection"
        case .stalled(let seconds): "no video for \((seconds * 10).rounded() / 10) s"
        case .ended: "the server ended the stream (RTCP BYE)"
        case .undecodable(let seconds):
            "nothing decodable for \((seconds * 10).rounded() / 10) s: packets arrive, but no frame decodes (no parameter sets, or another codec than the SDP's)"
        case .insecureAuthentication(let why): "authentication refused: \(why)"
        case .redirected: "the server answered with a redirect where none is followed (only OPTIONS and DESCRIBE are redirected)"
        case .redirectRefused(let why): "redirect not followed: \(why)"
        }
    }
}

/// Whether the connection's reads are held back until the decode thread drains its backlog; shared with the
/// session's watch. While they are, the server's silence is the daemon's own doing, and a request would make the
/// connection read on to its answer, which comes behind the media the server has queued meanwhile: past the
/// backlog's allowance that media would be dropped (`StreamWorker.acceptsBytesAlreadyRead`).
enum ReadHold: Sendable, Equatable {
    /// Reading, since the last hold ended (0: never held back).
    case reading(since: UInt64)
    case heldBack

    /// Where the server's silence since its last packet at `time` counts from: `time`, or the end of the last hold
    /// if later; nil while held back, when the server cannot be heard.
    func silentSince(_ time: UInt64) -> UInt64? {
        guard case .reading(let since) = self else { return nil }
        return max(time, since)
    }

    /// No request (a keep-alive) goes out while held back: it goes once reads resume.
    var isHeldBack: Bool { self == .heldBack }
}

/// The RTSP connection's channel handler: requests go out in order and their answers come back in order (a
/// client may pipeline, RFC 2326 §9.1); interleaved frames go to `interleaved` at once, on the event loop. The
/// server's own requests (a keep-alive GET_PARAMETER or OPTIONS) are answered. Confined to the channel's event loop.
final class RTSPConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var parser = RTSPStreamParser()
    private var pending: [EventLoopPromise<RTSPResponse>] = []
    /// Interleaved frames: channel number and payload (a view valid during the call).
    var interleaved: ((UInt8, ArraySlice<UInt8>) -> Void)?
    /// Why the connection ended (read by the session task).
    let failure = NIOLockedValueBox<RTSPFailure?>(nil)
    /// Whether reads wait for the decode thread (read by the session task).
    let readHold = NIOLockedValueBox(ReadHold.reading(since: 0))
    private var context: ChannelHandlerContext?
    /// Reads pause while the decode thread is behind (back-pressure on the server) and while the server sends more
    /// than `InterleavedIntakeBudget` allows of what does not become video; never while a request waits for its
    /// answer (a keep-alive's answer is behind the media in the byte stream).
    private var reading = ReadState.flowing
    private var budget = InterleavedIntakeBudget()
    /// Interleaved bytes on the RTP channel refused in a row (not the session's RTP); past the limit the server is
    /// flooding us with what we would only read and drop, and the connection ends.
    private var refusedInARow = 0
    static let refusedLimit = 16 << 20

    enum ReadState {
        case flowing
        /// Until the decode thread has drained its backlog.
        case behind
        /// Until the intake budget's window ends.
        case throttled
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    /// Queues `promise` for the next answer and writes the request.
    func send(_ request: [UInt8], answer promise: EventLoopPromise<RTSPResponse>) {
        guard let context, failure.withLockedValue({ $0 }) == nil else {
            promise.fail(failure.withLockedValue { $0 } ?? .closed)
            return
        }
        pending.append(promise)
        resumeReading()
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: request)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        parser.append(buffer.readableBytesView)
        do {
            while let event = try parser.next() {
                switch event {
                case .response(let response):
                    guard !pending.isEmpty else { continue }  // an answer to nothing: ignored
                    pending.removeFirst().succeed(response)
                case .request(let method, let cseq):
                    // A server that sends requests and never reads the answers is not let grow our memory.
                    guard context.channel.isWritable else {
                        fail(.protocolError("the server sends requests and does not read the answers"), context: context)
                        return
                    }
                    let status = method == "OPTIONS" || method == "GET_PARAMETER" ? "200 OK" : "501 Not Implemented"
                    let answer = "RTSP/1.0 \(status)\r\nCSeq: \((cseq ?? "0").prefix(32))\r\n\r\n"
                    context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: answer)), promise: nil)
                case .interleaved(let channel, let payload):
                    interleaved?(channel, payload)
                }
            }
        } catch {
            fail(.protocolError("\(error)"), context: context)
            return
        }
    }

    /// Stops reading until `worker` has drained its backlog (on the event loop); not while a request is pending.
    func pauseReading(until worker: StreamWorker) {
        guard pause(.behind), let loop = context?.eventLoop else { return }
        readHold.withLockedValue { $0 = .heldBack }
        let bound = NIOLoopBound(self, eventLoop: loop)
        worker.whenDrained { loop.execute { bound.value.resumeReading() } }  // called by the decode thread
    }

    private func pause(_ state: ReadState) -> Bool {
        guard let context, pending.isEmpty else { return false }
        switch (reading, state) {
        case (.flowing, _): break
        // Throttled, then behind: held back until the backlog drains, whenever the budget's window ends.
        case (.throttled, .behind): break
        default: return false
        }
        reading = state
        try? context.channel.syncOptions?.setOption(.autoRead, value: false)
        return true
    }

    private func resumeReading() {
        guard let context else { return }
        if case .flowing = reading { return }
        if case .behind = reading { readHold.withLockedValue { $0 = .reading(since: MonotonicClock.nanoseconds()) } }
        reading = .flowing
        try? context.channel.syncOptions?.setOption(.autoRead, value: true)
        context.read()
    }

    /// The session's verdict on an RTP-channel frame of `bytes`: `productive` when it went to the decode thread
    /// while frames decode. Refused ones in a row past the limit end the connection; unproductive ones past the
    /// budget pause reading until the budget's window ends.
    func noteRTP(accepted: Bool, productive: Bool, bytes: Int) {
        refusedInARow = accepted ? 0 : refusedInARow + bytes
        guard let context else { return }
        if refusedInARow > Self.refusedLimit {
            return fail(.protocolError("the server floods the connection with interleaved data that is not the session's RTP"), context: context)
        }
        let now = MonotonicClock.nanoseconds()
        guard !productive, let resume = budget.note(unproductive: bytes, now: now), pause(.throttled) else { return }
        // On the loop (a handler's method): the task runs there too, so it may hold this handler.
        context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(Int64(clamping: resume &- now))) {
            if case .throttled = self.reading { self.resumeReading() }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(.closed, context: context)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        fail(.closed, context: context)  // a reset: the server went away
    }

    private func fail(_ reason: RTSPFailure, context: ChannelHandlerContext) {
        let first = failure.withLockedValue { failure in
            if failure == nil { failure = reason }
            return failure!
        }
        let waiting = pending
        pending = []
        for promise in waiting { promise.fail(first) }
        context.close(promise: nil)
    }
}

/// How many bytes an RTSP server may send per second over the connection that do not become video (refused,
/// dropped while the decode thread is behind, or taken while nothing decodes): a camera's junk is far below it, a
/// flood of garbage is read no faster (and so costs little CPU, to the reader and to the decoder).
struct InterleavedIntakeBudget {
    static let windowNanoseconds: UInt64 = 1_000_000_000
    static let unproductiveBytesPerWindow = 8 << 20
    private var windowStart: UInt64 = 0
    private var unproductive = 0

    /// Notes `bytes` that did not become video at `now`; returns when reading may resume once the window's budget
    /// is spent (nil while it is not).
    mutating func note(unproductive bytes: Int, now: UInt64) -> UInt64? {
        if now &- windowStart >= Self.windowNanoseconds {
            windowStart = now
            unproductive = 0
        }
        unproductive += bytes
        return unproductive > Self.unproductiveBytesPerWindow ? windowStart + Self.windowNanoseconds : nil
    }
}

/// One RTSP connection: requests with CSeq, the session header once known, and authorization once challenged.
/// Used by one session task at a time.
final class RTSPConnection: Sendable {
    let channel: Channel
    /// Touched only on the channel's event loop (`NIOLoopBound` checks).
    let handler: NIOLoopBound<RTSPConnectionHandler>
    /// Why the connection ended: the handler's, read by the session task.
    let failure: NIOLockedValueBox<RTSPFailure?>
    /// Whether its reads wait for the decode thread: the handler's, read by the session task.
    let readHold: NIOLockedValueBox<ReadHold>
    /// How long a request may wait for its answer.
    static let answerTimeout = TimeAmount.seconds(5)

    private init(channel: Channel, handler: RTSPConnectionHandler) {
        self.channel = channel
        self.handler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
        failure = handler.failure
        readHold = handler.readHold
    }

    static func connect(host: String, port: Int, group: EventLoopGroup) async throws(RTSPFailure) -> RTSPConnection {
        // A handler per channel: with a name of several addresses NIO tries more than one connection (Happy
        // Eyeballs), and the losers' handlers are removed after the winner's is added.
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(.seconds(3))
            .channelOption(.socketOption(.so_keepalive), value: 1)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 16 << 10, initial: 64 << 10, maximum: 1 << 20))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(RTSPConnectionHandler()) }
            }
        do {
            let channel = try await bootstrap.connect(host: host, port: port).get()
            return try await channel.eventLoop.submit {
                let handler = try channel.pipeline.syncOperations.handler(type: RTSPConnectionHandler.self)
                return RTSPConnection(channel: channel, handler: handler)
            }.get()
        } catch {
            throw .unreachable(Self.describe(error))
        }
    }

    /// Writes one request and waits for its answer. `headers` go after CSeq; the body, if any, is SDP-free text.
    func request(_ method: String, url: String, cseq: Int, headers: [(String, String)],
                 timeout: TimeAmount = RTSPConnection.answerTimeout) async throws(RTSPFailure) -> RTSPResponse {
        var text = "\(method) \(url) RTSP/1.0\r\nCSeq: \(cseq)\r\nUser-Agent: streamrecvd\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        let promise = channel.eventLoop.makePromise(of: RTSPResponse.self)
        let bytes = Array(text.utf8)
        let handler = self.handler
        channel.eventLoop.execute { handler.value.send(bytes, answer: promise) }
        let timeout = channel.eventLoop.scheduleTask(in: timeout) { promise.fail(RTSPFailure.timedOut(method: method)) }
        defer { timeout.cancel() }
        do {
            return try await promise.futureResult.get()
        } catch let failure as RTSPFailure {
            throw failure
        } catch {
            throw .protocolError("\(error)")
        }
    }

    /// Back-pressure: no more reads until `worker` drains (called on the event loop).
    func pauseReading(until worker: StreamWorker) { handler.value.pauseReading(until: worker) }

    /// Writes an interleaved frame (RTCP to the server, over TCP).
    func writeInterleaved(channel number: UInt8, _ payload: [UInt8]) {
        guard payload.count <= 0xffff else { return }
        var buffer = channel.allocator.buffer(capacity: payload.count + 4)
        buffer.writeBytes([0x24, number, UInt8(payload.count >> 8), UInt8(payload.count & 0xff)])
        buffer.writeBytes(payload)
        channel.writeAndFlush(buffer, promise: nil)
    }

    func close() {
        channel.close(promise: nil)
    }

    /// "connection refused" rather than NIO's type dump.
    static func describe(_ error: Error) -> String {
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
        if error is ChannelError, case .connectTimeout = error as! ChannelError { return "connection timed out" }
        if let error = error as? NIOConnectionError {
            if let first = error.connectionErrors.first { return describe(first.error) }
            if error.dnsAAAAError != nil || error.dnsAError != nil { return "\(error.host) does not resolve" }
            return "\(error.host) has no address"
        }
        return "\(error)"
    }
}
