import CoreMetrics

/// The WebRTC server's metrics (all streams together; per-stream video figures stay in `StreamMetrics`).
final class WebRTCMetrics: Sendable {
    /// Why a session ended or never started.
    enum SessionEnd: String, CaseIterable, Sendable {
        /// The client sent DELETE.
        case deleted
        /// No ICE connectivity check arrived in time after the answer.
        case iceTimeout = "ice_timeout"
        /// The DTLS handshake failed (reason logged) or did not finish in time.
        case dtlsFailed = "dtls_failed"
        /// The client's certificate does not match the fingerprint of its offer.
        case fingerprintMismatch = "fingerprint_mismatch"
        /// No consent refresh (STUN) for 30 s: the client vanished (RFC 7675).
        case consentExpired = "consent_expired"
        /// The client sent a DTLS close_notify.
        case closedByClient = "closed_by_client"
        /// A later session took the stream over (second_sender = takeover, or this one delivered no video).
        case takenOver = "taken_over"
        /// The stream was removed or the daemon stops.
        case streamStopped = "stream_stopped"
    }

    /// Why a WHIP request was refused.
    enum Refusal: String, CaseIterable, Sendable {
        case token, badOffer = "bad_offer", noCodec = "no_codec", secondSender = "second_sender", full, notAllowed = "not_allowed"
        case unknownStream = "unknown_stream"
        /// More HTTP connections than the endpoint keeps open at once.
        case connections
        /// An HTTPS connection whose TLS handshake failed (plain HTTP to the HTTPS port, no common cipher, …).
        case tls = "tls_handshake"
        /// A `Host:` the endpoint does not serve (DNS rebinding), or none.
        case host = "unknown_host"
        /// A party waiting after too many wrong tokens (429).
        case throttled = "too_many_failures"
    }

    let sessionsOpen: Gauge
    let sessionsStarted: Counter
    private let ended: [SessionEnd: Counter]
    private let refused: [Refusal: Counter]
    /// STUN from addresses or usernames no session knows, or failing MESSAGE-INTEGRITY: dropped.
    let stunRejected: Counter
    /// SRTP/SRTCP packets that failed authentication or were replayed: dropped.
    let srtpRejected: Counter
    let nacksSent: Counter
    /// Transport-wide congestion control feedback messages sent (transport-cc).
    let transportFeedbackSent: Counter
    /// Packets asked for by NACK that then arrived.
    let retransmissionsRecovered: Counter
    /// A sender that took a new SSRC mid-session (a restarted encoder), followed at once.
    let ssrcChanges: Counter
    let bytesReceived: Counter
    /// Replies a wildcard media socket could not send from the address their peer used (a full send buffer, or
    /// the address left the machine): lost, as UDP may lose them.
    let datagramsNotSent: Counter
    /// Packets of the audio answered beside the video, authenticated and dropped.
    let audioPacketsDropped: Counter
    /// HTTP connections without a whole request closed to make room for another party's (ConnectionPlaces).
    let connectionsGivenUp: Counter

    init(factory: any MetricsFactory) {
        func counter(_ name: String, _ dimensions: [(String, String)] = []) -> Counter {
            Counter(label: "streamrecvd_webrtc_\(name)", dimensions: dimensions, factory: factory)
        }
        sessionsOpen = Gauge(label: "streamrecvd_webrtc_sessions", factory: factory)
        sessionsStarted = counter("sessions_started_total")
        ended = Dictionary(uniqueKeysWithValues: SessionEnd.allCases.map { ($0, counter("sessions_ended_total", [("reason", $0.rawValue)])) })
        refused = Dictionary(uniqueKeysWithValues: Refusal.allCases.map { ($0, counter("requests_refused_total", [("reason", $0.rawValue)])) })
        stunRejected = counter("stun_rejected_total")
        srtpRejected = counter("srtp_rejected_total")
        nacksSent = counter("nacks_sent_total")
        transportFeedbackSent = counter("transport_feedback_sent_total")
        retransmissionsRecovered = counter("retransmissions_recovered_total")
        ssrcChanges = counter("ssrc_changes_total")
        bytesReceived = counter("received_bytes_total")
        connectionsGivenUp = counter("connections_given_up_total")
        datagramsNotSent = counter("datagrams_not_sent_total")
        audioPacketsDropped = counter("audio_packets_dropped_total")
    }

    func ended(_ reason: SessionEnd) { ended[reason]?.increment() }
    func refused(_ reason: Refusal) { refused[reason]?.increment() }

    /// The counter of one refusal reason (every reason has one).
    func refusedCounter(_ reason: Refusal) -> Counter { refused[reason]! }
}
