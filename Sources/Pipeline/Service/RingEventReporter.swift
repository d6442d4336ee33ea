import CoreMetrics
import Decoding
import Logging
import NIOConcurrencyHelpers
import SharedFrames

/// Logs and counts what happens to a stream's ring (`FrameRingEvent`): each kind at most once per 10 s, with the
/// number suppressed, so that someone truncating the object in a loop cannot flood the journal. Called by the
/// pipeline while the writer is made, then by the decode thread; `problem` is read by the STATUS line.
final class RingEventReporter: Sendable {
    private let shmName: String
    private let metrics: StreamMetrics
    private struct State {
        var log: RateLimitedLogger
        /// Why the stream has no usable ring now; nil while it has one.
        var problem: String?
    }

    private let state: NIOLockedValueBox<State>

    init(shmName: String, logger: Logger, metrics: StreamMetrics) {
        self.shmName = shmName
        self.metrics = metrics
        state = NIOLockedValueBox(State(log: RateLimitedLogger(logger: logger), problem: nil))
    }

    /// Why the stream has no usable ring now; nil while it has one.
    var problem: String? { state.withLockedValue { $0.problem } }

    func report(_ event: FrameRingEvent) {
        let path = "/dev/shm/\(shmName)"
        switch event {
        case .created(let bytes, let slots, let reason):
            log(.info, "ring-created", "created the frame ring \(path): \(ConfigurationReport.size(bytes)), \(slots) slots (\(reason))", clears: true)
        case .tookOver(let bytes, let slots):
            log(.info, "ring-took-over", "took over the frame ring \(path): \(ConfigurationReport.size(bytes)), \(slots) slots; frames and counters continue", clears: true)
        case .resized(let from, let to, let slots):
            log(.info, "ring-resized", "frame ring \(path) moved to a new object sized for the frames now decoded: \(ConfigurationReport.size(from)) -> \(ConfigurationReport.size(to)), \(slots) slots (readers follow it)", clears: true)
        case .slotsLimited(let wanted, let slots, let limit):
            metrics.ringProblem(.sizeLimit)
            log(.warning, "ring-limited", "frames of this format need more than ring_size_limit (\(ConfigurationReport.size(limit))) for \(wanted) slots: the ring has \(slots)")
        case .foreignObject(let owner, let mode, let replaced):
            metrics.ringProblem(.foreign)
            log(.warning, "ring-foreign", "\(path) existed but was not created by this daemon's user (owner uid \(owner), mode \(String(mode, radix: 8))): not adopted; "
                + (replaced ? "replaced it with a new ring (the old object's readers get nothing more)" : "it cannot be replaced by this user"))
        case .recreated(let damage):
            metrics.ringRecreations.increment()
            metrics.ringProblem(RingProblem(damage))
            log(.error, "ring-\(damage)", "shared-memory object \(path) \(damage.rawValue); re-created it (readers follow the new one)", clears: true)
        case .failed(let reason):
            metrics.ringProblem(.unavailable)
            state.withLockedValue { $0.problem = "no ring: \(reason)" }
            log(.error, "ring-failed", "\(path): \(reason); frames are dropped until a ring can be made (retried every second)")
        }
    }

    private func log(_ level: Logger.Level, _ key: String, _ message: String, clears: Bool = false) {
        let now = MonotonicClock.nanoseconds()
        state.withLockedValue { state in
            if clears { state.problem = nil }
            state.log.log(level, key: key, now: now, message)
        }
    }
}

/// What went wrong with a ring, as counted in `streamrecvd_ring_problems_total{kind}`.
enum RingProblem: String, CaseIterable, Sendable {
    case truncated, unlinked, replaced, foreign, unavailable
    /// A format needed more than ring_size_limit: fewer slots, or frames refused.
    case sizeLimit = "size_limit"

    init(_ damage: RingDamage) {
        switch damage {
        case .truncated: self = .truncated
        case .unlinked: self = .unlinked
        case .replaced: self = .replaced
        case .unavailable: self = .unavailable
        }
    }
}
