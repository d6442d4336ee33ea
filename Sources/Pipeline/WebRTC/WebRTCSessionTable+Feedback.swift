import Bitstream
import CoreMetrics
import NIOCore

/// The sessions' RTCP to their clients and their deadlines: keyframe wishes of the decode thread, the feedback due,
/// and when a session has outlived its checks, handshake or consent.
extension WebRTCSessionTable {
    /// What the decode thread wants of keyframes: the stream's session asks its client, or stops asking.
    func keyframe(_ signal: KeyframeWish.Signal, stream: String, now: UInt64) {
        guard let id = current(of: stream), let session = sessions[id] else { return }
        touch(id)
        session.keyframe(signal)
        if let remote = session.remote { sendFeedback(of: session, to: remote, now: now) }
    }

    /// The session's RTCP due now, sent and counted.
    func sendFeedback(of session: WebRTCSession, to remote: SocketAddress, now: UInt64) {
        let feedback = session.pollFeedback(now: now)
        for datagram in feedback.datagrams { transmit(datagram, to: remote, from: session.local) }
        if feedback.retransmissionsRequested > 0 { metrics.nacksSent.increment(by: Int64(feedback.retransmissionsRequested)) }
        if feedback.transportFeedbackMessages > 0 { metrics.transportFeedbackSent.increment(by: Int64(feedback.transportFeedbackMessages)) }
        if feedback.keyframeRequests > 0, let route = routes[session.stream] {
            route.metrics.keyframeRequests.increment(by: Int64(feedback.keyframeRequests))
        }
    }

    /// Why the session ends now, if it does: no check in time, no handshake, consent gone.
    func expiry(of session: WebRTCSession, now: UInt64) -> (WebRTCMetrics.SessionEnd, String)? {
        switch session.state {
        case .awaitingConnectivity where now &- session.createdAt > Self.connectivityTimeout:
            return (.iceTimeout, "no ICE connectivity check within \(Self.connectivityTimeout / 1_000_000_000) s of the answer")
        case .handshaking where now &- session.createdAt > Self.connectivityTimeout + Self.handshakeTimeout:
            return (.dtlsFailed, "the DTLS handshake did not finish in time")
        case .handshaking, .connected:
            guard now &- session.lastConsent > Self.consentLifetime else { return nil }
            return (.consentExpired, "no consent refresh for \(Self.consentLifetime / 1_000_000_000) s: the client is gone")
        default:
            return nil
        }
    }
}
