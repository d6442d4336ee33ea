import CSRT
import Decoding
import Glibc
import Logging
import NIOConcurrencyHelpers
import NIOCore
import SharedFrames

/// The first look at an SRT caller: libsrt asks it (`srt_listen_callback`, on libsrt's receiving thread) before it
/// gives the caller's socket its buffers — about a megabyte (loss lists sized by the flow window, the receive
/// buffer) that libsrt frees only 1 to 2 s after the socket is closed. Refused here, a caller costs almost nothing.
/// - a source outside `allow`, or over `max_connections_per_second`, is refused here;
/// - a caller whose encryption does not match can only be told after the handshake (`SRTListenerThread`): each
///   such refusal holds a socket's memory for a while. While `SRTRefusalPressure` counts too many of them, sources
///   refused lately are refused here; a source with no recent refusal still gets through (a flood cannot lock a
///   good caller out).
/// Shared by libsrt's thread and the listener's thread: everything it holds is behind one lock.
final class SRTAdmissionGate: Sendable {
    private struct State {
        var limiter: PerSourceRateLimiter
        var pressure = SRTRefusalPressure()
        var log: RateLimitedLogger
    }

    private let allow: [AddressRange]
    private let maxConnectionsPerSecond: Int
    private let metrics: StreamMetrics
    private let state: NIOLockedValueBox<State>

    init(configuration: StreamConfiguration, metrics: StreamMetrics, logger: Logger) {
        allow = configuration.allow
        maxConnectionsPerSecond = configuration.maxConnectionsPerSecond
        self.metrics = metrics
        state = NIOLockedValueBox(State(limiter: PerSourceRateLimiter(perSecond: configuration.maxConnectionsPerSecond),
                                        log: RateLimitedLogger(logger: logger)))
    }

    /// Makes libsrt ask this gate about every new caller of `listener`. The gate must outlive the listener's
    /// `srt_close` (after which libsrt asks no more): `SRTListener` owns both.
    func install(on listener: SRTSOCKET) -> Int32 {
        srt_listen_callback(listener, { opaque, _, _, peer, _ in
            guard let opaque else { return -1 }
            let gate = Unmanaged<SRTAdmissionGate>.fromOpaque(opaque).takeUnretainedValue()
            return gate.admits(SRTAdmissionGate.address(peer)) ? 0 : -1
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Whether the caller from `address` may have a socket.
    func admits(_ address: SocketAddress?) -> Bool {
        let now = MonotonicClock.nanoseconds()
        let remote = address?.description ?? "unknown"
        let key = PerSourceRateLimiter.key(address)
        return state.withLockedValue { state in
            let refusal: (StreamMetrics.RefusalReason, String, String)
            if !allow.allows(address) {
                refusal = (.notAllowed, "not-allowed", "SRT caller refused: source not in allow (remote \(remote))")
            } else if !state.limiter.admit(address, now: now) {
                refusal = (.rateLimited, "rate-limited", "SRT caller refused: this source is over max_connections_per_second (\(maxConnectionsPerSecond)) (remote \(remote))")
            } else if state.pressure.holdsBack(key, now: now) {
                refusal = (.rateLimited, "refusal-flood", "SRT caller refused: \(SRTRefusalPressure.limit) callers were refused in the last \(SRTRefusalPressure.holdSeconds) s, and this source is one of them (remote \(remote))")
            } else {
                return true
            }
            metrics.refused(refusal.0)
            state.log.log(.warning, key: refusal.1, now: now, refusal.2)
            return false
        }
    }

    /// A caller from `address` was refused after the handshake (its socket's memory is held a while yet).
    func refusedAfterHandshake(_ address: SocketAddress?) {
        let now = MonotonicClock.nanoseconds()
        state.withLockedValue { $0.pressure.refused(PerSourceRateLimiter.key(address), now: now) }
    }

    static func address(_ pointer: UnsafePointer<sockaddr>?) -> SocketAddress? {
        guard let pointer else { return nil }
        switch Int32(pointer.pointee.sa_family) {
        case AF_INET: return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { SocketAddress($0.pointee) }
        case AF_INET6: return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { SocketAddress($0.pointee) }
        default: return nil
        }
    }
}

/// How many callers were refused after their handshake lately, and from where: once `limit` were in
/// the last `holdSeconds`, their sources are held back. Pure: the gate holds it under its lock.
struct SRTRefusalPressure {
    static let limit = 32
    static let holdSeconds = 3
    static let maximumSources = 4096
    private static var hold: UInt64 { UInt64(holdSeconds) * 1_000_000_000 }

    /// When the last `limit` refusals happened, oldest first.
    private var times: [UInt64] = []
    /// When each source was last refused.
    private var sources: [[UInt8]: UInt64] = [:]

    mutating func refused(_ source: [UInt8], now: UInt64) {
        if times.count == Self.limit { times.removeFirst() }
        times.append(now)
        if sources[source] == nil && sources.count >= Self.maximumSources {
            sources = sources.filter { now &- $0.value < Self.hold }
            if sources.count >= Self.maximumSources { sources.removeAll(keepingCapacity: true) }
        }
        sources[source] = now
    }

    /// Whether a caller from `source` must wait: `limit` refusals within the hold, one of them from it.
    func holdsBack(_ source: [UInt8], now: UInt64) -> Bool {
        guard times.count == Self.limit, let oldest = times.first, now &- oldest < Self.hold else { return false }
        guard let last = sources[source] else { return false }
        return now &- last < Self.hold
    }
}
