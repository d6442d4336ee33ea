@testable import Bitstream
import Testing

/// The receiving end of one RTP stream, driven in memory on a clock the tests move: what it takes, what it asks
/// for, and when.
@Suite struct RTPReceiverTests {
    static let ms: UInt64 = 1_000_000
    static let video: UInt32 = 0x1111_1111
    static let localSSRC: UInt32 = 0x0102_0304

    /// WHIP's: payload type 96, RTX 97, NACK, PLI, a keyframe asked of each new source.
    static func whip(interval: UInt64 = 1_000_000_000) -> RTPReceiver {
        var configuration = RTPReceiver.Configuration(localSSRC: localSSRC)
        configuration.payloadType = 96
        configuration.retransmissionPayloadType = 97
        configuration.requestsRetransmissions = true
        configuration.keyframeRequest = .pictureLossIndication
        configuration.keyframeRequestInterval = interval
        configuration.asksNewSourcesForKeyframes = true
        configuration.authenticatedSources = true
        return RTPReceiver(configuration, now: 0)
    }

    /// rtp://'s: anyone may send, so a source is validated (probation) before it counts; no feedback but keyframes.
    static func plain(window: Int = 4) -> RTPReceiver {
        var configuration = RTPReceiver.Configuration(localSSRC: localSSRC)
        configuration.reorderWindow = window
        configuration.keyframeRequest = .pictureLossIndication
        configuration.reportInterval = nil
        return RTPReceiver(configuration, now: 0)
    }

    /// The sequence numbers of the packets handed on, and the other events in words.
    static func summary(_ events: [RTPOrderedEvent]) -> [String] {
        events.map { event in
            switch event {
            case .packet(let packet): "\(packet.sequenceNumber)"
            case .sourceChanged(let ssrc, let restarted): "source \(String(ssrc, radix: 16))\(restarted ? " restarted" : "")"
            case .discarded(let reason): "discarded \(reason.rawValue)"
            }
        }
    }

    static func packet(_ sequence: UInt16, ssrc: UInt32 = video, payloadType: UInt8 = 96, payload: [UInt8] = [0x41, 1]) -> RTPPacket {
        RTPPacket(marker: false, payloadType: payloadType, sequenceNumber: sequence, timestamp: UInt32(sequence) * 3000,
                  ssrc: ssrc, payload: payload[...])
    }

    /// The packet type (PT) and FMT of the feedback packet after the compound's leading RR, and the media SSRC it names.
    static func feedback(_ packet: [UInt8]) -> (type: UInt8, format: UInt8, media: UInt32)? {
        guard packet.count >= 20, packet[1] == 201 else { return nil }
        let media = packet[16..<20].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return (packet[9], packet[8] & 0x1F, media)
    }

