import Bitstream
import Decoding
import Logging
import NIOConcurrencyHelpers
@testable import Pipeline
import Prometheus
import Testing

/// The state an RTSP session's media handlers share: what its packets and the server's RTCP do to it.
@Suite struct RTSPMediaStateTests {
    static let serverSSRC: UInt32 = 0x1234_5678

    static func state() -> RTSPMediaState {
        var state = RTSPMediaState(refusals: RateLimitedLogger(logger: Logger(label: "test")))
        state.gate = RTSPMediaGate(serverPorts: nil, interleaved: true, ssrc: serverSSRC)
        return state
    }

    /// An RTP header: version 2 (with the padding bit where asked), payload type 96, `sequence`, timestamp 9000, `ssrc`.
    static func packet(sequence: UInt16, ssrc: UInt32 = serverSSRC, padding: Bool = false) -> [UInt8] {
        [padding ? 0xA0 : 0x80, 96, UInt8(sequence >> 8), UInt8(sequence & 0xFF), 0, 0, 0x23, 0x28]
            + (0..<4).map { UInt8(truncatingIfNeeded: ssrc >> (24 - 8 * $0)) }
    }

    /// The stream's worker, as an rtsp:// stream has it (its decode thread not started: the tests take its queue).
    static func worker(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) throws -> StreamWorker {
        let logger = Logger(label: "test")
        let metrics = StreamMetrics(stream: "cam", factory: MetricsServer.factory(registry: registry))
        let stream = StreamConfiguration(name: "cam", source: .rtsp(RTSPSettings(camera: try RTSPSource.parse("rtsp://camera.invalid/stream").get())))
        return StreamWorker(configuration: stream, ringEvents: RingEventReporter(shmName: "streamrecv-unused", logger: logger, metrics: metrics),
                            activity: SenderActivity(), logger: logger, metrics: metrics)
    }

