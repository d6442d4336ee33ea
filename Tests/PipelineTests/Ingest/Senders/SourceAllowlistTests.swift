import NIOCore
@testable import Pipeline
import Testing

@Suite struct AllowlistTests {
    @Test(arguments: [
        ("192.168.1.0/24", "192.168.1.77", true),
        ("192.168.1.0/24", "192.168.2.1", false),
        ("10.1.2.3", "10.1.2.3", true),
        ("10.1.2.3", "10.1.2.4", false),
        ("0.0.0.0/0", "203.0.113.9", true),
        ("172.16.0.0/12", "172.31.255.255", true),
        ("172.16.0.0/12", "172.32.0.0", false),
        ("::1", "::1", true),
        ("fd00::/8", "fd12:3456::1", true),
        ("fd00::/8", "fe80::1", false),
        // A dual-stack socket reports IPv4 senders as ::ffff:a.b.c.d.
        ("127.0.0.0/8", "::ffff:127.0.0.5", true),
        ("127.0.0.0/8", "::ffff:10.0.0.5", false),
        ("::1", "127.0.0.1", false),
    ])
    func networksContainTheirAddresses(network: String, address: String, expected: Bool) throws {
        let range = try #require(AddressRange(network))
        let socketAddress = try SocketAddress(ipAddress: address, port: 1)
        #expect([range].allows(socketAddress) == expected)
    }

    @Test func anEmptyListAllowsAllAndBadEntriesAreRejected() throws {
        #expect([AddressRange]().allows(try SocketAddress(ipAddress: "198.51.100.1", port: 9)))
        for bad in ["", "10.0.0.0/33", "::/129", "10.0.0/8", "example.com", "10.0.0.0/-1", "10.0.0.0/8/8"] {
            #expect(AddressRange(bad) == nil, "\(bad)")
        }
        #expect(AddressRange("192.168.1.77/24")?.description == "192.168.1.0/24", "host bits are cleared")
    }

    @Test func theRateLimiterAdmitsABurstThenTheRate() {
        var limiter = ConnectionRateLimiter(perSecond: 3)
        let start: UInt64 = 1_000_000_000
        var burst: [Bool] = []
        for offset in 0..<5 { burst.append(limiter.admit(now: start + UInt64(offset))) }
        #expect(burst == [true, true, true, false, false])
        let afterAThird = limiter.admit(now: start + 340_000_000)
        let rightAfter = limiter.admit(now: start + 350_000_000)
        #expect(afterAThird, "one token back after a third of a second")
        #expect(!rightAfter)
        var refill: [Bool] = []
        for offset in 0..<4 { refill.append(limiter.admit(now: start + 10_000_000_000 + UInt64(offset))) }
        #expect(refill == [true, true, true, false], "the bucket refills to the burst, not beyond")
    }
}
