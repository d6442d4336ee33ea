import Bitstream
@testable import MediaSecurity
import NIOCore
import NIOEmbedded
@testable import Pipeline
import Testing

/// The WebRTC engine's driver: what it carries out for each input, and its one timer at the table's deadlines.
@Suite struct WebRTCEndpointTests {
    /// The endpoint carries out what an input asked for, and nothing waits in the table for the next one.
    @Test func theEndpointCarriesOutEachInputsOutputs() throws {
        let engine = try WebRTCSessionTableTests.Engine()
        let endpoint = WebRTCEndpoint(table: engine.table)
        var sent: [(bytes: [UInt8], to: SocketAddress)] = []
        endpoint.transmit = { bytes, to, _ in sent.append((bytes, to)) }
        let client = try WebRTCSessionTableTests.Client(port: 40000)
        let offer = WebRTCSessionTests.offer(fingerprint: client.identity.fingerprintText)
        guard case .created(_, let answer) = endpoint.drive({ $0.offer(stream: "screen", sdp: offer, from: client.address, now: engine.now) }) else {
            Issue.record("offer refused")
            return
        }
        let lines = answer.split(separator: "\r\n")
        let ufrag = try #require(lines.first { $0.hasPrefix("a=ice-ufrag:") }?.dropFirst(12))
        let password = try #require(lines.first { $0.hasPrefix("a=ice-pwd:") }?.dropFirst(10))
        let check = STUNMessage.bindingRequest(
            transactionID: Array(repeating: 9, count: 12), username: "\(ufrag):client1", priority: 1,
            role: .controlling(tiebreaker: 1), useCandidate: true, integrityKey: Array(password.utf8), hmacSHA1: HMACSHA1.authenticate(key:data:))
        endpoint.drive { $0.receive(check, from: client.address, now: engine.now) }
        #expect(sent.count == 1 && sent.first?.to == client.address && sent.first.map { MultiplexedPacketKind.classify($0.bytes) } == .stun)
        #expect(engine.table.takeOutputs().isEmpty)
    }

    /// The endpoint's one timer, on an event loop whose time the test moves with the table's clock: set at the
    /// deadline an input brought, fired there, and set again for the next.
    @Test func theEndpointsTimerFiresAtTheTablesDeadlines() throws {
        let engine = try WebRTCSessionTableTests.Engine()
        let loop = EmbeddedEventLoop()
        let start = engine.now
        let endpoint = WebRTCEndpoint(table: engine.table, loop: loop) { start + UInt64(loop.now.uptimeNanoseconds) }
        let now = { start + UInt64(loop.now.uptimeNanoseconds) }
        func offer(from client: WebRTCSessionTableTests.Client) -> Bool {
            let sdp = WebRTCSessionTests.offer(fingerprint: client.identity.fingerprintText)
            if case .created = endpoint.drive({ $0.offer(stream: "screen", sdp: sdp, from: client.address, now: now()) }) { return true }
            return false
        }
        // Never checked: the session expires 10 s after its offer, at that time.
        #expect(offer(from: try WebRTCSessionTableTests.Client(port: 40000)))
        loop.advanceTime(by: .seconds(9))
        #expect(engine.table.sessionCount == 1, "9 s after the offer")
        loop.advanceTime(by: .milliseconds(1001))
        #expect(engine.table.sessionCount == 0, "just past 10 s")
        // The next one's timer is set by its own offer, after the first fired.
        loop.advanceTime(by: .seconds(5))
        #expect(offer(from: try WebRTCSessionTableTests.Client(port: 40001)))
        loop.advanceTime(by: .milliseconds(9999))
        #expect(engine.table.sessionCount == 1)
        loop.advanceTime(by: .milliseconds(2))
        #expect(engine.table.sessionCount == 0)
        // No timer is left: an idle table wakes nobody.
        #expect(engine.table.nextDeadline(now: now()) == nil)
        endpoint.stop()
        try loop.syncShutdownGracefully()
    }
}