    /// The last-SR field (LSR, RFC 3550 §6.4.1) of the receiver report the state would send now.
    static func lastSenderReport(_ state: RTSPMediaState) -> UInt32? {
        var statistics = state.receiver.statistics
        let report = statistics.report(senderSSRC: 1, cname: "test", now: 2_000_000_000)
        guard report.count >= 32 else { return nil }
        return report[24..<28].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    /// The session's handlers hand each datagram to `RTSPSession.deliverer`: parsed there once, counted for the
    /// reports and queued for the decode thread as that packet; what is not RTP goes nowhere and is counted.
    @Test func theDelivererParsesOnceAndDropsWhatIsNotRTP() throws {
        let registry = PrometheusCollectorRegistry()
        let worker = try Self.worker(registry: registry)
        let media = NIOLockedValueBox(Self.state())
        let deliver = RTSPSession.deliverer(worker: worker, media: media, id: 7, pushedBack: false)
        // Two packets in sequence: the server's source passes probation, both come out in order in one item.
        let packets = [Self.packet(sequence: 7) + [0x65, 0x88], Self.packet(sequence: 8) + [0x41, 0x9A]]
        for packet in packets {
            let queued = packet.withUnsafeBytes(deliver)
            #expect(queued == .queued)
        }
        let counted = media.withLockedValue { $0.receiver.statistics }
        #expect(counted.ssrc == Self.serverSSRC && counted.lastArrival != nil)
        let items = [worker.queue.pop(waitingAtMost: 0)?.item, worker.queue.pop(waitingAtMost: 0)?.item]
        guard case .rtp(let none, let firstBytes, _, 7)? = items[0], case .rtp(let events, let secondBytes, _, 7)? = items[1] else {
            Issue.record("not queued as RTP of connection 7: \(items)")
            return
        }
        #expect(none.isEmpty && firstBytes == packets[0].count && secondBytes == packets[1].count)
        let parsed = events.compactMap { if case .packet(let packet) = $0 { packet } else { nil } }
        #expect(parsed.map(\.sequenceNumber) == [7, 8] && parsed.map { Array($0.payload) } == [[0x65, 0x88], [0x41, 0x9A]])
        // A header with no payload, and padding longer than the payload: not RTP.
        for bad in [Self.packet(sequence: 9), Self.packet(sequence: 9, padding: true) + [0x65, 9]] {
            let verdict = bad.withUnsafeBytes(deliver)
            #expect(verdict == .malformed)
        }
        #expect(worker.queue.pop(waitingAtMost: 0) == nil)
        #expect(media.withLockedValue { $0.receiver.statistics.lastArrival } == counted.lastArrival, "not counted for the reports")
        #expect(registry.samples()[#"streamrecvd_rtp_packets_discarded_total{stream="cam",reason="malformed"}"#] == 2)
    }

    /// The session's end queues what the reorder window holds, then `.disconnected`; a handler still delivering
    /// afterwards (its channel closes asynchronously) queues nothing.
    @Test func theEndQueuesWhatIsHeldThenTheDisconnectAndNothingAfter() throws {
        let worker = try Self.worker()
        let media = NIOLockedValueBox(Self.state())
        let deliver = RTSPSession.deliverer(worker: worker, media: media, id: 7, pushedBack: false)
        for sequence: UInt16 in [1, 2, 4] { _ = (Self.packet(sequence: sequence) + [0x41]).withUnsafeBytes(deliver) }
        RTSPSession.finish(media: media, worker: worker, id: 7, reason: .closedBySender)
        let late = (Self.packet(sequence: 3) + [0x41]).withUnsafeBytes(deliver)
        #expect(late == .sessionEnded)
        var items: [String] = []
        while let item = worker.queue.pop(waitingAtMost: 0)?.item {
            switch item {
            case .rtp(let events, _, _, _):
                items.append(events.map { if case .packet(let packet) = $0 { "\(packet.sequenceNumber)" } else { "\($0)" } }.joined(separator: ","))
            case .disconnected: items.append("disconnected")
            default: items.append("other")
            }
        }
        #expect(items == ["", "1,2", "", "4", "disconnected"], "probation, the first two, 4 held, what the window held, the end")
    }

    /// Over the high-water mark a UDP packet is dropped (the sequence gap reports it), but one already read from an
    /// interleaved connection, which pauses its reads, is still queued: TCP loses nothing. Past the mark and its
    /// allowance both are dropped, the last bound on a server that is not held back.
    @Test func packetsAlreadyReadFromAPausedConnectionAreQueuedPastTheHighWaterMark() throws {
        let worker = try Self.worker()
        let media = NIOLockedValueBox(Self.state())
        let datagrams = RTSPSession.deliverer(worker: worker, media: media, id: 7, pushedBack: false)
        let interleaved = RTSPSession.deliverer(worker: worker, media: media, id: 7, pushedBack: true)
        _ = worker.queue.push(.listening, bytes: worker.backlogHighWater)
        #expect((Self.packet(sequence: 1) + [0x41]).withUnsafeBytes(datagrams) == .decoderBehind)
        #expect((Self.packet(sequence: 2) + [0x41]).withUnsafeBytes(interleaved) == .queued)
        _ = worker.queue.push(.listening, bytes: StreamWorker.alreadyReadAllowance)
        #expect((Self.packet(sequence: 3) + [0x41]).withUnsafeBytes(interleaved) == .decoderBehind)
    }

    @Test func onlyTheServersOwnSenderReportReachesTheReceiverReport() throws {
        var state = Self.state()
        for sequence: UInt16 in [1, 2] { _ = state.receive(try RTPPacket(parsing: Self.packet(sequence: sequence)[...] + [0x65]), arrival: 1_000_000_000) }
        var foreign = RTPReceptionStatistics.SenderNews()
        foreign.senderReport = .init(ssrc: 0xDEAD_BEEF, ntpTimestamp: 0x1122_3344_5566_7788)
        let notedForeign = state.note(foreign, arrival: 1_100_000_000)
        #expect(notedForeign)
        #expect(Self.lastSenderReport(state) == 0)
        var own = RTPReceptionStatistics.SenderNews()
        own.senderReport = .init(ssrc: Self.serverSSRC, ntpTimestamp: 0x1122_3344_5566_7788)
        let notedOwn = state.note(own, arrival: 1_100_000_000)
        #expect(notedOwn)
        #expect(Self.lastSenderReport(state) == 0x3344_5566, "the middle 32 bits of its NTP timestamp")
    }

    @Test func aByeEndsTheSessionOnlyForTheServersSource() {
        var state = Self.state()
        var foreign = RTPReceptionStatistics.SenderNews()
        foreign.goodbyeSources = [0xDEAD_BEEF]
        let notedForeign = state.note(foreign, arrival: 0)
        #expect(!notedForeign, "to be refused")
        #expect(!state.goodbyeReceived)
        var own = RTPReceptionStatistics.SenderNews()
        own.goodbyeSources = [0xDEAD_BEEF, Self.serverSSRC]
        let notedOwn = state.note(own, arrival: 0)
        #expect(notedOwn)
        #expect(state.goodbyeReceived)
    }

    @Test func beforeSetupsAnswerNoByeIsTheServers() {
        var state = RTSPMediaState(refusals: RateLimitedLogger(logger: Logger(label: "test")))
        var news = RTPReceptionStatistics.SenderNews()
        news.goodbyeSources = [Self.serverSSRC]
        let notedNews = state.note(news, arrival: 0)
        #expect(!notedNews)
        #expect(!state.goodbyeReceived)
    }
}
