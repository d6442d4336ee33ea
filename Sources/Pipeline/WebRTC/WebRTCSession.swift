import Bitstream
import Glibc
import MediaSecurity
import NIOCore

/// One WHIP session, from its answer to its end: ICE-lite connectivity checks (RFC 8445 §2.5), then a DTLS
/// handshake as server (RFC 5763/5764), then SRTP. Confined to the WebRTC server's event loop (not Sendable).
final class WebRTCSession {
    enum State {
        /// The answer went out; the client has not yet nominated an address by a connectivity check.
        case awaitingConnectivity
        case handshaking(DTLSServerAssociation)
        case connected(DTLSServerAssociation, receive: SRTPReceiveContext, send: SRTPSendContext)
        case ended(WebRTCMetrics.SessionEnd)
    }

    /// What the media socket should do after a datagram of this session.
    enum Outcome {
        case none
        /// The DTLS handshake just completed: the stream's decode thread is told of the new sender.
        case connected
        case ended(WebRTCMetrics.SessionEnd, detail: String)
    }

    let id: String
    let stream: String
    let connection: ConnectionID
    let localUsernameFragment: String
    let localPassword: [UInt8]
    let remoteUsernameFragment: String
    let remoteFingerprint: [UInt8]
    let media: WebRTCAnswer.NegotiatedVideo
    let createdAt: UInt64
    /// Where the client's checks came from and its media goes; fixed by the first authenticated check.
    private(set) var remote: SocketAddress?
    /// Which of our addresses replies leave from, where the media socket has several (a wildcard).
    private var replyAddress: ReplyAddress
    /// The address replies leave from (the one the nominated pair's checks and the media come to); nil where the
    /// socket has one address.
    var local: SocketAddress? { replyAddress.current }
    private(set) var lastConsent: UInt64
    private(set) var state = State.awaitingConnectivity
    /// The video's RTP: sources, RTX, NACK, reports and keyframe requests (the RTCP it makes is protected here).
    private(set) var receiver: RTPReceiver
    /// A loss of this session's is the last item queued for the decode thread (the table queues one per run).
    var lossQueued = false
    /// The receiver's SSRC in our RTCP.
    var localSSRC: UInt32 { receiver.configuration.localSSRC }
    private let identity: DTLSIdentity
    /// Bytes received since the last bandwidth estimate, for REMB, and when that estimate was made.
    private(set) var bytesSinceEstimate = 0
    private var lastEstimate: UInt64?
    /// What REMB tells the sender, when REMB was negotiated.
    private var allowance: ReceiverBitrateAllowance
    /// Arrival times for transport-wide feedback, when transport-cc was negotiated.
    private var transportFeedback: TransportWideFeedbackRecorder?

    init(id: String, stream: String, connection: ConnectionID, local: (ufrag: String, password: String), offer: WebRTCOffer,
         media: WebRTCAnswer.NegotiatedVideo, identity: DTLSIdentity, maximumBitrate: UInt64?, now: UInt64,
         rtp: RTPSettings = RTPSettings(), replyAddresses: Set<[UInt8]>? = nil) {
        replyAddress = ReplyAddress(ownAddresses: replyAddresses)
        self.id = id
        self.stream = stream
        self.connection = connection
        localUsernameFragment = local.ufrag
        localPassword = Array(local.password.utf8)
        // Media-level ICE and DTLS attributes override the session's (RFC 8839 §5.4, RFC 8842 §5).
        // The BUNDLE's transport is its tagged section's (RFC 8843 §7.3.1): the audio's where the offer put it first.
        let section = offer.media.first { $0.mid == (media.transportMid ?? media.mid) }?.transport
        remoteUsernameFragment = section?.iceUsernameFragment ?? offer.session.iceUsernameFragment ?? ""
        remoteFingerprint = section?.sha256Fingerprint ?? offer.session.sha256Fingerprint ?? []
        self.media = media
        self.identity = identity
        createdAt = now
        lastConsent = now
        allowance = ReceiverBitrateAllowance(ceiling: maximumBitrate)
        var video = RTPReceiver.Configuration(rtp)
        // SRTP authenticates the one sender: its new SSRC is its new source at once.
        video.authenticatedSources = true
        video.clockRate = media.clockRate
        video.payloadType = media.payloadType
        video.retransmissionPayloadType = media.retransmissionPayloadType
        video.requestsRetransmissions = media.feedback.contains(.nack)
        // A new source is always asked for its keyframe (`keyframe_request = "none"` only stops the decoder's asking),
        // by FIR only where the client said it takes it.
        video.keyframeRequest = rtp.keyframeRequest == .fir && media.feedback.contains(.fir) ? .fullIntraRequest : .pictureLossIndication
        video.asksNewSourcesForKeyframes = true
        receiver = RTPReceiver(video, now: now)
        if media.feedback.contains(.transportCC), media.transportWideCCID != nil {
            transportFeedback = TransportWideFeedbackRecorder(senderSSRC: localSSRC)
        }
    }