    @Test func aGapIsAskedForAndItsRepairIsTheSourcesPacket() throws {
        var receiver = Self.whip()
        #expect(receiver.receive(Self.packet(100), now: 0) == .media)
        #expect(receiver.receive(Self.packet(103), now: 1 * Self.ms) == .media)
        let asked = receiver.poll(now: 1 * Self.ms).filter { if case .retransmissionRequest = $0 { true } else { false } }
        try #require(asked.count == 1)
        guard case .retransmissionRequest(let nack, let named) = asked[0] else { return }
        #expect(named == 2)
        let parsed = try #require(Self.feedback(nack))
        #expect(parsed.type == 205 && parsed.format == 1 && parsed.media == Self.video)
        #expect(Array(nack[20..<24]) == [0, 101, 0, 1], "PID 101, and 102 in the bitmask")
        // The answer: RTX on its own SSRC, the original number first.
        let rtx = Self.packet(7, ssrc: 0x0BAD_F00D, payloadType: 97, payload: [0, 101, 0x41, 9])
        guard case .repaired(let original) = receiver.receive(rtx, now: 5 * Self.ms) else { Issue.record("not repaired"); return }
        #expect(original.ssrc == Self.video && original.payloadType == 96 && original.sequenceNumber == 101 && Array(original.payload) == [0x41, 9])
        #expect(receiver.receive(rtx, now: 6 * Self.ms) == .ignored, "repaired once")
        #expect(receiver.receive(Self.packet(8, ssrc: 0x0BAD_F00D, payloadType: 97, payload: [0, 100, 0x41]), now: 6 * Self.ms) == .ignored,
                "an answer to nothing asked: a probe")
        #expect(receiver.takeRecoveredCount() == 1)
        // 102 is asked again after 40 ms, not before.
        #expect(receiver.poll(now: 20 * Self.ms).isEmpty)
        let again = receiver.poll(now: 45 * Self.ms)
        #expect(again.count == 1 && again.first.map { Array($0.packet[20..<24]) } == [0, 102, 0, 0])
    }

    @Test func aNewSourceIsAskedForAKeyframeOnceAndAnotherSoonAfterWaits() throws {
        var receiver = Self.whip()
        #expect(receiver.receive(Self.packet(1), now: 0) == .media)
        let first = receiver.poll(now: 0)
        #expect(first.count == 1 && Self.feedback(first[0].packet)?.type == 206 && Self.feedback(first[0].packet)?.media == Self.video)
        #expect(receiver.poll(now: 1 * Self.ms).isEmpty && receiver.takeSourceChange() == nil)
        // The encoder restarted: a new SSRC, followed at once, asked at once.
        #expect(receiver.receive(Self.packet(5000, ssrc: 0x2222_2222), now: 10 * Self.ms) == .media)
        #expect(receiver.takeSourceChange() == RTPReceiver.SourceChange(from: Self.video, to: 0x2222_2222))
        #expect(receiver.poll(now: 10 * Self.ms).map { Self.feedback($0.packet)?.media } == [0x2222_2222])
        // Late packets of the source left, and a third soon after: not followed.
        #expect(receiver.receive(Self.packet(2), now: 11 * Self.ms) == .ignored)
        let soon = 10 * Self.ms + RTPReceiver.sourceChangeInterval - 1
        #expect(receiver.receive(Self.packet(1, ssrc: 0x3333_3333), now: soon) == .ignored)
        #expect(receiver.receive(Self.packet(2, ssrc: 0x3333_3333), now: soon + 1) == .media)
        #expect(receiver.ssrc == 0x3333_3333)
        #expect(receiver.receive(Self.packet(3, payloadType: 100), now: soon + 2) == .ignored, "another payload type")
    }

    @Test func theDecodersKeyframeIsAskedForEveryIntervalUntilItArrives() {
        var receiver = Self.whip(interval: 100 * Self.ms)
        _ = receiver.receive(Self.packet(1), now: 0)
        _ = receiver.poll(now: 0)  // the new source's request
        receiver.keyframeWanted(of: Self.video)
        #expect(receiver.poll(now: 50 * Self.ms).isEmpty, "within the interval of the last request")
        #expect(receiver.nextDeadline == 100 * Self.ms)
        #expect(receiver.poll(now: 100 * Self.ms).count == 1)
        #expect(receiver.poll(now: 150 * Self.ms).isEmpty)
        #expect(receiver.poll(now: 200 * Self.ms).count == 1)
        receiver.keyframeArrived()
        #expect(receiver.poll(now: 400 * Self.ms).isEmpty && receiver.nextDeadline == 1000 * Self.ms, "only the report is ahead")
        receiver.keyframeWanted(of: Self.video)
        #expect(receiver.poll(now: 401 * Self.ms).count == 1, "a new loss after healing is asked for at once")
    }

    /// A wish of the decoder that crossed a source change, or outlived it, asks the new source for nothing.
    @Test func aWishForTheSourceLeftIsMoot() {
        var configuration = RTPReceiver.Configuration(localSSRC: 1)
        configuration.keyframeRequest = .pictureLossIndication
        configuration.reportInterval = nil
        var receiver = RTPReceiver(configuration, now: 0)
        for sequence: UInt16 in [1, 2] { _ = receiver.receive(Self.packet(sequence), now: 0) }
        receiver.keyframeWanted(of: Self.video)
        #expect(receiver.poll(now: 1).count == 1)
        // The sender restarts on another SSRC: what was wanted of the old one stops.
        for sequence: UInt16 in [1, 2] { _ = receiver.receive(Self.packet(sequence, ssrc: 0x2222_2222), now: 2) }
        #expect(receiver.poll(now: 5_000_000_000).isEmpty && receiver.nextDeadline == nil)
        // A late wish about the old source changes nothing; one about the new source is asked at once.
        receiver.keyframeWanted(of: Self.video)
        #expect(receiver.poll(now: 5_000_000_001).isEmpty)
        receiver.keyframeWanted(of: 0x2222_2222)
        #expect(receiver.poll(now: 5_000_000_002).map { Self.feedback($0.packet)?.media } == [0x2222_2222])
    }

    /// The decoder letting go (its source changed) does not cancel or unpace a new source's own request.
    @Test func theDecoderLettingGoLeavesANewSourcesRequestAlone() {
        var receiver = Self.whip()
        _ = receiver.receive(Self.packet(1), now: 0)
        receiver.keyframeArrived()
        #expect(receiver.poll(now: 1).count == 1, "the new source's request stays")
        receiver.keyframeArrived()
        receiver.keyframeWanted(of: Self.video)
        #expect(receiver.poll(now: 2).isEmpty, "paced from the new source's request")
        #expect(receiver.poll(now: 1_000_000_001).filter { if case .keyframeRequest = $0 { true } else { false } }.count == 1)
    }

    /// Found by an attack on rtp://: a sender on a new SSRC at every frame, with loss, got a PLI for each. A wish
    /// made moot by a source change stops the requests but keeps their pacing.
    @Test func aSenderChangingSourceAtEveryFrameGetsOneRequestAnInterval() {
        var configuration = RTPReceiver.Configuration(localSSRC: 1)
        configuration.keyframeRequest = .pictureLossIndication
        configuration.reportInterval = nil
        var receiver = RTPReceiver(configuration, now: 0)
        var requests = 0
        for frame in 0..<30 {
            let now = UInt64(frame) * 33 * Self.ms
            receiver.keyframeWanted(of: UInt32(1000 + frame))
            requests += receiver.poll(now: now).count
            receiver.keyframeNoLongerWanted()
        }
        #expect(requests == 1, "one in the first second, not one a frame")
        receiver.keyframeWanted(of: 2000)
        #expect(receiver.poll(now: 1_000 * Self.ms).count == 1, "the next a second after the last")
        // A source the receiver follows itself (rtsp://) keeps the pacing too.
        var followed = RTPReceiver(configuration, now: 0)
        for sequence: UInt16 in [1, 2] { _ = followed.receive(Self.packet(sequence), now: 0) }
        followed.keyframeWanted(of: Self.video)
        #expect(followed.poll(now: 1).count == 1)
        for sequence: UInt16 in [1, 2] { _ = followed.receive(Self.packet(sequence, ssrc: 0x2222_2222), now: 2) }
        followed.keyframeWanted(of: 0x2222_2222)
        #expect(followed.poll(now: 3).isEmpty && followed.poll(now: 1_000_000_001).count == 1)
    }

    @Test func aNowOlderThanTheLastRequestIsNotDue() {
        var configuration = RTPReceiver.Configuration(localSSRC: 1)
        configuration.keyframeRequest = .pictureLossIndication
        configuration.reportInterval = nil
        var receiver = RTPReceiver(configuration, now: 0)
        receiver.keyframeWanted(of: 9)
        #expect(receiver.poll(now: 2_000_000_000).count == 1)
        #expect(receiver.poll(now: 1_999_000_000).isEmpty, "read before the request by a slower caller")
        #expect(receiver.poll(now: 3_000_000_000).count == 1)
    }

    @Test func firSequenceNumbersCountUp() {
        var configuration = RTPReceiver.Configuration(localSSRC: 1)
        configuration.keyframeRequest = .fullIntraRequest
        configuration.keyframeRequestInterval = 0
        configuration.reportInterval = nil
        var receiver = RTPReceiver(configuration, now: 0)
        receiver.keyframeWanted(of: 2)
        let requests = (1...3).flatMap { receiver.poll(now: UInt64($0)) }
        #expect(requests.map { $0.packet[9] } == [206, 206, 206] && requests.map { $0.packet[8] & 0x1F } == [4, 4, 4])
        #expect(requests.map { $0.packet[24] } == [1, 2, 3])
        #expect(requests.map { $0.packet[20..<24].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } } == [2, 2, 2], "the FCI names the SSRC")
    }

    @Test func withoutAKindNothingIsAskedAndNoDeadlineIsSet() {
        var configuration = RTPReceiver.Configuration(localSSRC: 1)
        configuration.reportInterval = nil
        var receiver = RTPReceiver(configuration, now: 0)
        receiver.keyframeWanted(of: 2)
        #expect(receiver.poll(now: 5_000_000_000).isEmpty && receiver.nextDeadline == nil)
    }

    @Test func reportsComeOnTheirScheduleAndEchoTheSourcesSenderReport() throws {
        var configuration = RTPReceiver.Configuration(localSSRC: Self.localSSRC)
        configuration.reportInterval = 5_000_000_000
        var receiver = RTPReceiver(configuration, now: 0)
        #expect(receiver.poll(now: 2_000_000_000).isEmpty, "no report before the first packet")
        for sequence: UInt16 in [10, 11] { _ = receiver.receive(Self.packet(sequence), now: 2_000_000_000) }
        var news = RTPReceptionStatistics.SenderNews()
        news.senderReport = .init(ssrc: 0xDEAD_BEEF, ntpTimestamp: 0xAAAA_BBBB_CCCC_DDDD)
        receiver.receive(news, now: 2_100_000_000)  // another source's: not echoed
        news.senderReport = .init(ssrc: Self.video, ntpTimestamp: 0x1122_3344_5566_7788)
        receiver.receive(news, now: 2_500_000_000)
        let reports = receiver.poll(now: 3_000_000_000)
        try #require(reports.count == 1)
        guard case .receiverReport(let report) = reports[0] else { Issue.record("\(reports)"); return }
        #expect(report[1] == 201 && report[0] & 0x1F == 1 && Array(report[4..<8]) == [1, 2, 3, 4])
        #expect(report[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } == Self.video)
        #expect(report[24..<28].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } == 0x3344_5566, "LSR: the middle of its NTP time")
        #expect(receiver.nextDeadline == 8_000_000_000)
        #expect(receiver.poll(now: 7_999_999_999).isEmpty && receiver.poll(now: 8_000_000_000).count == 1)
    }

    @Test func anRTSPReceiverReportsBeforeMediaAndTakesAnyPayloadType() {
        var configuration = RTPReceiver.Configuration(localSSRC: Self.localSSRC)
        configuration.reportsBeforeMedia = true
        var receiver = RTPReceiver(configuration, now: 10)
        #expect(receiver.poll(now: 1_000_000_009).isEmpty)
        let empty = receiver.poll(now: 1_000_000_010)
        #expect(empty.count == 1 && empty.first?.packet[0] == 0x80, "an RR with no block")
        #expect(receiver.receive(Self.packet(1, payloadType: 33), now: 1_000_000_011) == .media)
        #expect(receiver.receive(Self.packet(2, payloadType: 97), now: 1_000_000_012) == .media, "no RTX here: just video")
    }

    // MARK: - Order

    /// rtp://: a source counts once two of its packets follow each other; a stranger's packet moves nothing; packets
    /// overtaken within the window are put back in order.
    @Test func packetsComeOutValidatedAndInOrder() {
        var receiver = Self.plain()
        var events: [RTPOrderedEvent] = []
        for packet in [Self.packet(1), Self.packet(2), Self.packet(4), Self.packet(9, ssrc: 0x0BAD_0BAD), Self.packet(3), Self.packet(5)] {
            #expect(receiver.receive(packet, now: 0) { events.append($0) } == .media)
        }
        #expect(Self.summary(events) == ["1", "2", "3", "4", "5"])
        #expect(receiver.ssrc == Self.video, "the stranger's SSRC was never followed")
    }

    /// The statistics count each packet at its arrival, a packet held in the window too (the jitter of the receiver
    /// reports, and the RTSP watch's sign of life, must not wait for the window); a stranger's never.
    @Test func theStatisticsCountPacketsAtTheirArrival() {
        var receiver = Self.plain()
        for (sequence, now) in [(UInt16(1), UInt64(10)), (2, 20), (4, 30)] { _ = receiver.receive(Self.packet(sequence), now: now) }
        #expect(receiver.statistics.lastArrival == 30, "4 is held, but it came")
        _ = receiver.receive(Self.packet(50, ssrc: 0x0BAD_0BAD), now: 40)
        #expect(receiver.statistics.lastArrival == 30 && receiver.ssrc == Self.video)
    }

    /// A missing packet is given up on once the window is full: the packets after it come out, the gap is the
    /// depacketizer's to see.
    @Test func aPacketMissingPastTheWindowIsLeftBehind() {
        var receiver = Self.plain(window: 3)
        var events: [RTPOrderedEvent] = []
        for sequence: UInt16 in [1, 2, 4, 5] { _ = receiver.receive(Self.packet(sequence), now: 0) { events.append($0) } }
        #expect(Self.summary(events) == ["1", "2"])
        _ = receiver.receive(Self.packet(6), now: 0) { events.append($0) }
        #expect(Self.summary(events) == ["1", "2", "4", "5", "6"])
    }

    /// A new source (the sender restarted) is a new stream: what the old one left comes out first, then the change,
    /// then the new source's packets from its first.
    @Test func aNewSourceComesAfterWhatTheOldOneLeft() {
        var receiver = Self.plain()
        var events: [RTPOrderedEvent] = []
        for packet in [Self.packet(1), Self.packet(2), Self.packet(4), Self.packet(900, ssrc: 0x2222_2222), Self.packet(901, ssrc: 0x2222_2222)] {
            _ = receiver.receive(packet, now: 0) { events.append($0) }
        }
        #expect(Self.summary(events) == ["1", "2", "4", "source 22222222", "900", "901"])
        #expect(receiver.ssrc == 0x2222_2222)
    }

    /// WHIP: a repair takes its place in the order; a sender gone leaves what was held handed on; another sender
    /// (rtp://: another address) starts afresh, with no source change to report.
    @Test func aRepairTakesItsPlaceAndTheEndHandsOnWhatIsHeld() {
        var receiver = Self.whip()
        var events: [RTPOrderedEvent] = []
        for sequence: UInt16 in [1, 2, 4, 6] { _ = receiver.receive(Self.packet(sequence), now: 0) { events.append($0) } }
        #expect(Self.summary(events) == ["1", "2"])
        let rtx = Self.packet(7, ssrc: 0x0BAD_F00D, payloadType: 97, payload: [0, 3, 0x41, 9])
        guard case .repaired(let original) = receiver.receive(rtx, now: 1, { events.append($0) }), original.sequenceNumber == 3 else {
            Issue.record("not repaired")
            return
        }
        #expect(Self.summary(events) == ["1", "2", "3", "4"])
        receiver.flush { events.append($0) }
        #expect(Self.summary(events) == ["1", "2", "3", "4", "6"])
        var plain = Self.plain()
        events = []
        for sequence: UInt16 in [1, 2] { _ = plain.receive(Self.packet(sequence), now: 0) { events.append($0) } }
        plain.senderChanged()
        #expect(plain.ssrc == nil)
        for sequence: UInt16 in [70, 71] { _ = plain.receive(Self.packet(sequence, ssrc: 0x4444_4444), now: 0) { events.append($0) } }
        #expect(Self.summary(events) == ["1", "2", "70", "71"])
    }
}

extension RTPReceiver {
    /// `receive`, what it puts in order left aside (the feedback tests look only at what goes back).
    mutating func receive(_ packet: RTPPacket, now: UInt64) -> Reception {
        receive(packet, now: now) { _ in }
    }
}
