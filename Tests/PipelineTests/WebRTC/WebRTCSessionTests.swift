import Bitstream
@testable import MediaSecurity
import NIOCore
@testable import Pipeline
import Testing

/// One WebRTC session driven by hand: a connectivity check, a DTLS handshake with a browser-like client in memory,
/// SRTP both ways; then what an outsider at the client's address can and cannot do to it.
@Suite struct WebRTCSessionTests {
    static let localPassword = "localpasswordof24chars00"

    struct Connected {
        let session: WebRTCSession
        let client: DTLSClientAssociation
        let source: SocketAddress
        let keys: DTLSKeyingMaterial
    }

    static func offer(fingerprint: String, transportCC: Bool = false) -> String {
        """
        v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE video0\r\n\
        m=video 9 UDP/TLS/RTP/SAVPF 96 97\r\nc=IN IP4 0.0.0.0\r\na=setup:actpass\r\na=ice-ufrag:client1\r\n\
        a=ice-pwd:clientpassword0123456789xyz\r\na=rtcp-mux\r\na=sendonly\r\na=mid:video0\r\n\
        a=rtpmap:96 H264/90000\r\na=rtcp-fb:96 nack\r\na=rtcp-fb:96 nack pli\r\n\
        \(transportCC ? "a=rtcp-fb:96 transport-cc\r\na=extmap:3 \(WebRTCAnswer.transportWideCCURI)\r\n" : "")\
        a=fmtp:96 packetization-mode=1;profile-level-id=42e01f\r\na=rtpmap:97 rtx/90000\r\na=fmtp:97 apt=96\r\n\
        a=fingerprint:sha-256 \(fingerprint)\r\n
        """
    }