    /// The STUN USERNAME a client's checks carry (RFC 8445 §7.2.2: "our fragment:theirs").
    var expectedUsername: String { "\(localUsernameFragment):\(remoteUsernameFragment)" }

    var isConnected: Bool { if case .connected = state { true } else { false } }
    /// The handshake completed once: the stream's decode thread was told of this sender, and must hear it leave
    /// however the session ends (the client's own close_notify ends it before the table does).
    private(set) var hasConnected = false

    // MARK: - ICE

    /// A datagram from the session's address came to `address` (nil: the socket has one); `check`: a STUN check's
    /// transaction ID. A nominating check moves replies there, another datagram only where none is known yet
    /// (`ReplyAddress`); true when they moved.
    func heard(at address: SocketAddress?, nominating: Bool, check: [UInt8]? = nil) -> Bool {
        replyAddress.heard(at: address, nominating: nominating, check: check)
    }

    /// A binding request already known to carry this session's username: the response to send, or nil (drop it)
    /// when it fails MESSAGE-INTEGRITY or FINGERPRINT or comes from another address than the first good check.
    func answerConnectivityCheck(_ message: STUNMessage, bytes: [UInt8], from source: SocketAddress, now: UInt64) -> [UInt8]? {
        // The address first: a second address's checks are dropped without the HMAC (a flood of them cost four times
        // a rejected datagram).
        if let remote, source != remote { return nil }
        guard STUNMessage.verifyMessageIntegrity(of: bytes, key: localPassword, hmacSHA1: HMACSHA1.authenticate(key:data:)),
              !message.hasFingerprint || STUNMessage.hasValidFingerprint(bytes) else { return nil }
        if remote == nil {
            // The first authenticated check fixes the 5-tuple: ICE-lite has one host candidate, so any pair the
            // client nominates ends here, and a later source is someone else (or a NAT rebinding, not followed).
            remote = source
        }
        guard source == remote, let mapped = STUNAddress(source) else { return nil }
        lastConsent = now
        if case .awaitingConnectivity = state, let association = try? DTLSServerAssociation(identity: identity, expectedPeerFingerprint: remoteFingerprint) {
            state = .handshaking(association)
        }
        return STUNMessage.bindingSuccessResponse(transactionID: message.transactionID, mappedAddress: mapped,
                                                   integrityKey: localPassword, hmacSHA1: HMACSHA1.authenticate(key:data:))
    }

    // MARK: - DTLS and SRTP

    /// A DTLS record from the session's address; `reply` takes what the association sends back.
    func receiveDTLS(_ datagram: [UInt8], reply: ([UInt8]) -> Void) -> Outcome {
        switch state {
        case .handshaking(let association):
            let event = association.receive(datagram)
            for datagram in association.takeOutgoingDatagrams() { reply(datagram) }
            return handshakeOutcome(event, association)
        case .connected(let association, _, _):
            // Once connected, only the client's authenticated close_notify ends the session. Anything else — a
            // forged record that OpenSSL takes as fatal (one too short to authenticate), an unauthenticated alert —
            // is dropped, and nothing is sent back: an alert of ours would end the client's side too.
            let event = association.receive(datagram)
            let outgoing = association.takeOutgoingDatagrams()
            if case .closed = event { return end(.closedByClient, "the client closed the DTLS association") }
            if case .established = event { outgoing.forEach(reply) }  // our Finished again, for a client that lost it
            return .none
        case .awaitingConnectivity, .ended:
            return .none
        }
    }

