import CoreMetrics
import Decoding
import Logging
import NIOConcurrencyHelpers
import NIOCore
import SharedFrames

/// At most `maximum` connections of one HTTP endpoint open at once (the metrics endpoint, the WHIP endpoint): a
/// connection over it is refused, counted and said at most once per 10 s; one that closes gives its place back.
final class ConnectionCap: Sendable {
    let maximum: Int
    /// The endpoint's name in the refusal line.
    private let endpoint: String
    private let refusals: CoreMetrics.Counter
    private let state: NIOLockedValueBox<(open: Int, log: RateLimitedLogger)>

    init(maximum: Int, endpoint: String, refusals: CoreMetrics.Counter, logger: Logger) {
        self.maximum = maximum
        self.endpoint = endpoint
        self.refusals = refusals
        state = NIOLockedValueBox((0, RateLimitedLogger(logger: logger)))
    }

    /// True when `channel` may stay open; false when the caller must close it.
    func admit(_ channel: Channel) -> Bool {
        let now = MonotonicClock.nanoseconds()
        let (maximum, endpoint) = (self.maximum, self.endpoint)
        let admitted = state.withLockedValue { state -> Bool in
            guard state.open < maximum else {
                state.log.log(.warning, key: "\(endpoint)-full", now: now,
                              "\(endpoint): \(maximum) connections open; closing new ones (remote \(channel.remoteAddress?.description ?? "unknown"))")
                return false
            }
            state.open += 1
            return true
        }
        guard admitted else {
            refusals.increment()
            return false
        }
        channel.closeFuture.whenComplete { [state] _ in state.withLockedValue { $0.open -= 1 } }
        return true
    }
}
