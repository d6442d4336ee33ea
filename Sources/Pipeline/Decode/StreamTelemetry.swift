import Bitstream
import CoreMetrics
import Decoding
import Logging
import NIOConcurrencyHelpers
import SharedFrames

/// A defect in a stream's input, by kind: the label of `streamrecvd_stream_defects_total{kind}`.
enum StreamDefect: Hashable, Sendable {
    /// A NAL unit longer than the largest access unit: discarded to the next start code.
    case oversizedNALUnit
    /// Start codes with nothing between them.
    case emptyNALUnit
    /// What the access-unit assembler found wrong.
    case accessUnit(AssemblerProblem.Kind)

    static let allCases: [StreamDefect] = [.oversizedNALUnit, .emptyNALUnit] + AssemblerProblem.Kind.allCases.map { .accessUnit($0) }

    var label: String {
        switch self {
        case .oversizedNALUnit: "oversized_nal_unit"
        case .emptyNALUnit: "empty_nal_unit"
        case .accessUnit(let kind): kind.rawValue
        }
    }
}

/// What is counted both in the ring's header (what `streamrecvctl status` shows) and in the metrics.
enum CountedEvent: Sendable {
    case connection
    case accessUnit
    case frameDecoded
    case decodeError
    case decoderRecreation

    var ringCounter: WritableKeyPath<RingCounters, UInt64> {
        switch self {
        case .connection: \.connections
        case .accessUnit: \.accessUnits
        case .frameDecoded: \.framesDecoded
        case .decodeError: \.decodeErrors
        case .decoderRecreation: \.decoderRecreations
        }
    }
}

/// The decode thread's one way of saying what happened: each call updates the ring's counters or state, the
/// metrics, the status snapshot and the log together, so that none of them can drift from the others. Owned by
/// the decode session (not Sendable: it stays on the decode thread); other threads read `snapshot`.
final class StreamTelemetry {
    let metrics: StreamMetrics
    /// Read by other threads (status, watchdog).
    let snapshot: NIOLockedValueBox<StreamSnapshot>
    let logger: Logger
    /// The ring's header holds the counters and state that `streamrecvctl status` reads: written through the
    /// writer's owner.
    private let ring: FramePublisher
    /// Every repeated line goes through here: at most one per kind per 10 s, with the count suppressed.
    private var log: RateLimitedLogger
    /// Frames published since `fpsWindowStart`, for the frames-per-second gauge.
    private var fpsWindowFrames = 0
    private var fpsWindowStart: UInt64 = 0
    private let clock: DecodeClock
    private var lastPublishedSize = (width: 0, height: 0)

    init(ring: FramePublisher, metrics: StreamMetrics, snapshot: NIOLockedValueBox<StreamSnapshot>, logger: Logger,
         clock: DecodeClock = .monotonic) {
        self.clock = clock
        self.ring = ring
        self.metrics = metrics
        self.snapshot = snapshot
        self.logger = logger
        log = RateLimitedLogger(logger: logger)
    }

    /// A line, at most once per `key` per 10 s (with the number suppressed).
    func log(_ level: Logger.Level, key: String, now: UInt64? = nil, _ message: String) {
        log.log(level, key: key, now: now ?? clock.now(), message)
    }

    func count(_ event: CountedEvent) {
        ring.count(event.ringCounter)
        switch event {
        case .connection: metrics.connections.increment()
        case .accessUnit: metrics.accessUnits.increment()
        case .frameDecoded: metrics.framesDecoded.increment()
        case .decodeError: metrics.decodeErrors.increment()
        case .decoderRecreation: metrics.decoderRecreations.increment()
        }
    }

    func received(bytes: Int) {
        ring.count(\.bytesReceived, UInt64(bytes))
        metrics.bytesReceived.increment(by: Int64(bytes))
    }

    /// A frame (or an access unit that would have become one) not published.
    func dropped(_ reason: StreamMetrics.DropReason) {
        ring.count(\.framesDropped)
        metrics.dropped(reason)
    }

    func defect(_ defect: StreamDefect, count: Int = 1) {
        metrics.defect(defect, count: count)
    }

    /// The ring's state and the snapshot's, together.
    func setState(_ state: StreamState) {
        ring.setState(state)
        snapshot.withLockedValue { $0.state = state }
    }

    func codecDetected(_ codec: VideoCodec) {
        ring.setCodec(codec.rawValue)
        snapshot.withLockedValue { $0.codec = codec.rawValue }
    }

    func decodingPath(_ path: String?) {
        metrics.hardware.record(path == nil ? 0 : 1)
        snapshot.withLockedValue { $0.path = path ?? "software" }
    }

    /// A frame is in the ring (the writer counted it in the ring's header).
    func published(width: Int, height: Int, corrupt: Bool, completedAt: UInt64?, decodedAt: UInt64? = nil) {
        let now = clock.now()
        if let decodedAt, now >= decodedAt { metrics.frameWrite.recordNanoseconds(Int64(now - decodedAt)) }
        let sizeChanged = width != lastPublishedSize.width || height != lastPublishedSize.height
        lastPublishedSize = (width, height)
        snapshot.withLockedValue {
            $0.framesPublished += 1
            if sizeChanged { $0.size = "\(width)x\(height)" }
        }
        metrics.framesPublished.increment()
        if corrupt { metrics.framesCorrupt.increment() }
        if let completedAt, now >= completedAt { metrics.publishLatency.recordNanoseconds(Int64(now - completedAt)) }
        metrics.width.record(width)
        metrics.height.record(height)
        fpsWindowFrames += 1
        if now - fpsWindowStart >= 1_000_000_000 {
            if fpsWindowStart != 0 {
                metrics.framesPerSecond.record(Double(fpsWindowFrames) * 1e9 / Double(now - fpsWindowStart))
            }
            fpsWindowStart = now
            fpsWindowFrames = 0
        }
    }

    /// The sender is gone: no frames per second until the next one.
    func senderEnded() {
        metrics.framesPerSecond.record(0)
        fpsWindowStart = 0
    }
}
