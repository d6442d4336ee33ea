import Glibc
import Logging
import NIOCore
@testable import Pipeline
import Prometheus
import StreamrecvTestSupport
import Testing

/// The first look at an SRT caller, before libsrt gives it a socket's memory: `allow`, the per-source connection
/// rate, and the sources held back while many callers are refused after their handshake.
@Suite struct SRTAdmissionGateTests {
    struct Fixture {
        let lines = CapturedLines()
        let registry = PrometheusCollectorRegistry()
        let gate: SRTAdmissionGate

        /// A gate allowing `allow` (empty: everyone) and one caller per second per source: a second call from the
        /// same source within a test is always over the rate, however slow the machine.
        init(allow: [String] = []) throws {
            var configuration = StreamConfiguration(
                name: "field", source: .srt(ListenAddress(transport: .srt, host: "127.0.0.1", port: 9000), SRTSettings()))
            configuration.allow = try allow.map { try #require(AddressRange($0)) }
            configuration.maxConnectionsPerSecond = 1
            let lines = lines
            gate = SRTAdmissionGate(configuration: configuration, metrics: StreamMetrics(stream: "field", factory: MetricsServer.factory(registry: registry)),
                                    logger: Logger(label: "srt") { _ in CaptureHandler(lines: lines) })
        }

        func refused(_ reason: StreamMetrics.RefusalReason) -> Double? {
            registry.sample(#"streamrecvd_refused_total{stream="field",reason="\#(reason.rawValue)"}"#)
        }
    }

    static func address(_ ip: String, _ port: Int = 4000) throws -> SocketAddress { try SocketAddress(ipAddress: ip, port: port) }

    /// A source outside `allow` is refused before anything else is looked at: never counted against its rate.
    @Test func aSourceOutsideAllowIsRefusedAndCounted() throws {
        let fixture = try Fixture(allow: ["10.0.0.0/8"])
        #expect(fixture.gate.admits(try Self.address("10.1.2.3")))
        #expect(!fixture.gate.admits(try Self.address("192.0.2.1")))
        #expect(!fixture.gate.admits(try Self.address("192.0.2.1")))
        #expect(!fixture.gate.admits(nil), "a caller of no known address family is not in any range")
        #expect(fixture.refused(.notAllowed) == 3 && fixture.refused(.rateLimited) == 0)
        let lines = fixture.lines.all
        #expect(lines.count == 1, "one line per 10 s per kind of refusal: \(lines.map(\.message))")
        #expect(lines.first?.level == .warning)
        #expect(lines.first?.message == "SRT caller refused: source not in allow (remote [IPv4]192.0.2.1:4000)")
    }

    /// `max_connections_per_second` is per source: one host calling in a loop does not use up another's.
    @Test func theRateIsLimitedPerSource() throws {
        let fixture = try Fixture()
        #expect(fixture.gate.admits(try Self.address("192.0.2.1", 4000)))
        #expect(!fixture.gate.admits(try Self.address("192.0.2.1", 4001)), "another port of the same host is the same source")
        #expect(fixture.gate.admits(try Self.address("192.0.2.2")))
        #expect(!fixture.gate.admits(try Self.address("::ffff:192.0.2.2")), "an IPv4-mapped address is its IPv4 source")
        #expect(fixture.refused(.rateLimited) == 2 && fixture.refused(.notAllowed) == 0)
        #expect(fixture.lines.all.first?.message.contains("over max_connections_per_second (1)") == true)
    }

    /// While many callers are refused after their handshake (each holding a socket's memory), the sources among
    /// them are refused at once; a source with no recent refusal still gets through.
    @Test func aRefusalFloodHoldsBackOnlyTheSourcesInIt() throws {
        let fixture = try Fixture()
        let flooding = try Self.address("198.51.100.9")
        for port in 0..<SRTRefusalPressure.limit {
            fixture.gate.refusedAfterHandshake(try Self.address("198.51.100.9", 5000 + port))
        }
        #expect(!fixture.gate.admits(flooding))
        #expect(fixture.gate.admits(try Self.address("203.0.113.5")), "a good caller is not locked out")
        #expect(fixture.refused(.rateLimited) == 1)
        #expect(fixture.lines.all.first?.message.hasPrefix("SRT caller refused: 32 callers were refused in the last 3 s, and this source is one of them") == true,
                "\(fixture.lines.all.map(\.message))")
    }

    /// Fewer refusals than the limit hold nobody back.
    @Test func aFewRefusalsHoldNobodyBack() throws {
        let fixture = try Fixture()
        for _ in 1..<SRTRefusalPressure.limit { fixture.gate.refusedAfterHandshake(try Self.address("198.51.100.9")) }
        #expect(fixture.gate.admits(try Self.address("198.51.100.9")))
        #expect(fixture.refused(.rateLimited) == 0 && fixture.lines.all.isEmpty)
    }

    /// libsrt hands the caller's address over as a C sockaddr: IPv4 and IPv6 are read with their ports, anything
    /// else is no address.
    @Test func callerAddressesAreReadFromSockaddr() throws {
        var v4 = sockaddr_in()
        v4.sin_family = sa_family_t(AF_INET)
        v4.sin_port = in_port_t(4000).bigEndian
        #expect(inet_pton(AF_INET, "192.0.2.7", &v4.sin_addr) == 1)
        let ipv4 = withUnsafePointer(to: &v4) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SRTAdmissionGate.address($0) } }
        #expect(ipv4 == (try Self.address("192.0.2.7", 4000)))

