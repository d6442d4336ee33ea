import NIOConcurrencyHelpers
import NIOCore

/// Identifies one sender connection (a TCP connection, or a datagram source while it is the stream's sender).
typealias ConnectionID = UInt64

/// Why a sender stopped being the stream's sender (logged at most once per 10 s per kind).
enum DisconnectReason: Sendable, CustomStringConvertible {
    case closedBySender
    case idle(seconds: Double)
    case connectionError(String)
    case takenOver
    case listenerClosed
    case daemonStopping

    /// Repeated lines are limited per kind, not per wording.
    var kind: String {
        switch self {
        case .closedBySender: return "closed"
        case .idle: return "idle"
        case .connectionError: return "error"
        case .takenOver: return "taken-over"
        case .listenerClosed: return "listener-closed"
        case .daemonStopping: return "stopping"
        }
    }

    var description: String {
        switch self {
        case .closedBySender: return "sender closed the connection"
        case .idle(let seconds): return "no video for \((seconds * 10).rounded() / 10) s (idle_timeout)"
        case .connectionError(let error): return "connection error: \(error)"
        case .takenOver: return "a new sender took over"
        case .listenerClosed: return "listener closed"
        case .daemonStopping: return "daemon stopping"
        }
    }
}

/// Whether the current sender is still delivering video, shared by a stream's listener and its decode thread: the
/// decode thread reports progress (NAL units the assembler accepted), the listener decides with it. Bytes are not
/// progress: a connection that sends one zero byte every few seconds, or garbage, delivers no video.
final class SenderActivity: Sendable {
    /// A connection and the last time it did something.
    private struct Mark {
        var connection: ConnectionID
        var time: UInt64

        /// When `id` did it last; nil if the mark is another connection's.
        func time(of id: ConnectionID) -> UInt64? { connection == id ? time : nil }
    }

    private let progress = NIOLockedValueBox(Mark(connection: 0, time: 0))
    /// The last frame decoded: slices that never decode (no parameter sets) are not video either.
    private let decoded = NIOLockedValueBox(Mark(connection: 0, time: 0))

    /// Decode thread: `id`'s video decoded into a frame at `now`.
    func decodedFrame(_ id: ConnectionID, at now: UInt64) {
        decoded.withLockedValue { $0 = Mark(connection: id, time: now) }
    }

    /// When `id`'s video last decoded into a frame; nil if it never did.
    func lastDecoded(of id: ConnectionID) -> UInt64? {
        decoded.withLockedValue { $0.time(of: id) }
    }

    /// Decode thread: `id` delivered valid video at `now`.
    func progressed(_ id: ConnectionID, at now: UInt64) {
        progress.withLockedValue { $0 = Mark(connection: id, time: now) }
    }

    /// When `id` last delivered valid video; nil if it never did.
    func lastProgress(of id: ConnectionID) -> UInt64? {
        progress.withLockedValue { $0.time(of: id) }
    }
}

/// How long a sender may go without delivering video: past `hold` it yields the stream to a new sender even
/// with second_sender = "refuse" (a sender that restarted from a new port, or a stranger holding the stream with
/// nothing), past `idleTimeout` it is dropped. Both count from its admission until its first video.
struct SenderDeadlines: Sendable, Equatable {
    var hold: UInt64
    /// 0: never dropped for silence.
    var idleTimeout: UInt64

    init(idleTimeoutSeconds: Double) {
        idleTimeout = UInt64(idleTimeoutSeconds * 1e9)
        hold = idleTimeout > 0 ? min(2_000_000_000, idleTimeout) : 2_000_000_000
    }

    /// Nanoseconds since the sender last delivered video (or was admitted, if it never did).
    static func quiet(admittedAt: UInt64, lastProgress: UInt64?, now: UInt64) -> UInt64 {
        let since = max(admittedAt, lastProgress ?? 0)
        return now > since ? now - since : 0
    }
}

/// The second-sender policy, one decision for TCP connections and datagram sources alike: with "refuse" a new
/// sender is turned away while the current one delivers video, and takes over from one that has delivered none
/// for `deadlines.hold`; with "takeover" it always takes over.
struct AdmissionPolicy: Sendable, Equatable {
    enum Decision: Equatable {
        /// No current sender.
        case admit
        case refuse
        /// The new sender replaces the current one; `staleFor`: how long the current one had delivered no video,
        /// when that is why (nil: second_sender = takeover).
        case takeOver(staleFor: UInt64?)
    }

    var secondSender: SecondSenderPolicy
    var deadlines: SenderDeadlines

    /// `currentQuietFor`: nanoseconds the current sender has delivered no video; nil when there is none.
    func decide(currentQuietFor quiet: UInt64?) -> Decision {
        guard let quiet else { return .admit }
        if secondSender == .takeover { return .takeOver(staleFor: nil) }
        return quiet > deadlines.hold ? .takeOver(staleFor: quiet) : .refuse
    }
}

/// `max_connections_per_second` per source address: a token bucket per address, so that one host connecting in a
/// loop cannot use up the allowance of the real sender. At most `maximumSources` buckets are kept; when full,
/// buckets that are full again (their host quiet for a second or more) are forgotten first.
struct PerSourceRateLimiter {
    static let maximumSources = 4096
    let rate: Int
    private var buckets: [[UInt8]: ConnectionRateLimiter] = [:]

    init(perSecond rate: Int) { self.rate = rate }

    mutating func admit(_ address: SocketAddress?, now: UInt64) -> Bool {
        let key = Self.key(address)
        if buckets[key] == nil && buckets.count >= Self.maximumSources {
            buckets = buckets.filter { !$0.value.isFull(now: now) }
            if buckets.count >= Self.maximumSources { buckets.removeAll(keepingCapacity: true) }
        }
        return buckets[key, default: ConnectionRateLimiter(perSecond: rate)].admit(now: now)
    }

    /// The address bytes (an IPv4-mapped IPv6 address as its IPv4 address), without the port.
    static func key(_ address: SocketAddress?) -> [UInt8] {
        guard let bytes = address?.ipAddressBytes else { return [] }
        let mapped = bytes.count == 16 && bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff
        return mapped ? Array(bytes[12..<16]) : bytes
    }
}