    /// A session past ICE and DTLS.
    static func connected(transportCC: Bool = false) throws -> Connected {
        let server = try DTLSIdentity.generate()
        let clientIdentity = try DTLSIdentity.generate()
        let offer = try WebRTCOffer.parse(Self.offer(fingerprint: clientIdentity.fingerprintText, transportCC: transportCC))
        let local = WebRTCAnswer.LocalParameters(iceUsernameFragment: "server1", icePassword: localPassword,
                                                 fingerprintSHA256: server.fingerprintSHA256, candidates: [("127.0.0.1", 9)], sessionID: 1)
        let answer = try WebRTCAnswer.make(for: offer, local: local, codecs: [.h264])
        #expect(answer.media.retransmissionPayloadType == 97)
        let session = WebRTCSession(id: "s1", stream: "screen", connection: 1, local: ("server1", localPassword), offer: offer,
                                    media: answer.media, identity: server, maximumBitrate: nil, now: 0)
        let source = try SocketAddress(ipAddress: "127.0.0.1", port: 40000)
        let request = STUNMessage.bindingRequest(
            transactionID: Array(repeating: 7, count: 12), username: session.expectedUsername, priority: 1,
            role: .controlling(tiebreaker: 1), useCandidate: true, integrityKey: Array(localPassword.utf8),
            hmacSHA1: HMACSHA1.authenticate(key:data:))
        #expect(session.answerConnectivityCheck(try STUNMessage.parse(request), bytes: request, from: source, now: 1) != nil)
        let client = try DTLSClientAssociation(identity: clientIdentity, expectedPeerFingerprint: server.fingerprintSHA256)
        var keys: DTLSKeyingMaterial?
        var connected = false
        for _ in 0..<16 where !connected || keys == nil {
            var toClient: [[UInt8]] = []
            for datagram in client.core.takeOutgoingDatagrams() {
                if case .connected = session.receiveDTLS(datagram, reply: { toClient.append($0) }) { connected = true }
            }
            for datagram in toClient {
                if case .connected(let material) = client.core.receive(datagram) { keys = material }
            }
        }
        #expect(connected && session.isConnected)
        return Connected(session: session, client: client, source: source, keys: try #require(keys))
    }

    /// An RTP packet of payload type `payloadType`, protected as the browser would.
    static func protected(_ sequence: UInt16, payloadType: UInt8 = 96, ssrc: UInt32 = 0x1234_5678, payload: [UInt8], keys: DTLSKeyingMaterial) throws -> [UInt8] {
        let header: [UInt8] = [0x80, payloadType, UInt8(sequence >> 8), UInt8(sequence & 0xff), 0, 0, 0x0b, 0xb8,
                               UInt8(ssrc >> 24), UInt8(ssrc >> 16 & 0xff), UInt8(ssrc >> 8 & 0xff), UInt8(ssrc & 0xff)]
        let sender = try SRTPSendContext(keying: keys, localIsDTLSClient: true)
        return try sender.protectRTP(header + payload).get()
    }

    @Test func aForgedShortRecordDoesNotEndAConnectedSession() throws {
        let connected = try Self.connected()
        // Epoch 1, length 2: too short to be authenticated. OpenSSL takes it as fatal; the session must not.
        var replies = 0
        let outcome = connected.session.receiveDTLS([0x15, 0xfe, 0xfd, 0x00, 0x01, 0, 0, 0, 0, 0, 5, 0x00, 0x02, 0x02, 0x28]) { _ in replies += 1 }
        if case .ended = outcome { Issue.record("a forged record ended the session") }
        #expect(replies == 0, "nothing may go back: an alert would end the client's side")
        #expect(connected.session.isConnected)
        // Video still flows.
        let packet = try Self.protected(1, payload: [0x65, 1, 2, 3], keys: connected.keys)
        guard case .video(let events) = connected.session.receiveSRTP(packet, now: 2), case .packet(let clear)? = events.first else {
            Issue.record("video after the forged record was refused")
            return
        }
        #expect(Array(clear.payload) == [0x65, 1, 2, 3])
    }

    @Test func anRTXRetransmissionBecomesThePacketItRepeats() throws {
        let connected = try Self.connected()
        for sequence: UInt16 in [100, 103] {
            let original = try Self.protected(sequence, payload: [0x65, 9, 9], keys: connected.keys)
            guard case .video = connected.session.receiveSRTP(original, now: 1) else { Issue.record("packet \(sequence) refused"); return }
        }
        // RTX: its own SSRC and sequence, the original sequence number (102, missing) in its first two bytes.
        let retransmission = try Self.protected(7, payloadType: 97, ssrc: 0x0bad_cafe, payload: [0, 102, 0x41, 5, 6], keys: connected.keys)
        guard case .video(let events) = connected.session.receiveSRTP(retransmission, now: 2) else {
            Issue.record("the retransmission was not turned into video")
            return
        }
        #expect(events.isEmpty, "102 waits in the reorder window for 101, as 103 does")
        let held = connected.session.takeHeldPackets()
        #expect(held.count == 2)
        guard case .packet(let packet)? = held.first else { Issue.record("\(held)"); return }
        #expect(packet.payloadType == 96 && packet.sequenceNumber == 102 && packet.ssrc == 0x1234_5678)
        #expect(Array(packet.payload) == [0x41, 5, 6])
        // A padding probe (no original sequence number) is nothing; so is a repeat of a packet that was not asked
        // for (100 arrived) or was already repaired (102).
        let probe = try Self.protected(8, payloadType: 97, ssrc: 0x0bad_cafe, payload: [0], keys: connected.keys)
        guard case .nothing = connected.session.receiveSRTP(probe, now: 3) else { Issue.record("a probe became something"); return }
        for (sequence, original) in [(UInt16(9), UInt8(100)), (10, 102)] {
            let repeated = try Self.protected(sequence, payloadType: 97, ssrc: 0x0bad_cafe, payload: [0, original, 0x41], keys: connected.keys)
            guard case .nothing = connected.session.receiveSRTP(repeated, now: 4) else { Issue.record("\(original) taken again"); return }
        }
    }

    @Test func aCheckFromAnotherAddressDoesNotMoveTheSession() throws {
        let connected = try Self.connected()
        let request = STUNMessage.bindingRequest(
            transactionID: Array(repeating: 9, count: 12), username: connected.session.expectedUsername, priority: 1,
            role: .controlling(tiebreaker: 1), useCandidate: true, integrityKey: Array(Self.localPassword.utf8),
            hmacSHA1: HMACSHA1.authenticate(key:data:))
        let stranger = try SocketAddress(ipAddress: "127.0.0.2", port: 40000)
        #expect(connected.session.answerConnectivityCheck(try STUNMessage.parse(request), bytes: request, from: stranger, now: 5) == nil)
        #expect(connected.session.remote == connected.source)
    }

    @Test func theDaemonEndingASessionTellsTheClient() throws {
        let connected = try Self.connected()
        let datagrams = connected.session.closeAssociation()
        #expect(!datagrams.isEmpty)
        var closed = false
        for datagram in datagrams { if case .closed = connected.client.core.receive(datagram) { closed = true } }
        #expect(closed, "the client did not read a close_notify")
    }
}

/// A sender that changes its SSRC mid-session (an encoder restart): SRTP authenticated it, so the session follows
/// the new SSRC at its first packet, with its own loss recovery, reports and RTX mapping, and asks it for a keyframe.
extension WebRTCSessionTests {
    static let first: UInt32 = 0x1111_1111
    static let second: UInt32 = 0x2222_2222
    static let third: UInt32 = 0x3333_3333

