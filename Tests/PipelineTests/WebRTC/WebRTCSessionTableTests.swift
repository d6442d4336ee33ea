import Bitstream
import Logging
@testable import MediaSecurity
import NIOCore
@testable import Pipeline
import Prometheus
import Testing

/// The WHIP engine driven in memory: a browser-like client (its own STUN, DTLS and SRTP) and the session table trade
/// datagrams as values, on a clock the test moves. No socket; the stream's decode thread is its work queue, read by
/// the test. Only OpenSSL's DTLS retransmission timer runs on the real clock (it has no other).
@Suite struct WebRTCSessionTableTests {
    static let second: UInt64 = 1_000_000_000

    /// The table with one whip stream attached, "screen", and the clock.
    final class Engine {
        let registry = PrometheusCollectorRegistry()
        let identity: DTLSIdentity
        let table: WebRTCSessionTable
        let worker: StreamWorker
        let streamMetrics: StreamMetrics
        var now: UInt64 = 5 * WebRTCSessionTableTests.second

        init(secondSender: SecondSenderPolicy = .refuse) throws {
            let configuration = WebRTCServerConfiguration(http: ListenAddress(transport: .tcp, host: "127.0.0.1", port: 8889),
                                                          media: ListenAddress(transport: .udp, host: "127.0.0.1", port: 8189))
            identity = try DTLSIdentity.generate()
            let factory = MetricsServer.factory(registry: registry)
            let logger = Logger(label: "webrtc-table-test")
            table = WebRTCSessionTable(configuration: configuration, identity: identity, metrics: WebRTCMetrics(factory: factory), logger: logger)
            var settings = WebRTCSettings(token: try #require(BearerToken("a-token-of-sixteen-or-more")), tokenFile: "/dev/null")
            settings.rtp.keyframeRequestInterval = 1
            var stream = StreamConfiguration(name: "screen", source: .webrtc(settings))
            stream.secondSender = secondSender
            streamMetrics = StreamMetrics(stream: "screen", factory: factory)
            let activity = SenderActivity()
            worker = StreamWorker(configuration: stream, ringEvents: RingEventReporter(shmName: "streamrecv-unused", logger: logger, metrics: streamMetrics),
                                  activity: activity, logger: logger, metrics: streamMetrics)
            table.attach(WebRTCRoute(configuration: stream, settings: settings, worker: worker, activity: activity, metrics: streamMetrics), now: now)
            _ = work()
        }

        /// What the decode thread would be handed now.
        func work() -> [StreamWorker.Work] {
            var items: [StreamWorker.Work] = []
            while let next = worker.queue.pop(waitingAtMost: 0) { items.append(next.item) }
            return items
        }

        /// The RTP packets handed to the decode thread, in order.
        func deliveredPackets() -> [RTPPacket] {
            work().flatMap { item -> [RTPPacket] in
                guard case .rtp(let events, _, _, _) = item else { return [] }
                return events.compactMap { if case .packet(let packet) = $0 { packet } else { nil } }
            }
        }

        /// One input's datagrams to `client`, the other outputs kept apart.
        func receive(_ datagram: [UInt8], from client: Client) -> [WebRTCSessionTable.Output] {
            table.receive(datagram, from: client.address, now: now)
            return table.takeOutputs()
        }
    }

    /// A browser: its certificate, its address, and once connected its SRTP keys.
    final class Client {
        let identity: DTLSIdentity
        let address: SocketAddress
        var dtls: DTLSClientAssociation?
        var keys: DTLSKeyingMaterial?
        var session = ""

        init(port: Int) throws {
            identity = try DTLSIdentity.generate()
            address = try SocketAddress(ipAddress: "127.0.0.1", port: port)
        }

        /// The datagrams in `outputs` that are for this client.
        func datagrams(in outputs: [WebRTCSessionTable.Output]) -> [[UInt8]] {
            outputs.compactMap { if case .transmit(let bytes, let to, _) = $0, to == address { bytes } else { nil } }
        }