        var v6 = sockaddr_in6()
        v6.sin6_family = sa_family_t(AF_INET6)
        v6.sin6_port = in_port_t(9001).bigEndian
        #expect(inet_pton(AF_INET6, "2001:db8::42", &v6.sin6_addr) == 1)
        let ipv6 = withUnsafePointer(to: &v6) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SRTAdmissionGate.address($0) } }
        #expect(ipv6 == (try Self.address("2001:db8::42", 9001)))

        var local = sockaddr_un()
        local.sun_family = sa_family_t(AF_UNIX)
        let unix = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SRTAdmissionGate.address($0) } }
        #expect(unix == nil)
        #expect(SRTAdmissionGate.address(nil) == nil)
    }
}

/// The count of recent refusals after the handshake, by time passed in.
@Suite struct SRTRefusalPressureTests {
    static let second: UInt64 = 1_000_000_000
    static let start: UInt64 = 100 * second
    static let a: [UInt8] = [198, 51, 100, 9]
    static let b: [UInt8] = [203, 0, 113, 5]

    /// `limit` refusals at `start`, spread over `spread` nanoseconds, all from `source`.
    static func flooded(by source: [UInt8] = a, spread: UInt64 = 0) -> SRTRefusalPressure {
        var pressure = SRTRefusalPressure()
        let limit = UInt64(SRTRefusalPressure.limit)
        for index in 0..<limit { pressure.refused(source, now: start + spread * index / limit) }
        return pressure
    }

    @Test func sourcesAreHeldBackOnlyOnceTheLimitIsReached() {
        var pressure = SRTRefusalPressure()
        for _ in 1..<SRTRefusalPressure.limit { pressure.refused(Self.a, now: Self.start) }
        #expect(!pressure.holdsBack(Self.a, now: Self.start), "one refusal short of the limit")
        pressure.refused(Self.a, now: Self.start)
        #expect(pressure.holdsBack(Self.a, now: Self.start))
        #expect(!pressure.holdsBack(Self.b, now: Self.start), "a source never refused is not held back")
    }

    /// The hold is 3 s from the oldest of the last `limit` refusals and from the source's own last refusal.
    @Test func theHoldEndsThreeSecondsAfterTheRefusals() {
        let pressure = Self.flooded()
        let hold = UInt64(SRTRefusalPressure.holdSeconds) * Self.second
        #expect(pressure.holdsBack(Self.a, now: Self.start + hold - 1))
        #expect(!pressure.holdsBack(Self.a, now: Self.start + hold))
        // Refusals spread over more than the hold: the oldest of the last `limit` is too old, no flood.
        let slow = Self.flooded(spread: hold + Self.second)
        #expect(!slow.holdsBack(Self.a, now: Self.start + hold + Self.second))
    }

    /// A source refused long ago is not held back by a flood of others now.
    @Test func aSourcesOwnRefusalMustBeRecent() {
        var pressure = SRTRefusalPressure()
        pressure.refused(Self.b, now: Self.start)
        let later = Self.start + 10 * Self.second
        for _ in 0..<SRTRefusalPressure.limit { pressure.refused(Self.a, now: later) }
        #expect(pressure.holdsBack(Self.a, now: later) && !pressure.holdsBack(Self.b, now: later))
    }

    /// A time older than the latest refusal (another thread read the clock first) holds nobody back, never traps.
    @Test func anEarlierClockReadingIsNoTrap() {
        let pressure = Self.flooded()
        #expect(!pressure.holdsBack(Self.a, now: Self.start - 1))
    }

    /// Sources come from the network, so their table is bounded: stale ones go first, and when every one is
    /// recent the table starts over (a flood from many addresses cannot grow it without end).
    @Test func theSourceTableStaysBounded() {
        var pressure = Self.flooded(by: Self.b)
        let sources: [[UInt8]] = (0..<SRTRefusalPressure.maximumSources - 1).map { (index: Int) -> [UInt8] in
            [10, UInt8(index >> 16), UInt8((index >> 8) & 255), UInt8(index & 255)]
        }
        for source in sources { pressure.refused(source, now: Self.start) }
        #expect(pressure.holdsBack(Self.b, now: Self.start) && pressure.holdsBack(sources[0], now: Self.start), "the table is full, not over")
        pressure.refused(Self.a, now: Self.start)
        #expect(pressure.holdsBack(Self.a, now: Self.start), "the newcomer is kept")
        #expect(!pressure.holdsBack(Self.b, now: Self.start) && !pressure.holdsBack(sources[0], now: Self.start),
                "every source was recent: the table started over")

        // Stale sources make room for a newcomer, and the recent ones are kept: b is still held back.
        var aging = SRTRefusalPressure()
        for source in sources { aging.refused(source, now: Self.start - 10 * Self.second) }
        for _ in 0..<SRTRefusalPressure.limit { aging.refused(Self.b, now: Self.start) }
        aging.refused(Self.a, now: Self.start)
        #expect(aging.holdsBack(Self.a, now: Self.start) && aging.holdsBack(Self.b, now: Self.start))
    }
}