    /// The media SSRC an RTCP feedback datagram (empty RR, then a PLI or NACK) of the session names, as the client reads it.
    static func feedbackMediaSSRC(_ datagram: [UInt8], keys: DTLSKeyingMaterial) throws -> UInt32 {
        let clear = try SRTPReceiveContext(keying: keys, remoteIsDTLSClient: false).unprotectRTCP(datagram).get()
        try #require(clear.count >= 20 && [205, 206].contains(clear[9]))
        return clear[16..<20].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    @discardableResult
    static func send(_ connected: Connected, _ sequence: UInt16, ssrc: UInt32, payloadType: UInt8 = 96, payload: [UInt8] = [0x41, 1],
                     now: UInt64) throws -> WebRTCSession.Received {
        connected.session.receiveSRTP(try protected(sequence, payloadType: payloadType, ssrc: ssrc, payload: payload, keys: connected.keys), now: now)
    }

    @Test func aNewSSRCIsFollowedAtOnceWithItsOwnNACKRTXAndKeyframe() throws {
        let connected = try Self.connected()
        let session = connected.session
        for sequence: UInt16 in [100, 101] { try Self.send(connected, sequence, ssrc: Self.first, now: 10) }
        let firstPLI = session.pollFeedback(now: 10)
        #expect(firstPLI.keyframeRequests == 1 && firstPLI.datagrams.count == 1)
        #expect(try Self.feedbackMediaSSRC(try #require(firstPLI.datagrams.first), keys: connected.keys) == Self.first)
        #expect(session.pollFeedback(now: 11).datagrams.isEmpty, "one PLI per source")
        #expect(session.takeSourceChange() == nil)
        // The restarted encoder: another SSRC, another numbering. Its first packet is video, the session's now.
        guard case .video = try Self.send(connected, 5000, ssrc: Self.second, now: 20) else { Issue.record("the new source's first packet dropped"); return }
        let change = try #require(session.takeSourceChange())
        #expect(change.from == Self.first && change.to == Self.second)
        #expect(session.receiver.ssrc == Self.second)
        let secondPLI = session.pollFeedback(now: 20)
        #expect(secondPLI.keyframeRequests == 1, "asked at once, not paced by the first source's request")
        #expect(try Self.feedbackMediaSSRC(try #require(secondPLI.datagrams.first), keys: connected.keys) == Self.second)
        // A late packet of the source left is dropped, not followed back to.
        guard case .nothing = try Self.send(connected, 102, ssrc: Self.first, now: 21) else { Issue.record("a late packet of the old SSRC taken"); return }
        #expect(session.receiver.ssrc == Self.second)
        // A gap in the new numbering is asked of the new SSRC, and nothing of the old one's.
        try Self.send(connected, 5002, ssrc: Self.second, now: 22)
        let requests = session.pollFeedback(now: 23)
        #expect(requests.retransmissionsRequested == 1 && requests.keyframeRequests == 0 && requests.datagrams.count == 1)
        #expect(try Self.feedbackMediaSSRC(try #require(requests.datagrams.first), keys: connected.keys) == Self.second)
        // Its answer, on a repair SSRC never seen before, is the new source's packet 5001.
        guard case .video(let events) = try Self.send(connected, 1, ssrc: 0x0bad_f00d, payloadType: 97, payload: [0x13, 0x89, 0x41, 7], now: 24),
              case .packet(let repaired)? = events.first
        else { Issue.record("the retransmission on a new repair SSRC dropped"); return }
        #expect(repaired.ssrc == Self.second && repaired.sequenceNumber == 5001 && Array(repaired.payload) == [0x41, 7])
    }

    /// Each change restarts the decode side and asks for a keyframe: a sender juggling SSRCs gets two a second.
    @Test func anotherSSRCSoonAfterAChangeWaits() throws {
        let connected = try Self.connected()
        try Self.send(connected, 1, ssrc: Self.first, now: 10)
        try Self.send(connected, 1, ssrc: Self.second, now: 20)
        _ = connected.session.takeSourceChange()
        let soon = 20 + RTPReceiver.sourceChangeInterval - 1
        guard case .nothing = try Self.send(connected, 1, ssrc: Self.third, now: soon) else { Issue.record("followed too soon"); return }
        #expect(connected.session.takeSourceChange() == nil && connected.session.receiver.ssrc == Self.second)
        guard case .video = try Self.send(connected, 2, ssrc: Self.third, now: soon + 1) else { Issue.record("not followed after the interval"); return }
        #expect(connected.session.takeSourceChange()?.to == Self.third)
    }
}

/// Transport-wide feedback from a connected session, as the browser reads it: every packet the sender numbered,
/// an RTX retransmission and a padding-only probe too, at the time it arrived.
extension WebRTCSessionTests {
    /// An RTP packet carrying transport-wide sequence number `transport` in a one-byte extension element (id 3),
    /// with `padding` bytes of padding and nothing else when `payload` is empty; protected as the browser would.
    static func numbered(_ sequence: UInt16, transport: UInt16, payloadType: UInt8 = 96, ssrc: UInt32 = 0x1234_5678, payload: [UInt8],
                         padding: UInt8 = 0, keys: DTLSKeyingMaterial) throws -> [UInt8] {
        var packet: [UInt8] = [0x90 | (padding > 0 ? 0x20 : 0), payloadType, UInt8(sequence >> 8), UInt8(sequence & 0xff), 0, 0, 0x0b, 0xb8,
                               UInt8(ssrc >> 24), UInt8(ssrc >> 16 & 0xff), UInt8(ssrc >> 8 & 0xff), UInt8(ssrc & 0xff),
                               0xBE, 0xDE, 0, 1, 0x31, UInt8(transport >> 8), UInt8(transport & 0xff), 0]
        packet += payload
        if padding > 0 { packet += [UInt8](repeating: 0, count: Int(padding) - 1) + [padding] }
        return try SRTPSendContext(keying: keys, localIsDTLSClient: true).protectRTP(packet).get()
    }