        /// The RTCP packet types (PT, FMT) of each feedback datagram, unprotected as the browser would.
        func feedback(in outputs: [WebRTCSessionTable.Output]) throws -> [(type: UInt8, format: UInt8, media: UInt32)] {
            let srtcp = try SRTPReceiveContext(keying: try #require(keys), remoteIsDTLSClient: false)
            return try datagrams(in: outputs).filter { MultiplexedPacketKind.classify($0) == .rtcp }.map { datagram in
                let clear = try srtcp.unprotectRTCP(datagram).get()
                // After the leading RR: the feedback packet, its FMT, and the media SSRC it names.
                return clear[1] == 201 && clear.count >= 20 && clear[3] == 1
                    ? (clear[9], clear[8] & 0x1F, clear[16..<20].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
                    : (clear[1], clear[0] & 0x1F, 0)
            }
        }

        func video(_ sequence: UInt16, payloadType: UInt8 = 96, ssrc: UInt32 = 0x1234_5678, payload: [UInt8] = [0x41, 1]) throws -> [UInt8] {
            try WebRTCSessionTests.protected(sequence, payloadType: payloadType, ssrc: ssrc, payload: payload, keys: try #require(keys))
        }
    }

    /// The client's offer answered, its check answered, and the DTLS handshake done, its flights reordered and its
    /// first datagram lost on the way. Returns what the offer itself put out (a session it took over ended).
    @discardableResult
    static func connect(_ client: Client, to engine: Engine) throws -> [WebRTCSessionTable.Output] {
        let offer = WebRTCSessionTests.offer(fingerprint: client.identity.fingerprintText)
        guard case .created(let id, let answer) = engine.table.offer(stream: "screen", sdp: offer, from: client.address, now: engine.now) else {
            Issue.record("offer refused")
            return []
        }
        let offered = engine.table.takeOutputs()
        client.session = id
        let lines = answer.split(separator: "\r\n")
        let ufrag = try #require(lines.first { $0.hasPrefix("a=ice-ufrag:") }?.dropFirst(12))
        let password = try #require(lines.first { $0.hasPrefix("a=ice-pwd:") }?.dropFirst(10))
        let check = STUNMessage.bindingRequest(
            transactionID: (0..<12).map { _ in UInt8.random(in: 0...255) }, username: "\(ufrag):client1", priority: 1,
            role: .controlling(tiebreaker: 1), useCandidate: true, integrityKey: Array(password.utf8), hmacSHA1: HMACSHA1.authenticate(key:data:))
        let answered = engine.receive(check, from: client)
        #expect(client.datagrams(in: answered).count == 1, "the check answered")
        #expect(answered.contains(.peerJoined(client.address, at: nil)), "the session's address known: a socket of its own")

        let dtls = try DTLSClientAssociation(identity: client.identity, expectedPeerFingerprint: engine.identity.fingerprintSHA256,
                                             initialTimeout: .milliseconds(1))
        client.dtls = dtls
        // The ClientHello is lost: the client sends it again when its timer runs out.
        #expect(!dtls.core.takeOutgoingDatagrams().isEmpty)
        var flight: [[UInt8]] = []
        let giveUp = ContinuousClock.now + .seconds(5)
        while flight.isEmpty && ContinuousClock.now < giveUp {
            _ = dtls.core.handleRetransmissionTimer()
            flight = dtls.core.takeOutgoingDatagrams()
        }
        for _ in 0..<8 where client.keys == nil {
            var toClient: [[UInt8]] = []
            for datagram in flight.reversed() { toClient += client.datagrams(in: engine.receive(datagram, from: client)) }
            flight = []
            for datagram in toClient.reversed() {
                if case .connected(let keys) = dtls.core.receive(datagram) { client.keys = keys }
                flight += dtls.core.takeOutgoingDatagrams()
            }
        }
        // The last flight (the client's Finished) completes the server's side.
        for datagram in flight { _ = engine.receive(datagram, from: client) }
        #expect(client.keys != nil)
        return offered
    }

    @Test func aBrowserConnectsThroughLossAndReorderingAndItsVideoReachesTheStream() throws {
        let engine = try Engine()
        let client = try Client(port: 40000)
        try Self.connect(client, to: engine)
        let connectedItems = engine.work()
        #expect(connectedItems.contains { if case .connected = $0 { true } else { false } })
        #expect(connectedItems.contains { if case .rtpSession(_, let media) = $0 { media.payloadType == 96 } else { false } })
        var outputs: [WebRTCSessionTable.Output] = []
        for sequence: UInt16 in 1...3 { outputs += engine.receive(try client.video(sequence), from: client) }
        #expect(engine.deliveredPackets().map(\.sequenceNumber) == [1, 2, 3])
        // The source's first packet asked it for a keyframe (PLI: PT 206, FMT 1), once.
        #expect(try client.feedback(in: outputs).map { "\($0.type)/\($0.format)/\($0.media)" } == ["206/1/\(0x1234_5678)"])
        #expect(engine.table.sessionCount == 1)
        // A stranger's copy of a packet, replayed from another address, reaches nothing.
        let stranger = try Client(port: 40001)
        #expect(engine.receive(try client.video(4), from: stranger).isEmpty)
        #expect(engine.deliveredPackets().isEmpty)
    }

    @Test func aGapIsAskedForAndItsRetransmissionDelivered() throws {
        let engine = try Engine()
        let client = try Client(port: 40000)
        try Self.connect(client, to: engine)
        var outputs: [WebRTCSessionTable.Output] = []
        for sequence: UInt16 in [1, 2, 4] { outputs += engine.receive(try client.video(sequence), from: client) }
        // At once, with the packet that showed the gap: a generic NACK (PT 205, FMT 1).
        #expect(try client.feedback(in: outputs).contains { $0.type == 205 && $0.format == 1 && $0.media == 0x1234_5678 })
        #expect(engine.deliveredPackets().map(\.sequenceNumber) == [1, 2], "4 waits in the reorder window")
        // The answer: RTX (payload type 97) on its own SSRC, the original number first.
        _ = engine.receive(try client.video(1, payloadType: 97, ssrc: 0x0BAD_F00D, payload: [0, 3, 0x41, 3]), from: client)
        let repaired = engine.deliveredPackets()
        #expect(repaired.map(\.sequenceNumber) == [3, 4] && repaired.first?.ssrc == 0x1234_5678 && repaired.first?.payloadType == 96)
        #expect(repaired.first.map { Array($0.payload) } == [0x41, 3])
        engine.now += 50_000_000
        engine.table.tick(now: engine.now)
        #expect(try client.feedback(in: engine.table.takeOutputs()).allSatisfy { $0.type != 205 }, "nothing left to ask for")
    }

    @Test func theDecodersKeyframeIsAskedForEverySecondUntilItArrives() throws {
        let engine = try Engine()
        let client = try Client(port: 40000)
        try Self.connect(client, to: engine)
        _ = engine.receive(try client.video(1), from: client)  // and the new source's PLI
        engine.now += 2 * Self.second
        engine.table.keyframe(.wanted(0x1234_5678), stream: "screen", now: engine.now)
        let plis = { (outputs: [WebRTCSessionTable.Output]) in try client.feedback(in: outputs).filter { $0.type == 206 }.count }
        #expect(try plis(engine.table.takeOutputs()) == 1)
        var asked: [Int] = []
        for tenth in 1...25 {
            engine.table.tick(now: engine.now + UInt64(tenth) * Self.second / 10)
            asked.append(try plis(engine.table.takeOutputs()))
        }
        #expect(asked.enumerated().filter { $0.element > 0 }.map(\.offset) == [9, 19], "again at 1 s and 2 s")
        engine.table.keyframe(.arrived, stream: "screen", now: engine.now + 3 * Self.second)
        engine.table.tick(now: engine.now + 5 * Self.second)
        #expect(try plis(engine.table.takeOutputs()) == 0, "healed: no more requests")
    }

    @Test func consentLapsesAfterThirtySilentSecondsAndTheClientIsTold() throws {
        let engine = try Engine()
        let client = try Client(port: 40000)
        try Self.connect(client, to: engine)
        _ = engine.work()
        engine.table.tick(now: engine.now + 29 * Self.second)
        _ = engine.table.takeOutputs()
        #expect(engine.table.sessionCount == 1)
        engine.table.tick(now: engine.now + 31 * Self.second)
        let outputs = engine.table.takeOutputs()
        #expect(engine.table.sessionCount == 0)
        #expect(outputs.contains(.peerLeft(client.address)))
        // Its close_notify: an alert record (content type 21), in the epoch of the handshake's keys.
        #expect(client.datagrams(in: outputs).contains { $0.first == 21 })
        #expect(engine.work().contains { if case .disconnected = $0 { true } else { false } })
    }

    @Test func aSecondBrowserTakesOverAndTheFirstIsTold() throws {
        let engine = try Engine(secondSender: .takeover)
        let first = try Client(port: 40000)
        try Self.connect(first, to: engine)
        _ = engine.receive(try first.video(1), from: first)
        _ = engine.work()
        _ = engine.table.takeOutputs()
        let second = try Client(port: 40002)
        engine.now += Self.second
        let offered = try Self.connect(second, to: engine)
        #expect(engine.table.sessionCount == 1)
        // The first session ended at the second's offer: its client told (close_notify), its socket closed, its
        // sender gone for the decode thread; its datagrams now reach nothing, the second's video does.
        #expect(first.datagrams(in: offered).contains { $0.first == 21 } && offered.contains(.peerLeft(first.address)))
        #expect(engine.work().contains { if case .disconnected(_, .takenOver) = $0 { true } else { false } })
        #expect(engine.receive(try first.video(2), from: first).isEmpty)
        _ = engine.receive(try second.video(1, ssrc: 0x5555_5555), from: second)
        #expect(engine.deliveredPackets().map(\.ssrc) == [0x5555_5555])
    }

    @Test func aDeleteEndsTheSessionAndTellsTheClient() throws {
        let engine = try Engine()
        let client = try Client(port: 40000)
        try Self.connect(client, to: engine)
        // 4 waits in the reorder window for 3 when the session ends: it reaches the decode thread before the end.
        for sequence: UInt16 in [1, 2, 4] { _ = engine.receive(try client.video(sequence), from: client) }
        #expect(engine.deliveredPackets().map(\.sequenceNumber) == [1, 2])
        #expect(!engine.table.delete(stream: "screen", session: "not-a-session", now: engine.now))
        #expect(engine.table.delete(stream: "screen", session: client.session, now: engine.now))
        let outputs = engine.table.takeOutputs()
        #expect(engine.table.sessionCount == 0 && outputs.contains(.peerLeft(client.address)))
        #expect(client.datagrams(in: outputs).contains { $0.first == 21 }, "close_notify")
        let items = engine.work().compactMap { item -> String? in
            switch item {
            case .rtp(let events, _, _, _): events.map { if case .packet(let packet) = $0 { "\(packet.sequenceNumber)" } else { "\($0)" } }.joined()
            case .disconnected: "disconnected"
            default: nil  // the status line
            }
        }
        #expect(items == ["4", "disconnected"])
    }

    /// A browser closing its side (`pc.close()`, a tab closed) without a DELETE: the stream hears its sender left.
    @Test func theClientsCloseNotifyEndsTheSessionForTheStream() throws {
        let engine = try Engine()
        let client = try Client(port: 40000)
        try Self.connect(client, to: engine)
        _ = engine.work()
        let dtls = try #require(client.dtls)
        dtls.core.close()
        var outputs: [WebRTCSessionTable.Output] = []
        for datagram in dtls.core.takeOutgoingDatagrams() { outputs += engine.receive(datagram, from: client) }
        #expect(engine.table.sessionCount == 0 && outputs.contains(.peerLeft(client.address)))
        #expect(client.datagrams(in: outputs).isEmpty, "nothing sent back to a client that closed")
        #expect(engine.work().contains { if case .disconnected(_, .closedBySender) = $0 { true } else { false } })
    }

    /// The table says when it next has work (the endpoint sets its one timer there), and each tick at that time moves
    /// it on: nothing is woken for in a loop, and an idle table wakes nobody.
    @Test func theTableSaysWhenItNextHasWorkAndEachTickMovesItOn() throws {
        let engine = try Engine()
        // An answered session no check reaches: its deadline is its ICE timeout, and it ends there.
        let silent = try Client(port: 40005)
        let offer = WebRTCSessionTests.offer(fingerprint: silent.identity.fingerprintText)
        guard case .created = engine.table.offer(stream: "screen", sdp: offer, from: silent.address, now: engine.now) else {
            Issue.record("offer refused")
            return
        }
        let timeout = engine.now + WebRTCSessionTable.connectivityTimeout + 1
        #expect(engine.table.nextDeadline(now: engine.now) == timeout)
        engine.table.tick(now: timeout - 2)
        #expect(engine.table.sessionCount == 1)
        engine.table.tick(now: timeout)
        #expect(engine.table.sessionCount == 0 && engine.table.nextDeadline(now: timeout) == nil, "nothing left to wake for")
        _ = engine.table.takeOutputs()
        // A connected session with a packet lost and the decoder waiting for a keyframe, ticked at each deadline.
        engine.now = timeout + Self.second
        let client = try Client(port: 40000)
        try Self.connect(client, to: engine)
        for sequence: UInt16 in [1, 2, 4] { _ = engine.receive(try client.video(sequence), from: client) }
        engine.table.keyframe(.wanted(0x1234_5678), stream: "screen", now: engine.now)
        _ = engine.table.takeOutputs()
        var now = engine.now
        var (ticks, nacks, plis, reports) = (0, 0, 0, 0)
        while now < engine.now + 3 * Self.second, ticks < 500, let deadline = engine.table.nextDeadline(now: now) {
            now = deadline
            engine.table.tick(now: now)
            ticks += 1
            for feedback in try client.feedback(in: engine.table.takeOutputs()) {
                switch feedback.type {
                case 205: nacks += 1
                case 206: plis += 1
                case 201: reports += 1
                default: break
                }
            }
            if let next = engine.table.nextDeadline(now: now) { #expect(next > now, "a deadline the tick did not move on") }
        }
        #expect(nacks == 3, "asked again 40, 80 and 120 ms after the first request")
        #expect(plis == 3 && reports == 3, "a keyframe request and a report each second")
        #expect(ticks < 20, "woken only when there was something to do")
    }

    /// After a datagram only its session's deadlines are looked at, and they are there: a gap's next NACK.
    @Test func aDatagramBringsItsSessionsDeadlineForward() throws {
        let engine = try Engine()
        let client = try Client(port: 40000)
        try Self.connect(client, to: engine)
        for sequence: UInt16 in [1, 2] { _ = engine.receive(try client.video(sequence), from: client) }
        _ = engine.table.takeNextDeadline(now: engine.now)
        #expect(engine.table.takeNextDeadline(now: engine.now) == nil, "nothing new since")
        engine.now += 1_000_000
        _ = engine.receive(try client.video(4), from: client)  // 3 is missing: asked at once, again 40 ms later
        #expect(engine.table.takeNextDeadline(now: engine.now) == engine.now + LossRecovery.retryInterval)
    }
}

