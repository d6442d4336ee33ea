import Bitstream
import Testing

@Suite struct RTPReceptionStatisticsTests {
    /// RFC 3550 §6.4.2's layout: RR with one report block, then SDES CNAME; loss and highest sequence counted
    /// across a sequence number wrap.
    @Test func receiverReportsCountLossAcrossTheWrap() {
        var statistics = RTPReceptionStatistics(clockRate: 90000)
        var arrival: UInt64 = 1_000_000_000
        for sequence in [65530, 65531, 65533, 65534, 0, 1, 3] as [UInt16] {
            statistics.record(ssrc: 0x1234_5678, sequenceNumber: sequence, timestamp: 3600 * UInt32(sequence &- 65530), arrival: arrival)
            arrival += 40_000_000
        }
        #expect(statistics.cumulativeLost == 3 && statistics.extendedHighestSequence == 65536 + 3)
        let report = statistics.report(senderSSRC: 0xdead_beef, cname: "streamrecvd", now: arrival)
        #expect(report[0] == 0x81 && report[1] == 201 && report[3] == 7)
        #expect(Array(report[8..<12]) == [0x12, 0x34, 0x56, 0x78])
        #expect(Int(report[12]) == 3 * 256 / 10 && Array(report[13..<16]) == [0, 0, 3])  // fraction lost 3/10, cumulative 3
        #expect(Array(report[16..<20]) == [0, 1, 0, 3])
        #expect(report[32] == 0x81 && report[33] == 202 && report.count % 4 == 0)
        #expect(String(decoding: report[42..<53], as: UTF8.self) == "streamrecvd")
        // Nothing new lost since: the next fraction is zero.
        let next = statistics.report(senderSSRC: 0xdead_beef, cname: "streamrecvd", now: arrival)
        #expect(next[12] == 0)
        let goodbye: [UInt8] = [0x81, 203, 0, 1, 0x12, 0x34, 0x56, 0x78]
        #expect(goodbye.withUnsafeBytes { RTPReceptionStatistics.news(in: $0) }.goodbye)
    }

    @Test func rtcpNewsNameTheirSources() {
        let goodbye: [UInt8] = [0x82, 203, 0, 2, 0x12, 0x34, 0x56, 0x78, 0, 0, 0, 9]
        #expect(goodbye.withUnsafeBytes { RTPReceptionStatistics.news(in: $0) }.goodbyeSources == [0x1234_5678, 9])
        // A count larger than the packet holds: only what it holds.
        let short: [UInt8] = [0x9f, 203, 0, 1, 0, 0, 0, 7]
        #expect(short.withUnsafeBytes { RTPReceptionStatistics.news(in: $0) }.goodbyeSources == [7])
        var report: [UInt8] = [0x80, 200, 0, 6, 0xaa, 0xbb, 0xcc, 0xdd] + [1, 2, 3, 4, 5, 6, 7, 8] + [UInt8](repeating: 0, count: 12)
        report += goodbye
        let news = report.withUnsafeBytes { RTPReceptionStatistics.news(in: $0) }
        #expect(news.senderReport == .init(ssrc: 0xaabb_ccdd, ntpTimestamp: 0x0102_0304_0506_0708) && news.goodbye)
    }
}
