import CoreMetrics
import Logging
import NIOConcurrencyHelpers
import NIOCore
import SharedFrames

/// What an rtsp:// stream's sessions share.
struct RTSPClientContext: Sendable {
    let group: EventLoopGroup
    let metrics: StreamMetrics
    let logger: Logger
}

/// Where an rtsp:// stream's client stands, for the STATUS line.
enum RTSPClientState: Sendable, Equatable, CustomStringConvertible {
    case connecting(attempt: Int)
    /// PLAY succeeded: "h264 over UDP".
    case playing(String)
    /// The last attempt failed (why), the next one starts after `delay` seconds.
    case retrying(failure: String, attempt: Int, delay: Double)
    case stopped

    var description: String {
        switch self {
        case .connecting(let attempt): attempt == 1 ? "rtsp connecting" : "rtsp connecting, attempt \(attempt)"
        case .playing(let what): "rtsp playing \(what)"
        case .retrying(let failure, let attempt, let delay):
            "rtsp \(failure); attempt \(attempt + 1) in \(String(delay, decimals: 1)) s"
        case .stopped: "rtsp stopped"
        }
    }
}

/// source = "rtsp://…": the daemon as the RTSP client, one session at a time. A session that fails or ends is
/// followed by another after a capped exponential backoff (0.1 s doubling to 1 s, so a camera that reboots is
/// streaming again within about a second of answering; up to 10 s after a refusal or a protocol error, and from
/// 5 up to 30 s after a refused password, which cameras punish by locking the account). The backoff starts over
/// only after a session that lasted (`lastingSession`: still playing that long after PLAY, with a frame decoded): a
/// server that sends a keyframe and closes is not asked again ten times a second. Each failure is counted by kind;
/// a failure is logged when it differs from the last one logged (once per change of state, not once per attempt),
/// and so is "playing": a session that keeps playing briefly and ending the same way is logged once, then at
/// debug level. The state is in the stream's STATUS line.
final class RTSPClient: Sendable {
    static let initialDelay = 0.1
    static let maximumDelay = 1.0
    static let maximumDelayUnauthorized = 30.0
    static let maximumDelayRefused = 10.0
    /// How long a session must play (with a frame decoded) for the backoff to start over.
    static let lastingSession = 5.0

    let source: RTSPSource
    let configuration: StreamConfiguration
    let worker: StreamWorker
    let context: RTSPClientContext
    let state = NIOLockedValueBox(RTSPClientState.connecting(attempt: 1))
    /// Whether the client runs, and the wait of a backoff in progress, which `stop()` cancels, so that waiting needs
    /// no polling (a camera that stays away for days costs one attempt a second, not fifty wake-ups).
    private let phase = NIOLockedValueBox(Phase.running(backoff: nil))

    private enum Phase {
        case running(backoff: Task<Void, any Error>?)
        case stopping
    }
    private let finished = OneShotSignal()
    /// The session's connection, closed by `stop()` when the session does not end by itself at once.
    private let current = NIOLockedValueBox<RTSPConnection?>(nil)
    /// What earlier sessions learnt about the server (it speaks Digest; it refuses interleaved TCP).
    private let memory = NIOLockedValueBox(RTSPServerMemory())

    init(source: RTSPSource, configuration: StreamConfiguration, worker: StreamWorker, context: RTSPClientContext) {
        self.source = source
        self.configuration = configuration
        self.worker = worker
        self.context = context
    }

    func start() {
        Task { await run() }
    }

    /// Ends the session in progress (TEARDOWN) and waits for the client to finish. A session still setting up
    /// against a slow server is cut short: its connection is closed, which fails the request it waits on.
    func stop() async {
        phase.withLockedValue { phase in
            if case .running(let backoff) = phase { backoff?.cancel() }
            phase = .stopping
        }
        let closer = Task { [current] in
            try await Task.sleep(nanoseconds: 500_000_000)
            while true {  // until the client has finished (cancelled then): a connection may come up later
                current.withLockedValue { $0 }?.close()
                try await Task.sleep(nanoseconds: 100_000_000)
            }
        }
        await finished.wait()
        closer.cancel()
    }

    private var isStopping: Bool {
        phase.withLockedValue { if case .stopping = $0 { true } else { false } }
    }

