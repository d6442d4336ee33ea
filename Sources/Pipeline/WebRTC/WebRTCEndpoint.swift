import SharedFrames
import NIOCore

/// The WebRTC engine (`WebRTCSessionTable`: no I/O, the time handed in) and what carries out its outputs: datagrams
/// through the media socket, the sessions' own sockets, a timer for the table's next deadline. Confined to the WebRTC
/// server's event loop; every input goes through `drive`, which carries out what it asked for before returning.
final class WebRTCEndpoint {
    let table: WebRTCSessionTable
    /// Sends from the media socket (from the given local address where it has several); set once it is bound.
    var transmit: (([UInt8], SocketAddress, SocketAddress?) -> Void)?
    /// Each session's socket of its own, once the media socket is bound.
    var sockets: ConnectedMediaSockets?
    /// Where the deadline timer runs (nil: no timer, the caller ticks), and the time it reads.
    private let loop: EventLoop?
    private let clock: () -> UInt64
    private var timer: ArmedTimer?
    private var lastPrune: UInt64 = 0
    private var stopped = false

    private struct ArmedTimer {
        var deadline: UInt64
        var task: Scheduled<Void>
    }

    init(table: WebRTCSessionTable, loop: EventLoop? = nil, clock: @escaping () -> UInt64 = MonotonicClock.nanoseconds) {
        self.table = table
        self.loop = loop
        self.clock = clock
    }

    /// `input` given to the table, then its outputs carried out and the timer set for what it has to do next.
    func drive<Result>(_ input: (WebRTCSessionTable) -> Result) -> Result {
        let result = input(table)
        for output in table.takeOutputs() {
            switch output {
            case .transmit(let datagram, let remote, let local): transmit?(datagram, remote, local)
            case .peerJoined(let remote, let local): sockets?.joined(remote, at: local)
            case .peerLeft(let remote): sockets?.left(remote)
            }
        }
        armTimer()
        return result
    }

    /// The table's deadline came, or the server's once-a-second timer (which also drops the share page's pictures of
    /// streams gone).
    func tick(now: UInt64) {
        drive { $0.tick(now: now) }
        guard now &- lastPrune >= 1_000_000_000 else { return }
        lastPrune = now
        FrameImages.shared.prune(live: Set(table.routes.values.map(\.configuration.shmName)))
    }

    /// A timer for the table's next deadline, unless one as early is set: a DTLS retransmission, a NACK, a report,
    /// an expiry comes when it is due, and an idle table wakes nobody. At least a millisecond ahead. After a datagram
    /// only its session's deadlines are looked at (`takeNextDeadline`); the tick at the timer looks at them all.
    private func armTimer() {
        guard let loop, !stopped else { return }
        let now = clock()
        guard let deadline = table.takeNextDeadline(now: now) else { return }
        if let timer, timer.deadline <= deadline { return }
        timer?.task.cancel()
        let delay = max(deadline > now ? deadline - now : 0, 1_000_000)
        let bound = NIOLoopBound(self, eventLoop: loop)
        timer = ArmedTimer(deadline: deadline, task: loop.scheduleTask(in: .nanoseconds(Int64(clamping: delay))) {
            bound.value.timer = nil
            bound.value.tick(now: bound.value.clock())
        })
    }

    /// The server stops: no timer outlives it.
    func stop() {
        stopped = true
        timer?.task.cancel()
        timer = nil
    }
}
