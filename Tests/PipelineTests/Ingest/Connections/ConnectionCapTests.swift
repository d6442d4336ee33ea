import CoreMetrics
import Logging
import NIOCore
import NIOEmbedded
@testable import Pipeline
import Testing

/// The admission of the HTTP endpoints (metrics, WHIP): a cap on connections, a share of it per address (an IPv6
/// /64 as one; loopback, where a proxy speaks for everyone, has the whole), places kept for loopback, and a
/// lifetime after which a connection is closed whatever it is doing.
@Suite struct ConnectionCapTests {
    static func cap(lifetime: TimeAmount = .seconds(60)) -> ConnectionCap {
        ConnectionCap(maximum: 4, perAddress: 2, loopbackReserve: 1, lifetime: lifetime, endpoint: "test endpoint",
                      refusals: Counter(label: "refused", factory: NOOPMetricsHandler.instance), logger: Logger(label: "test"))
    }

    /// An open connection from `host`.
    static func connection(from host: String) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.connect(to: SocketAddress(ipAddress: "192.0.2.200", port: 8889)).wait()
        channel.remoteAddress = try SocketAddress(ipAddress: host, port: 40_000)  // after connect, which sets it
        return channel
    }

    @Test func oneAddressGetsItsShareAndLoopbackTheWhole() throws {
        let cap = Self.cap()
        let first = try (0..<3).map { _ in try Self.connection(from: "192.0.2.1") }
        #expect(first.map { cap.admit($0) } == [true, true, false])
        #expect(cap.admit(try Self.connection(from: "192.0.2.2")))
        #expect(cap.admit(try Self.connection(from: "::ffff:127.0.0.1")))
        #expect(!cap.admit(try Self.connection(from: "127.0.0.1")), "4 open: the whole cap")
        try first[0].close().wait()
        first[0].embeddedEventLoop.run()
        #expect(cap.admit(try Self.connection(from: "192.0.2.1")), "a closed connection gives its place back")
    }

    /// Found by the third red-team pass: 4 addresses with 8 connections each held all 32 places of the WHIP
    /// endpoint, the machine's own clients included. The last places are loopback's now.
    @Test func otherMachinesTogetherLeaveLoopbackItsPlaces() throws {
        let cap = Self.cap()
        let remote = try ["192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"].map { try Self.connection(from: $0) }
        #expect(remote.map { cap.admit($0) } == [true, true, true, false], "3 of 4 places for other machines")
        #expect(cap.admit(try Self.connection(from: "127.0.0.1")), "the last place is loopback's")
    }

    /// Issue 31, item 1: when the places run out, a connection without a whole request is given up for a newcomer
    /// of a party holding fewer, and closed; one being served is not.
    @Test func aNewcomerTakesThePlaceOfAConnectionWithoutARequest() throws {
        let cap = Self.cap()
        let holders = try ["192.0.2.1", "192.0.2.1", "192.0.2.2"].map { try Self.connection(from: $0) }
        #expect(holders.allSatisfy { cap.admit($0) })
        let newcomer = try Self.connection(from: "192.0.2.3")
        #expect(cap.admit(newcomer), "192.0.2.1 holds two: one of them goes")
        holders[0].embeddedEventLoop.run()
        #expect(holders.filter { !$0.isActive }.count == 1 && holders[2].isActive)
        // Everyone holds one now: nobody may take another's place.
        #expect(!cap.admit(try Self.connection(from: "192.0.2.4")))
        let served = try Self.connection(from: "127.0.0.1")
        #expect(cap.admit(served))
        cap.serving(served)
        #expect(!cap.admit(try Self.connection(from: "127.0.0.1")), "loopback's only place is being served")
    }

    @Test func anIPv6SlashSixtyFourIsOneAddress() throws {
        let cap = Self.cap()
        let hosts = try ["2001:db8::1", "2001:db8::2", "2001:db8::3"].map { try Self.connection(from: $0) }
        #expect(hosts.map { cap.admit($0) } == [true, true, false])
        #expect(cap.admit(try Self.connection(from: "2001:db8:0:1::1")), "another /64")
    }

    @Test func aConnectionIsClosedAtTheEndOfItsLifetime() throws {
        let cap = Self.cap(lifetime: .seconds(15))
        let channel = try Self.connection(from: "192.0.2.1")
        #expect(cap.admit(channel))
        channel.embeddedEventLoop.advanceTime(by: .seconds(14))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(!channel.isActive)
        let (again, andAgain) = (try Self.connection(from: "192.0.2.1"), try Self.connection(from: "192.0.2.1"))
        #expect(cap.admit(again) && cap.admit(andAgain), "the closed connection gave its place back")
    }
}
