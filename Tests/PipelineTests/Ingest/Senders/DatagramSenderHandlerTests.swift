import Bitstream
import Logging
import NIOCore
import NIOEmbedded
@testable import Pipeline
import Prometheus
import Testing

/// The datagram side of rtp:// driven in memory (an embedded channel): each datagram parsed once and put in order by
/// the stream's receiver, what it made of it queued for the decode thread, and a sender let go or taken over leaves
/// what the reorder window held ahead of its `.disconnected`.
@Suite struct DatagramSenderHandlerTests {
    static func fixture(secondSender: SecondSenderPolicy = .takeover) throws -> (EmbeddedChannel, StreamWorker, PrometheusCollectorRegistry) {
        let registry = PrometheusCollectorRegistry()
        let logger = Logger(label: "datagram-test")
        var stream = StreamConfiguration(name: "cam", source: .rtp(ListenAddress(transport: .rtp, host: "127.0.0.1", port: 5004), RTPSettings()))
        stream.codec = .h264
        stream.secondSender = secondSender
        let metrics = StreamMetrics(stream: "cam", factory: MetricsServer.factory(registry: registry))
        let activity = SenderActivity()
        let worker = StreamWorker(configuration: stream, ringEvents: RingEventReporter(shmName: "streamrecv-unused", logger: logger, metrics: metrics),
                                  activity: activity, logger: logger, metrics: metrics)
        let handler = DatagramSenderHandler(worker: worker, logger: logger, configuration: stream, metrics: metrics, activity: activity, messageBytes: 2048)
        let channel = EmbeddedChannel(handler: handler)
        return (channel, worker, registry)
    }

    static func packet(_ sequence: UInt16, ssrc: UInt32 = 0x1234, payloadType: UInt8 = 96, payload: Int = 0) -> [UInt8] {
        [0x80, payloadType, UInt8(sequence >> 8), UInt8(sequence & 0xFF), 0, 0, 0x0B, 0xB8]
            + (0..<4).map { UInt8(truncatingIfNeeded: ssrc >> (24 - 8 * $0)) } + [0x41, UInt8(sequence & 0xFF)]
            + [UInt8](repeating: 0x55, count: payload)
    }

    static func sample(_ registry: PrometheusCollectorRegistry, _ series: String) -> Double? {
        registry.samples()["streamrecvd_\(series)"]
    }

    static func send(_ bytes: [UInt8], from port: Int, on channel: EmbeddedChannel) throws {
        let source = try SocketAddress(ipAddress: "127.0.0.1", port: port)
        try channel.writeInbound(AddressedEnvelope(remoteAddress: source, data: ByteBuffer(bytes: bytes)))
    }

    /// The work items queued, in words: an `.rtp` item by its packets' numbers ("-" for none yet).
    static func items(_ worker: StreamWorker) -> [String] {
        var items: [String] = []
        while let item = worker.queue.pop(waitingAtMost: 0)?.item {
            switch item {
            case .connected: items.append("connected")
            case .rtp(let events, _, _, _):
                let text = events.map { event in
                    switch event {
                    case .packet(let packet): "\(packet.sequenceNumber)"
                    case .sourceChanged(let ssrc, _): "source \(ssrc)"
                    case .discarded(let reason): "discarded \(reason.rawValue)"
                    }
                }
                items.append(text.isEmpty ? "-" : text.joined(separator: ","))
            case .disconnected(_, .takenOver): items.append("taken over")
            case .disconnected: items.append("disconnected")
            default: items.append("other")
            }
        }
        return items
    }

