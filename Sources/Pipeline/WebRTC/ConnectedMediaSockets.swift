import Glibc
import Logging
import NIOCore
import NIOPosix

/// A socket of its own for each connected session's address: bound to the ICE port beside the shared socket
/// (SO_REUSEPORT, which the kernel allows only to the same user) and connected to the client, so that the kernel
/// hands the client's datagrams to it and not to the shared socket. A flood of the shared port (strangers' STUN at
/// 190 000 datagrams a second) then fills only the shared socket's buffer; before, it crowded the session's media
/// out of the one buffer both had (issue 31, item 4). Where the shared socket is a wildcard, the session's socket is
/// bound to the address its replies leave from (ReplyAddress), and moves with them. Where the shared socket was not
/// bound with SO_REUSEPORT (an inherited one), the sessions stay on it, said once. Confined to the media loop.
final class ConnectedMediaSockets {
    private enum Peer {
        case opening
        /// Bound to `at` (nil: the shared socket's address).
        case open(Channel, at: SocketAddress?)
        /// Left while its socket was being made: closed once it is.
        case leftWhileOpening
    }

    private let loop: EventLoop
    private let local: SocketAddress
    private let wildcard: WildcardMediaSocket?
    private let endpoint: NIOLoopBoundBox<WebRTCEndpoint>
    private let logger: Logger
    private var peers: [SocketAddress: Peer] = [:]
    private var saidUnavailable = false

    init(loop: EventLoop, local: SocketAddress, wildcard: WildcardMediaSocket?, endpoint: NIOLoopBoundBox<WebRTCEndpoint>, logger: Logger) {
        self.loop = loop
        self.local = local
        self.wildcard = wildcard
        self.endpoint = endpoint
        self.logger = logger
    }

    /// `address`: the local address the peer reached (nil where the shared socket has one). Called again when the
    /// session's replies move to another address: its socket moves with them (one being made stays where it is).
    func joined(_ peer: SocketAddress, at address: SocketAddress?) {
        if case .open(let channel, let bound) = peers[peer], bound != address {
            peers[peer] = nil
            channel.close(promise: nil)
        }
        guard peers[peer] == nil else { return }
        // A dual-stack socket's: the same family as the shared socket, so that the kernel prefers this one.
        let dualStack = wildcard?.isIPv6 == true
        guard wildcard == nil || address != nil else { return }
        let bindTo = address.map { dualStack ? $0.mapped ?? $0 : $0 } ?? local
        let connectTo = dualStack ? peer.mapped ?? peer : peer
        peers[peer] = .opening
        let (endpoint, wildcard) = (self.endpoint, self.wildcard)
        let opened = DatagramBootstrap(group: loop)
            .channelOption(ChannelOptions.Types.SocketOption(level: .socket, name: NIOBSDSocket.Option(rawValue: SO_REUSEPORT)), value: 1)
            .channelOption(.socketOption(.so_rcvbuf), value: StreamSource.defaultReceiveBufferBytes)
            .channelOption(.datagramVectorReadMessageCount, value: 16)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 16 * 2048))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(WebRTCMediaHandler(endpoint: endpoint, wildcard: wildcard, boundLocal: address))
                }
            }
            .bind(to: bindTo)
            .flatMap { channel in channel.connect(to: connectTo).map { channel }.flatMapErrorThrowing { error in channel.close(promise: nil); throw error } }
        let bound = NIOLoopBound(self, eventLoop: loop)
        opened.whenComplete { result in bound.value.opened(peer, at: address, result) }
    }

    func left(_ peer: SocketAddress) {
        switch peers[peer] {
        case .opening: peers[peer] = .leftWhileOpening
        case .open(let channel, _):
            peers[peer] = nil
            channel.close(promise: nil)
        case .leftWhileOpening, nil: break
        }
    }

    /// Every socket closed (the server stops).
    func closeAll() {
        for case .open(let channel, _) in peers.values { channel.close(promise: nil) }
        peers = [:]
    }

    private func opened(_ peer: SocketAddress, at address: SocketAddress?, _ result: Result<Channel, Error>) {
        switch (peers[peer], result) {
        case (.opening, .success(let channel)):
            peers[peer] = .open(channel, at: address)
        case (.leftWhileOpening, .success(let channel)):
            peers[peer] = nil
            channel.close(promise: nil)
        case (_, .failure(let error)):
            peers[peer] = nil
            guard !saidUnavailable else { return }
            saidUnavailable = true
            logger.notice("WebRTC: sessions share the media socket (no socket of their own: \(error)); a flood of the port can crowd their datagrams out")
        default:
            break
        }
    }
}