    @Test func everyNumberedPacketIsReportedRetransmissionsAndProbesToo() throws {
        let connected = try Self.connected(transportCC: true)
        let session = connected.session
        #expect(session.media.feedback.contains(.transportCC) && session.media.transportWideCCID == 3 && !session.media.feedback.contains(.remb))
        let millisecond: UInt64 = 1_000_000
        let start: UInt64 = 7_000 * millisecond
        // Media 1000, 1001, (1002 lost), 1003; then 1002 comes back as RTX (payload type 97, its own SSRC), and a
        // padding probe on that SSRC.
        for (sequence, transport, at) in [(UInt16(1000), UInt16(500), UInt64(0)), (1001, 501, 2), (1003, 503, 5)] {
            _ = session.receiveSRTP(try Self.numbered(sequence, transport: transport, payload: [0x41, 1], keys: connected.keys), now: start + at * millisecond)
        }
        guard case .video = session.receiveSRTP(try Self.numbered(1, transport: 504, payloadType: 97, ssrc: 0x0BAD_F00D, payload: [0x03, 0xEA, 0x41, 2], keys: connected.keys),
                                                now: start + 9 * millisecond) else { Issue.record("the retransmission was not taken"); return }
        guard case .nothing = session.receiveSRTP(try Self.numbered(2, transport: 505, payloadType: 97, ssrc: 0x0BAD_F00D, payload: [], padding: 200, keys: connected.keys),
                                                  now: start + 10 * millisecond) else { Issue.record("a probe is not video"); return }
        #expect(session.pollFeedback(now: start + 20 * millisecond).transportFeedbackMessages == 0, "before the interval")
        let due = session.pollFeedback(now: start + TransportWideFeedbackRecorder.interval)
        // After the receiver's own RTCP (a receiver report is due by now), last.
        try #require(due.transportFeedbackMessages == 1)
        let clear = try SRTPReceiveContext(keying: connected.keys, remoteIsDTLSClient: false).unprotectRTCP(try #require(due.datagrams.last)).get()
        let packets = try RTCPPacketSummary.parseCompound(clear)
        guard case .transportWideFeedback(let feedback)? = packets.last else { Issue.record("\(packets)"); return }
        #expect(feedback.senderSSRC == session.localSSRC && feedback.mediaSSRC == 0x1234_5678)
        #expect(feedback.baseSequenceNumber == 500 && feedback.statusCount == 6)
        #expect(feedback.received.map(\.sequenceNumber) == [500, 501, 503, 504, 505])
        // 0, 2, 5, 9 and 10 ms after the first: 0, 8, 12, 16 and 4 ticks of 250 us between them.
        #expect(feedback.received.dropFirst().map(\.delta) == [8, 12, 16, 4])
        // Nothing again until something new arrives.
        #expect(session.pollFeedback(now: start + 500 * millisecond).transportFeedbackMessages == 0)
    }

    /// Without transport-cc in the offer, no transport-wide feedback and REMB instead.
    @Test func anOfferWithoutTransportCCGetsNone() throws {
        let connected = try Self.connected()
        #expect(!connected.session.media.feedback.contains(.transportCC))
        _ = connected.session.receiveSRTP(try Self.numbered(1, transport: 1, payload: [0x41, 1], keys: connected.keys), now: 1)
        #expect(connected.session.pollFeedback(now: 1_000_000_000).transportFeedbackMessages == 0)
    }
}