    /// The new state, for STATUS= (read from `state`) and for the ring header through the decode thread, which
    /// owns the ring (`streamrecvctl status`).
    private func enter(_ new: RTSPClientState) {
        state.withLockedValue { $0 = new }
        worker.enqueue(.sourceStatus(new == .stopped ? "" : new.description))
    }

    private func run() async {
        defer {
            enter(.stopped)
            context.metrics.rtspPlaying.record(0)
            finished.fire()
        }
        let logger = context.logger
        var nextID: ConnectionID = 1
        var policy = RTSPReconnectPolicy()
        while !isStopping {
            enter(.connecting(attempt: policy.attempt))
            let session = RTSPSession(source: source, configuration: configuration, worker: worker, context: context, id: nextID,
                                      current: current, memory: memory)
            nextID += 1
            var played: (what: String, at: UInt64)?
            let failure = await session.run(stopRequested: { isStopping }) { what in
                played = (what, MonotonicClock.nanoseconds())
                enter(.playing(what))
                context.metrics.rtspSessions.increment()
                context.metrics.rtspPlaying.record(1)
                let line = "RTSP session playing: \(what) from \(source.displayURL)"
                if policy.isNews(playing: what) { logger.info("\(line)") } else { logger.debug("\(line)") }
            }
            // Stopping: whatever cut the session short (its connection closed by stop()) is not a failure.
            guard let failure, !isStopping else { break }
            context.metrics.rtspPlaying.record(0)
            context.metrics.rtspFailure(failure.kind)
            let lasted = played.map { MonotonicClock.nanoseconds() &- $0.at >= UInt64(Self.lastingSession * 1e9) } ?? false
            let delay = policy.ended(failure, played: played?.what, lasted: lasted && worker.activity.lastDecoded(of: nextID - 1) != nil)
            let message = played != nil ? "RTSP session ended: \(failure); reconnecting" : "RTSP \(source.displayURL): \(failure); retrying"
            if delay.isNews {
                logger.warning("\(message) (backoff up to \(String(Self.cap(for: failure), decimals: 0)) s)")
            } else {
                logger.debug("\(message) (attempt \(policy.attempt))")
            }
            enter(.retrying(failure: failure.description, attempt: policy.attempt - 1, delay: delay.seconds))
            let wait = Task { try await Task.sleep(nanoseconds: UInt64(delay.seconds * 1e9)) }
            phase.withLockedValue { phase in
                guard case .running = phase else { return wait.cancel() }  // stop() came before the wait was there
                phase = .running(backoff: wait)
            }
            _ = await wait.result
            phase.withLockedValue { if case .running = $0 { $0 = .running(backoff: nil) } }
        }
    }

    /// A server that went away is asked again often (it may be back any moment); one that answered but said no
    /// (404, an SDP without usable video) less often, and a refused password rarely.
    static func cap(for failure: RTSPFailure) -> Double {
        switch failure {
        case .unauthorized: maximumDelayUnauthorized
        case .refused, .protocolError, .undecodable, .insecureAuthentication, .redirected, .redirectRefused: maximumDelayRefused
        default: maximumDelay
        }
    }
}

/// An RTSP client's backoff and its once-per-change logging, as a value. The backoff starts over only after a
/// session that lasted; a failure is news when it differs from the last one logged, and "playing" is news unless
/// the last session played the same and ended before it lasted (a play→end cycle is logged once).
struct RTSPReconnectPolicy: Equatable {
    private(set) var attempt = 1
    /// The wait before the next attempt.
    private var delay = RTSPClient.initialDelay
    private var lastLogged: String?
    /// What the last session played, when it ended before it lasted.
    private var shortPlay: String?

    func isNews(playing what: String) -> Bool { shortPlay != what }

    /// A session ended, or an attempt failed, with `failure`, having played `played` (nil: never got to PLAY);
    /// `lasted`: long enough, with video, to start the backoff over. Returns the wait and whether to log it as news.
    mutating func ended(_ failure: RTSPFailure, played: String?, lasted: Bool) -> (seconds: Double, isNews: Bool) {
        if lasted {
            (attempt, delay, lastLogged, shortPlay) = (1, RTSPClient.initialDelay, nil, nil)
        } else {
            attempt += 1
            shortPlay = played
        }
        if case .unauthorized = failure { delay = max(delay, 5) }
        let news = lastLogged != failure.description
        lastLogged = failure.description
        let wait = delay
        delay = min(delay * 2, RTSPClient.cap(for: failure))
        return (wait, news)
    }
}
