import Bitstream
import Decoding
import Logging
@testable import Pipeline
import Testing

/// The state an RTSP session's media handlers share: what its packets and the server's RTCP do to it.
@Suite struct RTSPMediaStateTests {
    static let serverSSRC: UInt32 = 0x1234_5678

    static func state() -> RTSPMediaState {
        var state = RTSPMediaState(refusals: RateLimitedLogger(logger: Logger(label: "test")))
        state.gate = RTSPMediaGate(serverPorts: nil, interleaved: true, ssrc: serverSSRC)
        return state
    }

    /// An RTP header: version 2, payload type 96, `sequence`, timestamp 9000, `ssrc`.
    static func packet(sequence: UInt16, ssrc: UInt32 = serverSSRC) -> [UInt8] {
        [0x80, 96, UInt8(sequence >> 8), UInt8(sequence & 0xFF), 0, 0, 0x23, 0x28]
            + (0..<4).map { UInt8(truncatingIfNeeded: ssrc >> (24 - 8 * $0)) }
    }

    /// The last-SR field (LSR, RFC 3550 §6.4.1) of the receiver report the state would send now.
    static func lastSenderReport(_ state: RTSPMediaState) -> UInt32? {
        var statistics = state.receiver.statistics
        let report = statistics.report(senderSSRC: 1, cname: "test", now: 2_000_000_000)
        guard report.count >= 32 else { return nil }
        return report[24..<28].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    @Test func packetsAreCountedAndAShortOneIsNot() {
        var state = Self.state()
        Self.packet(sequence: 7).withUnsafeBytes { state.record($0, arrival: 1_000_000_000) }
        #expect(state.receiver.statistics.ssrc == Self.serverSSRC && state.receiver.statistics.lastArrival == 1_000_000_000)
        Array(Self.packet(sequence: 8).prefix(11)).withUnsafeBytes { state.record($0, arrival: 1_500_000_000) }
        #expect(state.receiver.statistics.lastArrival == 1_000_000_000, "11 bytes are no RTP header")
    }

    @Test func onlyTheServersOwnSenderReportReachesTheReceiverReport() {
        var state = Self.state()
        Self.packet(sequence: 1).withUnsafeBytes { state.record($0, arrival: 1_000_000_000) }
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
