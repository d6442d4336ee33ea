import CoreMetrics
import Decoding
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import SharedFrames

/// At most `maximum` connections of one HTTP endpoint open at once (the metrics endpoint, the WHIP endpoint); at most
/// `perAddress` of them from one address other than loopback (an IPv6 /64 counts as one address), and the last
/// `loopbackReserve` places for loopback alone, so that a few remote addresses together cannot lock out the machine
/// itself. When the places run out, a connection that has not sent a whole request is given up for the newcomer,
/// from the party (address, or local user on loopback) holding the most (`ConnectionPlaces`): strangers holding
/// places with half handshakes or dripped headers cannot keep an honest client of another party out. A connection
/// refused or given up is counted and said at most once per 10 s. Every admitted connection is closed after
/// `lifetime`, whatever it is doing: the idle timer restarts with every byte.
final class ConnectionCap: Sendable {
    let lifetime: TimeAmount
    /// The endpoint's name in log lines.
    private let endpoint: String
    private let refusals: CoreMetrics.Counter
    private let evictions: CoreMetrics.Counter?
    private let state: NIOLockedValueBox<State>

    private struct State: Sendable {
        var places: ConnectionPlaces
        var channels: [ObjectIdentifier: Channel] = [:]
        var log: RateLimitedLogger
    }

    init(maximum: Int, perAddress: Int, loopbackReserve: Int, perNetwork: Int? = nil, lifetime: TimeAmount, endpoint: String,
         refusals: CoreMetrics.Counter, evictions: CoreMetrics.Counter? = nil, logger: Logger) {
        self.lifetime = lifetime
        self.endpoint = endpoint
        self.refusals = refusals
        self.evictions = evictions
        state = NIOLockedValueBox(State(places: ConnectionPlaces(maximum: maximum, perAddress: perAddress, loopbackReserve: loopbackReserve,
                                                                         perNetwork: perNetwork),
                                        log: RateLimitedLogger(logger: logger)))
    }

    /// True when `channel` may stay open (its lifetime then runs); false when the caller must close it. A connection
    /// given up for it is closed here.
    func admit(_ channel: Channel) -> Bool {
        let now = MonotonicClock.nanoseconds()
        let remote = channel.remoteAddress?.description ?? "unknown"
        guard let party = ConnectionParty.of(remote: channel.remoteAddress, local: channel.localAddress) else { return false }
        let id = ObjectIdentifier(channel)
        let endpoint = self.endpoint
        let (admission, victim) = state.withLockedValue { state -> (ConnectionPlaces.Admission, (Channel, ConnectionParty)?) in
            let admission = state.places.admit(id, party: party, now: now)
            switch admission {
            case .admitted(let evicting):
                state.channels[id] = channel
                guard let evicting, let victim = state.channels.removeValue(forKey: evicting.id) else { return (admission, nil) }
                let victimParty = evicting.party
                state.log.log(.warning, key: "\(endpoint)-evicted", now: now,
                              "\(endpoint): every place taken; gave up a connection of \(victimParty) that had sent no whole request (\(victim.remoteAddress?.description ?? "unknown")) for one of \(party) (\(remote))")
                return (admission, (victim, victimParty))
            case .refused(let refusal):
                let (maximum, perAddress) = (state.places.maximum, state.places.perAddress)
                let why = switch refusal {
                case .full: "\(maximum) connections open, none that may be given up for this one"
                case .remoteFull: "\(maximum - state.places.loopbackReserve) connections open from other machines (the rest kept for loopback)"
                case .partyFull: "\(perAddress) connections open from \(party)"
                case .networkFull: "\(state.places.perNetwork) connections open from the network of \(party)"
                }
                state.log.log(.warning, key: "\(endpoint)-\(refusal)", now: now, "\(endpoint): \(why); closing new ones (remote \(remote))")
                return (admission, nil)
            }
        }
        if let (victim, _) = victim {
            evictions?.increment()
            victim.close(promise: nil)
        }
        guard case .admitted = admission else {
            refusals.increment()
            return false
        }
        let ending = channel.eventLoop.scheduleTask(in: lifetime) { channel.close(promise: nil) }
        channel.closeFuture.whenComplete { [state] _ in
            ending.cancel()
            state.withLockedValue { state in
                // A connection given up for another has left the places already; its ID may be a newcomer's now.
                guard state.channels[id] === channel else { return }
                state.channels[id] = nil
                state.places.remove(id)
            }
        }
        return true
    }

    /// Whom `channel` was admitted for (learnt at accept, while the client's socket surely exists); nil when it
    /// holds no place.
    func party(of channel: Channel) -> ConnectionParty? {
        let id = ObjectIdentifier(channel)
        return state.withLockedValue { state in state.channels[id] === channel ? state.places.places[id]?.party : nil }
    }

    /// A whole request arrived on `channel`: it is being served, and keeps its place until its reply is out.
    func serving(_ channel: Channel) {
        let id = ObjectIdentifier(channel)
        state.withLockedValue { state in
            guard state.channels[id] === channel else { return }
            state.places.serving(id)
        }
    }

    /// `channel`'s reply is made: until its next whole request it is among the cheapest to give up.
    func awaitingRequest(_ channel: Channel) {
        let (id, now) = (ObjectIdentifier(channel), MonotonicClock.nanoseconds())
        state.withLockedValue { state in
            guard state.channels[id] === channel else { return }
            state.places.awaitingRequest(id, now: now)
        }
    }
}

/// Tells the cap when a connection has a whole request in hand and when its reply is out, so that only connections
/// waiting for a request are given up for newcomers. After the HTTP server pipeline, before the endpoint's handler.
final class ConnectionPhaseHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let cap: ConnectionCap

    init(cap: ConnectionCap) { self.cap = cap }

    /// A request that arrives while the client leaves earlier replies unread waits for it, not for us: its
    /// connection stays among the cheapest to give up.
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .end = unwrapInboundIn(data), context.channel.isWritable { cap.serving(context.channel) }
        context.fireChannelRead(data)
    }

    /// At the reply's end, not once it is sent: a client that does not read its replies is not being served, and
    /// must not keep a place that way.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { cap.awaitingRequest(context.channel) }
        context.write(data, promise: promise)
    }
}
