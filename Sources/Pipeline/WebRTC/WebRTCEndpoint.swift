import NIOCore

/// The WebRTC engine (`WebRTCSessionTable`: no I/O, the time handed in) and what carries out its outputs: datagrams
/// through the media socket, the sessions' own sockets. Confined to the WebRTC server's event loop; every input
/// goes through `drive`, which carries out what it asked for before returning.
final class WebRTCEndpoint {
    let table: WebRTCSessionTable
    /// Sends from the media socket (from the given local address where it has several); set once it is bound.
    var transmit: (([UInt8], SocketAddress, SocketAddress?) -> Void)?
    /// Each session's socket of its own, once the media socket is bound.
    var sockets: ConnectedMediaSockets?
    private var lastPrune: UInt64 = 0

    init(table: WebRTCSessionTable) {
        self.table = table
    }

    /// `input` given to the table, then its outputs carried out.
    func drive<Result>(_ input: (WebRTCSessionTable) -> Result) -> Result {
        let result = input(table)
        for output in table.takeOutputs() {
            switch output {
            case .transmit(let datagram, let remote, let local): transmit?(datagram, remote, local)
            case .peerJoined(let remote, let local): sockets?.joined(remote, at: local)
            case .peerLeft(let remote): sockets?.left(remote)
            }
        }
        return result
    }

    /// The server's 20 ms timer: the table's tick, and once a second the share page's pictures of streams gone.
    func tick(now: UInt64) {
        drive { $0.tick(now: now) }
        guard now &- lastPrune >= 1_000_000_000 else { return }
        lastPrune = now
        FrameImages.shared.prune(live: Set(table.routes.values.map(\.configuration.shmName)))
    }
}
