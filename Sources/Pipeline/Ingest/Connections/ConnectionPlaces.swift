/// The places of an HTTP endpoint and who holds them (ConnectionCap's state; pure, the time passed in).
///
/// When every place is taken, a newcomer does not simply lose to whoever came first: the connections that have not
/// sent a whole request (a half handshake, a header dripped a byte at a time, a keep-alive waiting for its next
/// request) are the cheapest to give up, and one of them goes, taken from the party that holds the most places. A
/// party may take a place only from one that would still hold more than it does afterwards, so that strangers
/// cannot take places back and forth (each cut connection reconnecting at once). Strangers can then hold every
/// place only from more parties than there are places for other machines, one place each, and from more networks
/// than those places divided by `perNetwork`; below that, an honest client on another address or of another local
/// user gets in however its neighbours behave.
struct ConnectionPlaces: Sendable {
    typealias ID = ObjectIdentifier

    enum Phase: Equatable, Sendable {
        /// Since accept or since its last reply: no whole request yet (TLS handshake, headers, body).
        case awaitingRequest(since: UInt64)
        /// A whole request arrived and its reply is not yet made: never given up for a newcomer.
        case serving
    }

    struct Place: Sendable {
        let party: ConnectionParty
        var phase: Phase
    }

    enum Refusal: Equatable, Sendable {
        /// Every place taken, and none that may be given up for this party.
        case full
        /// Every place for other machines taken (the rest kept for loopback), none that may be given up.
        case remoteFull
        /// This address holds its share already.
        case partyFull
        /// Its network (an IPv4 /24, an IPv6 /48) holds its share already.
        case networkFull
    }

    /// A place given up for a newcomer.
    struct Eviction: Equatable, Sendable {
        let id: ID
        let party: ConnectionParty
    }

    enum Admission: Equatable, Sendable {
        case admitted(evicting: Eviction?)
        case refused(Refusal)
    }

    let maximum: Int
    /// Places one remote address may hold (loopback parties have no such share: a proxy speaks for everyone).
    let perAddress: Int
    /// The last places, for loopback alone.
    let loopbackReserve: Int
    /// Places one remote network (`ConnectionParty.network`) may hold: strangers with a whole IPv6 /48 (65 536
    /// parties) or an IPv4 /24 cannot hold every place one connection per party.
    let perNetwork: Int
    private(set) var places: [ID: Place] = [:]
    private(set) var holdings: [ConnectionParty: Int] = [:]
    private(set) var networkHoldings: [[UInt8]: Int] = [:]
    private(set) var remoteCount = 0

    init(maximum: Int, perAddress: Int, loopbackReserve: Int, perNetwork: Int? = nil) {
        self.maximum = maximum
        self.perAddress = perAddress
        self.loopbackReserve = loopbackReserve
        self.perNetwork = perNetwork ?? .max
    }

    var count: Int { places.count }

    /// Admits `id` for `party` (giving up another's place when full and one may be), or says why not.
    mutating func admit(_ id: ID, party: ConnectionParty, now: UInt64) -> Admission {
        let held = holdings[party, default: 0]
        if party.isRemote, held >= perAddress { return .refused(.partyFull) }
        if let network = party.network, networkHoldings[network, default: 0] >= perNetwork { return .refused(.networkFull) }
        var victim: ID?
        if party.isRemote, remoteCount >= maximum - loopbackReserve {
            guard let remoteVictim = cheapestPlace(forNewcomerHolding: held, remoteOnly: true) else { return .refused(.remoteFull) }
            victim = remoteVictim
        } else if places.count >= maximum {
            guard let anyVictim = cheapestPlace(forNewcomerHolding: held, remoteOnly: false) else { return .refused(.full) }
            victim = anyVictim
        }
        let eviction = victim.flatMap { victim in remove(victim).map { Eviction(id: victim, party: $0.party) } }
        places[id] = Place(party: party, phase: .awaitingRequest(since: now))
        holdings[party, default: 0] += 1
        if let network = party.network { networkHoldings[network, default: 0] += 1 }
        if party.isRemote { remoteCount += 1 }
        return .admitted(evicting: eviction)
    }

    /// A whole request arrived on `id`.
    mutating func serving(_ id: ID) {
        places[id]?.phase = .serving
    }

    /// `id`'s reply is made: it waits for its next request.
    mutating func awaitingRequest(_ id: ID, now: UInt64) {
        places[id]?.phase = .awaitingRequest(since: now)
    }

    /// `id` closed (or was given up): its place is free. Nothing when it holds none.
    @discardableResult
    mutating func remove(_ id: ID) -> Place? {
        guard let place = places.removeValue(forKey: id) else { return nil }
        let left = holdings[place.party, default: 1] - 1
        holdings[place.party] = left > 0 ? left : nil
        if let network = place.party.network {
            let rest = networkHoldings[network, default: 1] - 1
            networkHoldings[network] = rest > 0 ? rest : nil
        }
        if place.party.isRemote { remoteCount -= 1 }
        return place
    }

    /// The place to give up for a newcomer whose party holds `held`: one awaiting a request, of the party holding
    /// the most places (and at least two more than the newcomer's), the one waiting longest; nil when none may go.
    private func cheapestPlace(forNewcomerHolding held: Int, remoteOnly: Bool) -> ID? {
        var best: (id: ID, holding: Int, since: UInt64)?
        for (id, place) in places {
            guard case .awaitingRequest(let since) = place.phase, !remoteOnly || place.party.isRemote else { continue }
            let holding = holdings[place.party, default: 0]
            guard holding >= held + 2 else { continue }
            if let current = best, current.holding > holding || (current.holding == holding && current.since <= since) { continue }
            best = (id, holding, since)
        }
        return best?.id
    }
}
