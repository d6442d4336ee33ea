import MediaSecurity
import NIOCore

/// HTTPS for the WHIP endpoint: sits first in a connection's pipeline and turns its bytes into HTTP's and back,
/// through an OpenSSL connection (`TLSServerConnection`). A failed handshake (a plain-HTTP request, no common
/// cipher, a client refusing our certificate's alert) is reported once and closes the connection.
final class TLSServerHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = ByteBuffer

    private let connection: TLSServerConnection
    private let failed: (String) -> Void
    private var reported = false

    /// `failed` gets OpenSSL's reason when the handshake or a record fails.
    init(connection: TLSServerConnection, failed: @escaping (String) -> Void) {
        self.connection = connection
        self.failed = failed
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        let state = bytes.withUnsafeReadableBytes { connection.receive($0) }
        let plaintext = connection.takePlaintext()
        writeOutput(context: context, promise: nil)
        context.flush()
        if !plaintext.isEmpty {
            context.fireChannelRead(wrapInboundOut(context.channel.allocator.buffer(bytes: plaintext)))
        }
        switch state {
        case .handshaking, .open:
            break
        case .closed:
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
        let accepted = buffer.withUnsafeReadableBytes { connection.send($0) }
        guard accepted else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        writeOutput(context: context, promise: promise)
    }

    /// Our close_notify before the socket closes, so that the client knows the reply was whole.
    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .all, connection.state == .open {
            connection.close()
            writeOutput(context: context, promise: nil)
            context.flush()
        }
        context.close(mode: mode, promise: promise)
    }

    private func writeOutput(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        let output = connection.takeOutput()
        guard !output.isEmpty else {
            promise?.succeed()
            return
        }
        context.write(wrapOutboundOut(context.channel.allocator.buffer(bytes: output)), promise: promise)
    }

    private func report(_ reason: String) {
        guard !reported else { return }
        reported = true
        failed(reason)
    }
}
