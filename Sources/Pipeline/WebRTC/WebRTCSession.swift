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
    private(set) var loss = LossRecovery()
    private(set) var reception = RTPReceptionStatistics(clockRate: 90000)
    /// The receiver's SSRC in our RTCP.
    let localSSRC = UInt32.random(in: 1...UInt32.max)
    private let identity: DTLSIdentity
    /// A PLI went out for the current source's first packets.
    private var askedSourceKeyframe = false
    /// The SSRC the sender left at its last change: its late packets are dropped, not followed back to.
    private var previousSSRC: UInt32?
    private var lastSourceChange: UInt64?
    /// A change of SSRC the table has not yet counted and logged.
    private var sourceChange: (from: UInt32, to: UInt32)?
    /// After a change, other SSRCs are not followed for this long: a sender juggling SSRCs (each change restarts
    /// the decode side and asks for a keyframe) gets at most two a second.
    static let sourceChangeInterval: UInt64 = 500_000_000
    /// Bytes received since the last bandwidth estimate, for REMB.
    private(set) var bytesSinceEstimate = 0
    /// What REMB tells the sender, when REMB was negotiated.
    private var allowance: ReceiverBitrateAllowance
    /// Arrival times for transport-wide feedback, when transport-cc was negotiated.
    private var transportFeedback: TransportWideFeedbackRecorder?

    init(id: String, stream: String, connection: ConnectionID, local: (ufrag: String, password: String), offer: WebRTCOffer,
         media: WebRTCAnswer.NegotiatedVideo, identity: DTLSIdentity, maximumBitrate: UInt64?, now: UInt64,
         replyAddresses: Set<[UInt8]>? = nil) {
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
        if media.feedback.contains(.transportCC), media.transportWideCCID != nil {
            transportFeedback = TransportWideFeedbackRecorder(senderSSRC: localSSRC)
        }
    }

    /// The STUN USERNAME a client's checks carry (RFC 8445 §7.2.2: "our fragment:theirs").
    var expectedUsername: String { "\(localUsernameFragment):\(remoteUsernameFragment)" }

    var isConnected: Bool { if case .connected = state { true } else { false } }

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
        /// Video, in clear (an RTX retransmission already turned back into the packet it repeats).
        case video([UInt8])
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
            let ssrc = reception.ssrc ?? clear[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            transportFeedback?.record(sequenceNumber: sequence, mediaSSRC: ssrc, arrival: now)
        }
        guard var header = try? RTPPacket(parsing: clear[...]) else { return .nothing }
        // The audio answered beside the video: authenticated (the SRTP context must see its packets), then dropped.
        if header.payloadType == media.acceptedAudio?.payloadType { return .audio }
        var packet = clear
        if header.payloadType == media.retransmissionPayloadType {
            guard let original = repaired(header) else { return .nothing }
            header = original
            packet = Self.serialize(header)
        } else if header.payloadType == media.payloadType, header.ssrc != reception.ssrc {
            guard follow(header.ssrc, now: now) else { return .nothing }
        }
        guard header.payloadType == media.payloadType else { return .nothing }
        reception.record(ssrc: header.ssrc, sequenceNumber: header.sequenceNumber, timestamp: header.timestamp, arrival: now)
        loss.received(header.sequenceNumber, now: now)
        return .video(packet)
    }

    /// The packet an RTX packet repeats (RFC 4588 §4: the original sequence number, then the original payload),
    /// as the current media SSRC's whatever the repair SSRC (the offer's FID group may be absent, and a restarted
    /// sender picks a new one); nil unless it answers one of our requests (a padding probe, a late answer about
    /// the source before).
    private func repaired(_ rtx: RTPPacket) -> RTPPacket? {
        guard rtx.payload.count > 2, let ssrc = reception.ssrc else { return nil }
        let original = UInt16(rtx.payload[rtx.payload.startIndex]) << 8 | UInt16(rtx.payload[rtx.payload.startIndex + 1])
        guard loss.isMissing(original) else { return nil }
        return RTPPacket(marker: rtx.marker, payloadType: media.payloadType, sequenceNumber: original,
                         timestamp: rtx.timestamp, ssrc: ssrc, payload: rtx.payload.dropFirst(2))
    }

    /// Whether a media packet of another SSRC than the current one starts the sender's new source (an encoder
    /// restart). SRTP authenticated it, so it is the client's own: followed at once, with loss recovery, reports
    /// and RTX mapped to it (the statistics start afresh on their own) and a keyframe asked for, since its first
    /// picture may refer to what it never sent. Not followed: the SSRC just left (late packets), or any within
    /// `sourceChangeInterval` of the last change.
    private func follow(_ ssrc: UInt32, now: UInt64) -> Bool {
        guard let current = reception.ssrc else { return true }  // the first source
        if ssrc == previousSSRC { return false }
        if let last = lastSourceChange, now &- last < Self.sourceChangeInterval { return false }
        previousSSRC = current
        lastSourceChange = now
        sourceChange = (current, ssrc)
        loss.restart()
        askedSourceKeyframe = false
        return true
    }

    /// The SSRC change since the last call, if any: for the table's counter and log.
    func takeSourceChange() -> (from: UInt32, to: UInt32)? {
        defer { sourceChange = nil }
        return sourceChange
    }

    /// An RTP packet with a bare 12-byte header (no CSRCs, extension or padding).
    private static func serialize(_ packet: RTPPacket) -> [UInt8] {
        var bytes: [UInt8] = [0x80, (packet.marker ? 0x80 : 0) | packet.payloadType,
                              UInt8(packet.sequenceNumber >> 8), UInt8(packet.sequenceNumber & 0xff)]
        for value in [packet.timestamp, packet.ssrc] {
            bytes += [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
        }
        return bytes + packet.payload
    }

    /// An SRTCP packet from the client: its sender reports feed our receiver reports; a BYE is ignored (the
    /// session ends by DELETE or consent expiry).
    func receiveSRTCP(_ datagram: [UInt8], now: UInt64) -> Bool {
        guard case .connected(_, let receive, _) = state, case .success(let packet) = receive.unprotectRTCP(datagram) else { return false }
        let news = packet.withUnsafeBytes { RTPReceptionStatistics.news(in: $0) }
        // Only the current source's: the one left may still send its last reports.
        if let report = news.senderReport, report.ssrc == reception.ssrc {
            reception.recordSenderReport(ntpTimestamp: report.ntpTimestamp, arrival: now)
        }
        return true
    }

    /// Our RTCP, protected for the client; nil before SRTP is up.
    func protectRTCP(_ packet: [UInt8]) -> [UInt8]? {
        guard case .connected(_, _, let send) = state, case .success(let protected) = send.protectRTCP(packet) else { return nil }
        return protected
    }

    /// Packets to ask again for now (generic NACK, RFC 4585 §6.2.1), already protected, and how many were asked for.
    func retransmissionRequests(now: UInt64) -> (packets: [[UInt8]], count: Int) {
        guard media.feedback.contains(.nack), let ssrc = reception.ssrc else { return ([], 0) }
        let missing = loss.due(now: now)
        guard !missing.isEmpty else { return ([], 0) }
        let packets = RTCPTransportFeedback.genericNACK(senderSSRC: localSSRC, mediaSSRC: ssrc, lost: missing)
        return (packets.compactMap(protectRTCP), missing.count)
    }

    /// Transport-wide feedback due at `now` (transport-cc), each message protected in a compound packet of its own.
    func dueTransportFeedback(now: UInt64) -> [[UInt8]] {
        guard isConnected, let messages = transportFeedback?.feedback(now: now), !messages.isEmpty else { return [] }
        return messages.map(RTCPTransportFeedback.transportWide).compactMap(protectRTCP)
    }

    /// The periodic receiver report (RFC 3550 §6.4.2), and a REMB (the bandwidth the client may use) when
    /// negotiated; each protected, each a compound packet of its own.
    func periodicReports(now: UInt64, elapsedNanoseconds: UInt64) -> [[UInt8]] {
        guard isConnected, let ssrc = reception.ssrc else { return [] }
        var packets = [reception.report(senderSSRC: localSSRC, cname: "streamrecvd", now: now)]
        if media.feedback.contains(.remb) {
            packets.append(RTCPTransportFeedback.receiverEstimatedMaximumBitrate(
                senderSSRC: localSSRC, bitrate: estimateBitrate(elapsedNanoseconds: elapsedNanoseconds), mediaSSRCs: [ssrc]))
        }
        return packets.compactMap(protectRTCP)
    }

    /// What the client may send (`ReceiverBitrateAllowance`), from what arrived since the last estimate.
    private func estimateBitrate(elapsedNanoseconds: UInt64) -> UInt64 {
        defer { bytesSinceEstimate = 0 }
        let received = UInt64(bytesSinceEstimate) * 8 * 1_000_000_000 / max(elapsedNanoseconds, 1)
        return allowance.update(receivedBitrate: received, unrecoveredLosses: loss.takeUnrecoveredCount() > 0)
    }

    /// A PLI for a source's first packets: a session may start mid-GOP (a browser sends a keyframe first, an
    /// encoder that was running before the connection may not), and so may a new SSRC. Once per source.
    func initialKeyframeRequest() -> [UInt8]? {
        guard !askedSourceKeyframe, let ssrc = reception.ssrc else { return nil }
        askedSourceKeyframe = true
        return protectRTCP(RTCPFeedback.keyframeRequest(.pictureLossIndication, senderSSRC: localSSRC, mediaSSRC: ssrc))
    }

    /// Packets asked for that arrived since the last call.
    func recoveredSinceLastReport() -> Int { loss.takeRecoveredCount() }

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