    @Test func packetsComeOrderedAndATakeoverLeavesWhatWasHeldFirst() throws {
        let (channel, worker, _) = try Self.fixture()
        for sequence: UInt16 in [1, 2, 4] { try Self.send(Self.packet(sequence), from: 40000, on: channel) }
        // Another address takes over (second_sender = takeover): 4, held for 3, goes to the sender it came from.
        for sequence: UInt16 in [70, 71] { try Self.send(Self.packet(sequence, ssrc: 0x9999), from: 40002, on: channel) }
        #expect(Self.items(worker) == ["connected", "-", "1,2", "-", "4", "taken over", "connected", "-", "70,71"])
        // The new sender is validated afresh: its source is its first, with no change to report.
        try Self.send(Self.packet(72, ssrc: 0x9999), from: 40002, on: channel)
        #expect(Self.items(worker) == ["72"])
        _ = try channel.finish()
    }

    /// A datagram that is no RTP stops here, counted; nothing of it reaches the decode thread.
    @Test func aDatagramThatIsNoRTPIsCountedAndGoesNowhere() throws {
        let (channel, worker, registry) = try Self.fixture()
        try Self.send(Self.packet(1), from: 40000, on: channel)
        try Self.send([0x80, 96, 0, 2], from: 40000, on: channel)
        #expect(Self.items(worker) == ["connected", "-"])
        #expect(registry.samples()[#"streamrecvd_rtp_packets_discarded_total{stream="cam",reason="malformed"}"#] == 1)
        _ = try channel.finish()
    }

    /// Another payload type (RTCP sent to the RTP port, say) is dropped before it could make its source the sender.
    @Test func anotherPayloadTypeMakesNoOneTheSender() throws {
        let (channel, worker, registry) = try Self.fixture()
        try Self.send(Self.packet(1, payloadType: 0), from: 40000, on: channel)
        try Self.send([0x80, 200, 0, 6, 0, 0, 0, 1] + [UInt8](repeating: 0, count: 20), from: 40000, on: channel)  // an RTCP SR
        #expect(Self.items(worker).isEmpty)
        #expect(Self.sample(registry, #"rtp_payloads_dropped_total{stream="cam"}"#) == 2)
        // The sender's own packet of another type goes on, in its place: the depacketizer drops it, as it always did
        // (dropped here, its number would be a hole the window waits on).
        for sequence: UInt16 in [1, 2] { try Self.send(Self.packet(sequence), from: 40002, on: channel) }
        try Self.send(Self.packet(3, payloadType: 0), from: 40002, on: channel)
        #expect(Self.items(worker) == ["connected", "-", "1,2", "3"])
        _ = try channel.finish()
    }

    /// A new source port per datagram, each taking over: once 16 senders' connects wait for the decode thread, no
    /// other sender is let in (counted) until it takes them; what is queued stays bounded.
    @Test func aFloodOfNewSendersStopsAtSixteenQueuedConnects() throws {
        let (channel, worker, registry) = try Self.fixture()
        for port in 0..<40 { try Self.send(Self.packet(UInt16(port)), from: 41000 + port, on: channel) }
        let items = Self.items(worker)
        #expect(items.filter { $0 == "connected" }.count == StreamWorker.maximumConnectsQueued)
        #expect(Self.sample(registry, #"refused_total{stream="cam",reason="rate_limited"}"#) == Double(40 - StreamWorker.maximumConnectsQueued))
        _ = try channel.finish()
    }

    /// While the decode thread is behind, the sender's datagrams are dropped and counted, and the decode thread is
    /// told of the gap once, not once a datagram.
    @Test func lossesWhileBehindAreOneItem() throws {
        let (channel, worker, registry) = try Self.fixture()
        var sequence: UInt16 = 0
        while worker.acceptsMoreBytes {
            try Self.send(Self.packet(sequence, payload: 1900), from: 40000, on: channel)
            sequence &+= 1
        }
        for _ in 0..<100 {
            try Self.send(Self.packet(sequence, payload: 1900), from: 40000, on: channel)
            sequence &+= 1
        }
        var losses = 0
        while let item = worker.queue.pop(waitingAtMost: 0)?.item { if case .datagramsLost = item { losses += 1 } }
        #expect(losses == 1)
        #expect(Self.sample(registry, #"datagrams_lost_total{stream="cam"}"#) == 100)
        _ = try channel.finish()
    }
}
