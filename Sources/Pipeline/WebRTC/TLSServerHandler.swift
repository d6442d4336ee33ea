import MediaSecurity
import NIOCore

/// HTTPS for the WHIP endpoint: sits first in a connection's pipeline and turns its bytes into HTTP's and back,
/// through an OpenSSL connection (`TLSServerConnection`). A failed handshake (a plain-HTTP request, no common
/// cipher, a client refusing our certificate's alert), one not finished in time, or a bad record later is reported
/// once and closes the connection.
final class TLSServerHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = ByteBuffer

    private let connection: TLSServerConnection
    private let handshakeDeadline: TimeAmount
    private let failed: (String) -> Void
    private var reported = false
    private var deadline: Scheduled<Void>?
    /// Replies written since the last flush, encrypted together when it comes (one record for a head, a body and
    /// an end, instead of three), with their promises.
    private var pending: [UInt8] = []
    private var pendingPromise: EventLoopPromise<Void>?

    /// `failed` gets the reason when the handshake or a record fails, or the handshake takes too long.
    init(connection: TLSServerConnection, handshakeDeadline: TimeAmount, failed: @escaping (String) -> Void) {
        self.connection = connection
        self.handshakeDeadline = handshakeDeadline
        self.failed = failed
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let (channel, handler) = (context.channel, NIOLoopBound(self, eventLoop: context.eventLoop))
        deadline = context.eventLoop.scheduleTask(in: handshakeDeadline) {
            let handler = handler.value
            guard handler.connection.state == .handshaking else { return }
            handler.report("handshake not finished within \(handler.handshakeDeadline.nanoseconds / 1_000_000_000) s")
            channel.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        pendingPromise?.fail(ChannelError.ioOnClosedChannel)
        pendingPromise = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        bytes.withUnsafeReadableBytes { _ = connection.receive($0) }
        let plaintext = connection.takePlaintext()
        // Read after the records: a bad record or the peer's close_notify shows only once they have been read.
        let state = connection.state
        sendOutput(context: context, promise: nil)
        if state == .open { deadline?.cancel() }
        if !plaintext.isEmpty {
            context.fireChannelRead(wrapInboundOut(context.channel.allocator.buffer(bytes: plaintext)))
        }
        switch state {
        case .handshaking, .open:
            break
        case .closed:
            // The client is done: what it asked in the same flight goes unanswered (it said it would not read).
            context.close(promise: nil)
        case .failed(let reason):
            report(reason)
            context.close(promise: nil)
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .byteBuffer(let buffer) = unwrapOutboundIn(data) else {
            promise?.fail(ChannelError.operationUnsupported)  // HTTP here never sends file regions
            return
        }
        pending += buffer.readableBytesView
        if let promise {
            if let pendingPromise { pendingPromise.futureResult.cascade(to: promise) } else { pendingPromise = promise }
        }
    }

    func flush(context: ChannelHandlerContext) {
        let (plaintext, promise) = (pending, pendingPromise)
        pending = []
        pendingPromise = nil
        guard !plaintext.isEmpty else {
            promise?.succeed()
            return context.flush()
        }
        guard plaintext.withUnsafeBytes({ connection.send($0) }) else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        sendOutput(context: context, promise: promise)
    }

    /// Our close_notify before the socket closes, so that the client knows the reply was whole.
    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .all, connection.state == .open {
            connection.close()
            sendOutput(context: context, promise: nil)
        }
        context.close(mode: mode, promise: promise)
    }

    /// Whatever OpenSSL has for the peer (handshake messages, records, alerts), written and flushed.
    private func sendOutput(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        let output = connection.takeOutput()
        guard !output.isEmpty else {
            promise?.succeed()
            return
        }
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: output)), promise: promise)
    }

    private func report(_ reason: String) {
        guard !reported else { return }
        reported = true
        failed(reason)
    }
}
