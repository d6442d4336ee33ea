import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SharedFrames

/// Admits one sender at a time per stream, by the stream's `second_sender` policy.
final class SenderRegistry: Sendable {
    private struct State {
        var active: (id: ConnectionID, channel: Channel)?
        var nextID: ConnectionID = 1
    }
    private let state = NIOLockedValueBox(State())
    let policy: SecondSenderPolicy

    init(policy: SecondSenderPolicy) { self.policy = policy }

    enum Admission {
        case accepted(ConnectionID, replacing: Channel?)
        case refused
    }

    /// Decides for a new connection. An admitted sender holds the stream until its channel closes (not merely
    /// until it is active: a second connection can arrive before the first one's channel becomes active).
    func admit(_ channel: Channel) -> Admission {
        let admission: Admission = state.withLockedValue { state in
            if state.active != nil, policy == .refuse { return .refused }
            let replaced = state.active?.channel
            let id = state.nextID
            state.nextID += 1
            state.active = (id, channel)
            return .accepted(id, replacing: replaced)
        }
        if case .accepted(let id, _) = admission {
            channel.closeFuture.whenComplete { [self] _ in release(id) }
        }
        return admission
    }

    func release(_ id: ConnectionID) {
        state.withLockedValue { state in
            if state.active?.id == id { state.active = nil }
        }
    }

    func closeActive() {
        let channel = state.withLockedValue { $0.active?.channel }
        channel?.close(promise: nil)
    }
}

/// Forwards a sender's bytes to the stream's decode thread; closes the connection when the sender goes idle.
final class SenderHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer

    private let id: ConnectionID
    private let worker: StreamWorker
    private let logger: Logger
    private let idleTimeout: Double
    private var reason = "sender closed the connection"

    init(id: ConnectionID, worker: StreamWorker, logger: Logger, idleTimeout: Double) {
        self.id = id
        self.worker = worker
        self.logger = logger
        self.idleTimeout = idleTimeout
    }

    func channelActive(context: ChannelHandlerContext) {
        worker.setIdleBarrier(on: context.eventLoop)
        worker.enqueue(.connected(id, remote: context.remoteAddress?.description ?? "unknown"))
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = worker.bytePool.copy(unwrapInboundIn(data))
        guard !worker.enqueue(bytes: bytes, receivedAt: MonotonicClock.nanoseconds(), connection: id) else { return }
        // The decode thread is behind: stop reading; TCP flow control holds the sender back until it catches up.
        let channel = context.channel
        _ = channel.setOption(ChannelOptions.autoRead, value: false)
        logger.debug("decoder behind by \(worker.backlogHighWater) bytes: pausing reads from the sender")
        worker.whenDrained {
            channel.eventLoop.execute {
                _ = channel.setOption(ChannelOptions.autoRead, value: true)
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        worker.enqueue(.disconnected(id, reason: reason))
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            reason = "no data for \(idleTimeout) s (idle_timeout)"
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        reason = "connection error: \(error)"
        context.close(promise: nil)
    }
}

/// The datagram side (udp:// and rtp://): the first allowed source address is the sender until it goes quiet for
/// `idle_timeout`; datagrams from other sources are ignored (`second_sender = "refuse"`) or take over. For
/// rtp:// with `keyframe_request`, RTCP feedback goes back to the sender from the same socket.
final class DatagramSenderHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    private let worker: StreamWorker
    private let logger: Logger
    private let configuration: StreamConfiguration
    private let metrics: StreamMetrics
    private var active: (id: ConnectionID, source: SocketAddress)?
    private var nextID: ConnectionID = 1
    private var refused = 0
    private var dropped = 0
    private var disallowed = 0

    init(worker: StreamWorker, logger: Logger, configuration: StreamConfiguration, metrics: StreamMetrics) {
        self.worker = worker
        self.logger = logger
        self.configuration = configuration
        self.metrics = metrics
    }

    func handlerAdded(context: ChannelHandlerContext) {
        worker.setIdleBarrier(on: context.eventLoop)
        guard configuration.keyframeRequest != .none else { return }
        let channel = context.channel
        worker.setFeedbackSender { [self] bytes in
            channel.eventLoop.execute { self.sendFeedback(bytes, on: channel) }
        }
    }

    /// RTCP to the current sender: its RTP port when `rtcp_mux`, else that port + 1.
    private func sendFeedback(_ bytes: [UInt8], on channel: Channel) {
        guard var destination = active?.source, let port = destination.port else { return }
        if !configuration.rtcpMux { destination.port = port == 65535 ? port : port + 1 }
        let envelope = AddressedEnvelope(remoteAddress: destination, data: channel.allocator.buffer(bytes: bytes))
        channel.writeAndFlush(envelope, promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        let source = envelope.remoteAddress
        guard configuration.allow.allows(source) else {
            disallowed += 1
            metrics.refused(.notAllowed)
            if disallowed == 1 || disallowed % 1000 == 0 {
                logger.warning("datagrams from a source outside allow ignored", metadata: [
                    "remote": "\(source)", "ignored": "\(disallowed)",
                ])
            }
            return
        }
        if let current = active, current.source != source {
            guard configuration.secondSender == .takeover else {
                refused += 1
                metrics.refused(.secondSender)
                if refused == 1 || refused % 1000 == 0 {
                    logger.warning("datagrams from a second sender ignored (second_sender = refuse)", metadata: [
                        "remote": "\(source)", "ignored": "\(refused)",
                    ])
                }
                return
            }
            logger.warning("new sender takes over from the current one (second_sender = takeover)", metadata: ["remote": "\(source)"])
            active = nil
        }
        if active == nil {
            active = (nextID, source)
            nextID += 1
            worker.enqueue(.connected(active!.id, remote: source.description))
        }
        // UDP cannot be slowed down: when the decode thread is behind, the datagram is dropped, not queued.
        guard worker.acceptsMoreBytes else {
            dropped += 1
            if dropped == 1 || dropped % 1000 == 0 {
                logger.warning("decoder behind: datagrams dropped", metadata: ["dropped": "\(dropped)"])
            }
            return
        }
        let bytes = worker.bytePool.copy(envelope.data)
        _ = worker.enqueue(bytes: bytes, receivedAt: MonotonicClock.nanoseconds(), connection: active!.id)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            end(reason: "no data for \(configuration.idleTimeout) s (idle_timeout)")
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        end(reason: "listener closed")
        context.fireChannelInactive()
    }

    private func end(reason: String) {
        guard let current = active else { return }
        active = nil
        worker.enqueue(.disconnected(current.id, reason: reason))
    }
}
