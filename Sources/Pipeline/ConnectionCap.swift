import CoreMetrics
import Decoding
import Logging
import NIOConcurrencyHelpers
import NIOCore
import SharedFrames

/// At most `maximum` connections of one HTTP endpoint open at once (the metrics endpoint, the WHIP endpoint); at most
/// `perAddress` of them from one address other than loopback (an IPv6 /64 counts as one address: a host has all of
/// it), and the last `loopbackReserve` places for loopback alone, so that a few remote addresses together cannot
/// lock out the machine itself (a scraper, a proxy on it that speaks for everyone). A connection over a limit is
/// refused, counted and said at most once per 10 s; one that closes gives its place back. Every admitted connection is closed after `lifetime`, whatever it is doing: the idle timer
/// restarts with every byte, so a client dripping a header line every few seconds would otherwise keep its place.
final class ConnectionCap: Sendable {
    let maximum: Int
    let perAddress: Int
    let loopbackReserve: Int
    let lifetime: TimeAmount
    /// The endpoint's name in the refusal line.
    private let endpoint: String
    private let refusals: CoreMetrics.Counter
    private let state: NIOLockedValueBox<(open: Int, remote: Int, byAddress: [[UInt8]: Int], log: RateLimitedLogger)>

    init(maximum: Int, perAddress: Int, loopbackReserve: Int, lifetime: TimeAmount, endpoint: String,
         refusals: CoreMetrics.Counter, logger: Logger) {
        self.maximum = maximum
        self.perAddress = perAddress
        self.loopbackReserve = loopbackReserve
        self.lifetime = lifetime
        self.endpoint = endpoint
        self.refusals = refusals
        state = NIOLockedValueBox((0, 0, [:], RateLimitedLogger(logger: logger)))
    }

    /// True when `channel` may stay open (its lifetime then runs); false when the caller must close it.
    func admit(_ channel: Channel) -> Bool {
        let now = MonotonicClock.nanoseconds()
        let (maximum, perAddress, endpoint) = (self.maximum, self.perAddress, self.endpoint)
        let remoteMaximum = maximum - loopbackReserve
        let remote = channel.remoteAddress
        // Loopback is not counted per address: a reverse proxy on this machine brings every client from there.
        let address = remote?.ipAddressBytes.map { BindAddress(bytes: $0).unmapped }
            .flatMap { $0.isLoopback ? nil : Array($0.bytes.prefix(8)) }  // IPv4 whole, IPv6 by its /64
        let admitted = state.withLockedValue { state -> Bool in
            guard state.open < maximum else {
                state.log.log(.warning, key: "\(endpoint)-full", now: now,
                              "\(endpoint): \(maximum) connections open; closing new ones (remote \(remote?.description ?? "unknown"))")
                return false
            }
            if let address {
                guard state.remote < remoteMaximum else {
                    state.log.log(.warning, key: "\(endpoint)-remote", now: now,
                                  "\(endpoint): \(remoteMaximum) connections open from other machines (the rest kept for loopback); closing new ones (remote \(remote?.description ?? "unknown"))")
                    return false
                }
                guard state.byAddress[address, default: 0] < perAddress else {
                    state.log.log(.warning, key: "\(endpoint)-address", now: now,
                                  "\(endpoint): \(perAddress) connections open from \(remote?.description ?? "unknown"); closing its new ones")
                    return false
                }
                state.byAddress[address, default: 0] += 1
                state.remote += 1
            }
            state.open += 1
            return true
        }
        guard admitted else {
            refusals.increment()
            return false
        }
        let ending = channel.eventLoop.scheduleTask(in: lifetime) { channel.close(promise: nil) }
        channel.closeFuture.whenComplete { [state] _ in
            ending.cancel()
            state.withLockedValue { state in
                state.open -= 1
                if let address {
                    state.remote -= 1
                    state.byAddress[address, default: 1] -= 1
                    if state.byAddress[address] == 0 { state.byAddress[address] = nil }
                }
            }
        }
        return true
    }
}