    private func handshakeOutcome(_ event: DTLSEvent, _ association: DTLSServerAssociation) -> Outcome {
        switch event {
        case .handshaking, .established:
            return .none
        case .connected(let keying):
            do {
                state = .connected(association, receive: try SRTPReceiveContext(keying: keying), send: try SRTPSendContext(keying: keying))
                hasConnected = true
                return .connected
            } catch {
                return end(.dtlsFailed, "SRTP keys unusable: \(error)")
            }
        case .failed(let failure):
            if case .fingerprintMismatch = failure { return end(.fingerprintMismatch, "the client's certificate does not match its offer's fingerprint") }
            return end(.dtlsFailed, "DTLS handshake failed: \(failure)")
        case .closed:
            return end(.closedByClient, "the client closed the DTLS association before the handshake ended")
        }
    }

    /// A close_notify for the client when the daemon ends the session (DELETE, takeover, stream stopped): it
    /// learns at once, instead of sending into the void until its own consent checks fail.
    func closeAssociation() -> [[UInt8]] {
        switch state {
        case .handshaking(let association), .connected(let association, _, _):
            association.close()
            return association.takeOutgoingDatagrams()
        case .awaitingConnectivity, .ended:
            return []
        }
    }

    /// What an SRTP packet held.
    enum Received {
        /// Video, in clear: what the receiver put in order (an RTX retransmission already turned back into the
        /// packet it repeats); maybe nothing yet, where the packet waits in the reorder window.
        case video([RTPOrderedEvent])
        /// Authenticated but nothing for the decoder (an RTX padding probe, another payload type's packet).
        case nothing
        /// A packet of the audio answered beside the video: dropped here.
        case audio
        /// Failed authentication, replayed, or no SRTP yet.
        case rejected
    }

