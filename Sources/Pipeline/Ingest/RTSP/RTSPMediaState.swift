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
    /// The RTP's receiving end: source validation and order, statistics (for noticing a server gone quiet),
    /// receiver reports, keyframe requests.
    var receiver: RTPReceiver
    /// The server's RTCP said BYE for its source: the stream has ended.
    var goodbyeReceived = false
    /// The session ended (`RTSPSession.finish`): its last packets and `.disconnected` are queued, nothing more is.
    var ended = false
    /// Refused packets, logged at most once per 10 s per kind.
    var refusals: RateLimitedLogger

    /// - Parameter now: the session's start: the first receiver report is a second after it, then one every 5 s.
    init(refusals: RateLimitedLogger, rtp: RTPSettings = RTPSettings(), now: UInt64 = 0) {
        var configuration = RTPReceiver.Configuration(rtp)
        configuration.reportInterval = 5_000_000_000
        // An RTSP server may take our RTCP as a sign of life, before its first packet too.
        configuration.reportsBeforeMedia = true
        receiver = RTPReceiver(configuration, now: now)
        self.refusals = refusals
    }

    /// The SDP's clock rate, for the jitter in our reports (the receiver starts afresh: nothing has come yet).
    mutating func described(clockRate: UInt32, now: UInt64) {
        var configuration = receiver.configuration
        configuration.clockRate = clockRate
        receiver = RTPReceiver(configuration, now: now)
    }

    /// An RTP packet the gate let through: validated as the server's source, counted for the receiver reports, and
    /// put in order; what is in order now, for the decode thread.
    mutating func receive(_ packet: RTPPacket, arrival: UInt64) -> [RTPOrderedEvent] {
        receiver.receiveInOrder(packet, now: arrival).events
    }

    /// What the receiver still holds (the reorder window, probation), in order: the session ends.
    mutating func takeHeldPackets() -> [RTPOrderedEvent] {
        receiver.takeHeld()
    }

    /// What the server's RTCP says, taken only from its own source: a sender report goes to the statistics (for the
    /// receiver report's delay fields), a BYE ends the session. False for a BYE of another source (to be refused).
    mutating func note(_ news: RTPReceptionStatistics.SenderNews, arrival: UInt64) -> Bool {
        if let report = news.senderReport, gate?.owns(report.ssrc) == true { receiver.receive(news, now: arrival) }
        guard news.goodbye else { return true }
        guard let ssrc = gate?.ssrc, news.goodbyeSources.contains(ssrc) else { return false }
        goodbyeReceived = true
        return true
    }
}
