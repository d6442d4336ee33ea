import Bitstream
import Decoding
import NIOCore

/// What an RTSP session's media paths (the UDP sockets' handlers, or the interleaved connection) and its watch share,
/// behind one lock (`RTSPSession.media`): who may send, what came, and how refusals are logged.
struct RTSPMediaState: Sendable {
    /// The RTSP server's address: UDP media is taken only from it, and RTCP goes only to it (nil: interleaved).
    var server: SocketAddress?
    /// Which packets are the server's: nil until SETUP's answer (nothing is accepted before).
    var gate: RTSPMediaGate?
    /// For receiver reports, and for noticing a server gone quiet.
    var statistics: RTPReceptionStatistics
    /// The server's RTCP said BYE for its source: the stream has ended.
    var goodbyeReceived = false
    /// Refused packets, logged at most once per 10 s per kind.
    var refusals: RateLimitedLogger

    init(refusals: RateLimitedLogger) {
        statistics = RTPReceptionStatistics(clockRate: 90000)
        self.refusals = refusals
    }

    /// An RTP packet the gate let through, counted for the receiver reports.
    mutating func record(_ packet: UnsafeRawBufferPointer, arrival: UInt64) {
        guard packet.count >= 12 else { return }
        let sequence = UInt16(packet[2]) << 8 | UInt16(packet[3])
        let timestamp = packet[4..<8].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        let ssrc = packet[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        statistics.record(ssrc: ssrc, sequenceNumber: sequence, timestamp: timestamp, arrival: arrival)
    }

    /// What the server's RTCP says, taken only from its own source: a sender report goes to the statistics (for the
    /// receiver report's delay fields), a BYE ends the session. False for a BYE of another source (to be refused).
    mutating func note(_ news: RTPReceptionStatistics.SenderNews, arrival: UInt64) -> Bool {
        if let report = news.senderReport, gate?.owns(report.ssrc) == true {
            statistics.recordSenderReport(ntpTimestamp: report.ntpTimestamp, arrival: arrival)
        }
        guard news.goodbye else { return true }
        guard let ssrc = gate?.ssrc, news.goodbyeSources.contains(ssrc) else { return false }
        goodbyeReceived = true
        return true
    }
}
