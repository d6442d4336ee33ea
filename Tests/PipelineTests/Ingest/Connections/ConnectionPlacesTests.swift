@testable import Pipeline
import Testing

/// Who gives up a place when an HTTP endpoint's places run out (issue 31, items 1 and 2).
@Suite struct ConnectionPlacesTests {
    final class Key {}

    static func remote(_ last: UInt8) -> ConnectionParty { .remote([192, 0, 2, last]) }

    /// Admits a connection for `party` at `now`, keeping its key alive in `keys`.
    static func admit(_ places: inout ConnectionPlaces, _ party: ConnectionParty, now: UInt64 = 0,
                      keys: inout [ObjectIdentifier: Key]) -> (ObjectIdentifier, ConnectionPlaces.Admission) {
        let key = Key()
        let id = ObjectIdentifier(key)
        keys[id] = key
        return (id, places.admit(id, party: party, now: now))
    }

    @Test func theLongestWaitingConnectionOfTheBiggestHolderGoes() {
        var places = ConnectionPlaces(maximum: 4, perAddress: 4, loopbackReserve: 0)
        var keys: [ObjectIdentifier: Key] = [:]
        let first = Self.admit(&places, Self.remote(1), now: 10, keys: &keys).0
        let second = Self.admit(&places, Self.remote(1), now: 5, keys: &keys).0
        let third = Self.admit(&places, Self.remote(1), now: 20, keys: &keys).0
        _ = Self.admit(&places, Self.remote(2), now: 1, keys: &keys)
        let (_, admission) = Self.admit(&places, Self.remote(3), now: 30, keys: &keys)
        #expect(admission == .admitted(evicting: .init(id: second, party: Self.remote(1))), "1 holds 3 and its oldest since 5")
        #expect(places.holdings[Self.remote(1)] == 2 && places.count == 4)
        places.serving(first)
        #expect(Self.admit(&places, Self.remote(4), now: 40, keys: &keys).1 == .admitted(evicting: .init(id: third, party: Self.remote(1))),
                "1 still holds two more than the newcomer: its connection without a request goes, not the one served")
        #expect(Self.admit(&places, Self.remote(5), now: 50, keys: &keys).1 == .refused(.remoteFull), "everyone holds one now")
    }

    /// Strangers reconnecting the moment they are cut cannot take places back and forth, nor back from the party
    /// that took one: a party takes only from one that still holds at least as many afterwards.
    @Test func noPartyTakesBackWhatWasTakenFromIt() {
        var places = ConnectionPlaces(maximum: 6, perAddress: 6, loopbackReserve: 0)
        var keys: [ObjectIdentifier: Key] = [:]
        for _ in 0..<6 { _ = Self.admit(&places, .localUser(1000), keys: &keys) }
        for step in 0..<3 {
            let (_, admission) = Self.admit(&places, .localUser(0), now: UInt64(step + 1), keys: &keys)
            guard case .admitted(.some) = admission else { Issue.record("step \(step): \(admission)"); return }
        }
        #expect(places.holdings[.localUser(0)] == 3 && places.holdings[.localUser(1000)] == 3)
        #expect(Self.admit(&places, .localUser(1000), now: 9, keys: &keys).1 == .refused(.full))
        #expect(Self.admit(&places, .localUser(0), now: 9, keys: &keys).1 == .refused(.full))
        #expect(Self.admit(&places, .loopback, now: 9, keys: &keys).1 != .refused(.full), "a third party holding none")
    }

    @Test func otherMachinesTakeOnlyTheirOwnPlacesWhenTheirShareIsFull() {
        var places = ConnectionPlaces(maximum: 4, perAddress: 3, loopbackReserve: 2)
        var keys: [ObjectIdentifier: Key] = [:]
        _ = Self.admit(&places, Self.remote(1), keys: &keys)
        _ = Self.admit(&places, Self.remote(1), keys: &keys)
        #expect(Self.admit(&places, Self.remote(1), keys: &keys).1 == .refused(.remoteFull), "taking its own place gains nothing")
        for _ in 0..<2 { _ = Self.admit(&places, .localUser(7), keys: &keys) }
        guard case .admitted(.some(let eviction)) = Self.admit(&places, Self.remote(2), keys: &keys).1 else {
            Issue.record("no place for a second machine")
            return
        }
        #expect(eviction.party == Self.remote(1), "a remote place, not loopback's")
        #expect(places.remoteCount == 2)
    }

    @Test func oneAddressNeverHoldsMoreThanItsShare() {
        var places = ConnectionPlaces(maximum: 10, perAddress: 2, loopbackReserve: 0)
        var keys: [ObjectIdentifier: Key] = [:]
        _ = Self.admit(&places, Self.remote(1), keys: &keys)
        _ = Self.admit(&places, Self.remote(1), keys: &keys)
        #expect(Self.admit(&places, Self.remote(1), keys: &keys).1 == .refused(.partyFull))
        for _ in 0..<5 { #expect(Self.admit(&places, .localUser(1), keys: &keys).1 == .admitted(evicting: nil)) }
    }

    @Test func aPlaceRemovedTwiceIsFreedOnce() {
        var places = ConnectionPlaces(maximum: 2, perAddress: 2, loopbackReserve: 0)
        var keys: [ObjectIdentifier: Key] = [:]
        let (id, _) = Self.admit(&places, Self.remote(1), keys: &keys)
        #expect(places.remove(id) != nil && places.remove(id) == nil)
        #expect(places.count == 0 && places.remoteCount == 0 && places.holdings.isEmpty)
    }

    /// The red team's 120 addresses of one /24, or 120 /64s of one /48, one place each: a network holds its share.
    @Test func oneNetworkHoldsAtMostItsShare() {
        var places = ConnectionPlaces(maximum: 10, perAddress: 2, loopbackReserve: 0, perNetwork: 3)
        var keys: [ObjectIdentifier: Key] = [:]
        let admitted = (1...3).map { Self.admit(&places, Self.remote($0), keys: &keys).1 }
        #expect(admitted.allSatisfy { $0 == .admitted(evicting: nil) })
        #expect(Self.admit(&places, Self.remote(4), keys: &keys).1 == .refused(.networkFull))
        #expect(Self.admit(&places, .remote([192, 0, 3, 1]), keys: &keys).1 == .admitted(evicting: nil), "another /24")
        let site: [UInt8] = [0x20, 0x01, 0x0d, 0xb8, 0, 1]
        for subnet in 0..<3 as Range<UInt8> { _ = Self.admit(&places, .remote(site + [0, subnet]), keys: &keys) }
        #expect(Self.admit(&places, .remote(site + [0, 9]), keys: &keys).1 == .refused(.networkFull), "a fourth /64 of the same /48")
        #expect(Self.admit(&places, .remote([0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0]), keys: &keys).1 == .admitted(evicting: nil))
        #expect(Self.admit(&places, .localUser(5), keys: &keys).1 == .admitted(evicting: nil), "local users have no network")
    }
}