    func receiveSRTP(_ datagram: [UInt8], now: UInt64) -> Received {
        guard case .connected(_, let receive, _) = state, case .success(let clear) = receive.unprotectRTP(datagram) else { return .rejected }
        bytesSinceEstimate += datagram.count
        // Every packet the sender numbered counts for its estimator, RTX and padding probes too, before anything
        // else is asked of it (a probe's payload may be padding only).
        if let id = media.transportWideCCID, transportFeedback != nil, clear.count >= 12,
           let sequence = RTPHeaderExtensions.transportSequenceNumber(id: id, in: clear[...]) {
            // The feedback names the video's SSRC (a probe's or a retransmission's is the repair SSRC).
            let ssrc = receiver.ssrc ?? clear[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            transportFeedback?.record(sequenceNumber: sequence, mediaSSRC: ssrc, arrival: now)
        }
        guard let header = try? RTPPacket(parsing: clear[...]) else { return .nothing }
        // The audio answered beside the video: authenticated (the SRTP context must see its packets), then dropped.
        if header.payloadType == media.acceptedAudio?.payloadType { return .audio }
        let (reception, events) = receiver.receiveInOrder(header, now: now)
        switch reception {
        case .media, .repaired: return .video(events)
        case .ignored: return .nothing
        }
    }

    /// What the receiver still holds (the reorder window, probation), in order: the session ends.
    func takeHeldPackets() -> [RTPOrderedEvent] {
        receiver.takeHeld()
    }

    /// The sender's SSRC change since the last call, if any: for the table's counter and log.
    func takeSourceChange() -> RTPReceiver.SourceChange? { receiver.takeSourceChange() }

    /// An SRTCP packet from the client: its sender reports feed our receiver reports; a BYE is ignored (the
    /// session ends by DELETE or consent expiry).
    func receiveSRTCP(_ datagram: [UInt8], now: UInt64) -> Bool {
        guard case .connected(_, let receive, _) = state, case .success(let packet) = receive.unprotectRTCP(datagram) else { return false }
        // Only the current source's report counts: the one left may still send its last reports.
        receiver.receive(packet.withUnsafeBytes { RTPReceptionStatistics.news(in: $0) }, now: now)
        return true
    }

    /// Our RTCP, protected for the client; nil before SRTP is up.
    func protectRTCP(_ packet: [UInt8]) -> [UInt8]? {
        guard case .connected(_, _, let send) = state, case .success(let protected) = send.protectRTCP(packet) else { return nil }
        return protected
    }

    /// What the session sends its client now, protected: NACKs, keyframe requests, the receiver report (with a
    /// REMB when negotiated), transport-wide feedback. Polled after each video packet and on the table's tick.
    struct Feedback {
        var datagrams: [[UInt8]] = []
        /// Sequence numbers the NACKs name, and keyframe requests among the datagrams.
        var retransmissionsRequested = 0
        var keyframeRequests = 0
        var transportFeedbackMessages = 0
    }

    func pollFeedback(now: UInt64) -> Feedback {
        var feedback = Feedback()
        guard isConnected else { return feedback }
        for item in receiver.poll(now: now) {
            switch item {
            case .retransmissionRequest(_, let count): feedback.retransmissionsRequested += count
            case .keyframeRequest: feedback.keyframeRequests += 1
            case .receiverReport: break
            }
            feedback.datagrams.append(item.packet)
            if case .receiverReport = item, media.feedback.contains(.remb), let ssrc = receiver.ssrc {
                feedback.datagrams.append(RTCPTransportFeedback.receiverEstimatedMaximumBitrate(
                    senderSSRC: localSSRC, bitrate: estimateBitrate(now: now), mediaSSRCs: [ssrc]))
            }
        }
        if let messages = transportFeedback?.feedback(now: now), !messages.isEmpty {
            feedback.transportFeedbackMessages = messages.count
            feedback.datagrams += messages.map(RTCPTransportFeedback.transportWide)
        }
        feedback.datagrams = feedback.datagrams.compactMap(protectRTCP)
        return feedback
    }

    /// What the client may send (`ReceiverBitrateAllowance`), from what arrived since the last estimate.
    private func estimateBitrate(now: UInt64) -> UInt64 {
        let elapsed = lastEstimate.map { now &- $0 } ?? 1_000_000_000
        defer {
            bytesSinceEstimate = 0
            lastEstimate = now
        }
        let received = UInt64(bytesSinceEstimate) * 8 * 1_000_000_000 / max(elapsed, 1)
        return allowance.update(receivedBitrate: received, unrecoveredLosses: receiver.takeUnrecoveredCount() > 0)
    }

    /// What the stream's decoder wants of keyframes; asked for (or no longer) at the next poll.
    func keyframe(_ signal: KeyframeWish.Signal) { receiver.apply(signal) }

    /// Packets asked for that arrived since the last call.
    func recoveredSinceLastReport() -> Int { receiver.takeRecoveredCount() }

    /// When `handleTimers` or `pollFeedback` next has something to do without a datagram: a DTLS retransmission
    /// (OpenSSL's timer, at least 10 ms ahead: it never asks to be woken in a loop), RTCP due.
    func nextTimerDeadline(now: UInt64) -> UInt64? {
        switch state {
        case .handshaking(let association):
            guard let delay = association.retransmissionDeadline else { return nil }
            let nanoseconds = UInt64(clamping: delay.components.seconds) &* 1_000_000_000 &+ UInt64(clamping: delay.components.attoseconds / 1_000_000_000)
            return now &+ max(nanoseconds, 10_000_000)
        case .connected:
            return earliest(receiver.nextDeadline, transportFeedback?.deadline)
        case .awaitingConnectivity, .ended:
            return nil
        }
    }

    // MARK: - Lifecycle

    /// DTLS retransmissions of our flight when its timer ran out.
    func handleTimers(reply: ([UInt8]) -> Void) {
        guard case .handshaking(let association) = state else { return }
        _ = association.handleRetransmissionTimer()  // a handshake that gives up ends by the table's deadline
        for datagram in association.takeOutgoingDatagrams() { reply(datagram) }
    }

    func end(_ reason: WebRTCMetrics.SessionEnd, _ detail: String) -> Outcome {
        state = .ended(reason)
        return .ended(reason, detail: detail)
    }
}

extension STUNAddress {
    /// Where a datagram came from, as XOR-MAPPED-ADDRESS tells it back; nil for a Unix socket address.
    init?(_ address: SocketAddress) {
        guard let port = address.port, let bytes = address.ipAddressBytes else { return nil }
        self.init(bytes.count == 4 ? .ipv4(bytes) : .ipv6(bytes), port: UInt16(port))
    }
}
