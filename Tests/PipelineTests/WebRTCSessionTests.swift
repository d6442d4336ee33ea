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

    static func offer(fingerprint: String) -> String {
        """
        v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE video0\r\n\
        m=video 9 UDP/TLS/RTP/SAVPF 96 97\r\nc=IN IP4 0.0.0.0\r\na=setup:actpass\r\na=ice-ufrag:client1\r\n\
        a=ice-pwd:clientpassword0123456789xyz\r\na=rtcp-mux\r\na=sendonly\r\na=mid:video0\r\n\
        a=rtpmap:96 H264/90000\r\na=rtcp-fb:96 nack\r\na=rtcp-fb:96 nack pli\r\n\
        a=fmtp:96 packetization-mode=1;profile-level-id=42e01f\r\na=rtpmap:97 rtx/90000\r\na=fmtp:97 apt=96\r\n\
        a=fingerprint:sha-256 \(fingerprint)\r\n
        """
    }

    /// A session past ICE and DTLS.
    static func connected() throws -> Connected {
        let server = try DTLSIdentity.generate()
        let clientIdentity = try DTLSIdentity.generate()
        let offer = try WebRTCOffer.parse(Self.offer(fingerprint: clientIdentity.fingerprintText))
        let local = WebRTCAnswer.LocalParameters(iceUsernameFragment: "server1", icePassword: localPassword,
                                                 fingerprintSHA256: server.fingerprintSHA256, candidates: [("127.0.0.1", 9)], sessionID: 1)
        let answer = try WebRTCAnswer.make(for: offer, local: local, codecs: [.h264])
        #expect(answer.media.retransmissionPayloadType == 97)
        let session = WebRTCSession(id: "s1", stream: "screen", connection: 1, local: ("server1", localPassword), offer: offer,
                                    media: answer.media, identity: server, now: 0)
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
        guard case .video(let clear) = connected.session.receiveSRTP(packet, now: 2) else {
            Issue.record("video after the forged record was refused")
            return
        }
        #expect(Array(clear.suffix(4)) == [0x65, 1, 2, 3])
    }

    @Test func anRTXRetransmissionBecomesThePacketItRepeats() throws {
        let connected = try Self.connected()
        let original = try Self.protected(100, payload: [0x65, 9, 9], keys: connected.keys)
        guard case .video = connected.session.receiveSRTP(original, now: 1) else { Issue.record("first packet refused"); return }
        // RTX: its own SSRC and sequence, the original sequence number (102) in its first two bytes.
        let retransmission = try Self.protected(7, payloadType: 97, ssrc: 0x0bad_cafe, payload: [0, 102, 0x41, 5, 6], keys: connected.keys)
        guard case .video(let clear) = connected.session.receiveSRTP(retransmission, now: 2) else {
            Issue.record("the retransmission was not turned into video")
            return
        }
        let packet = try RTPPacket(parsing: clear[...])
        #expect(packet.payloadType == 96 && packet.sequenceNumber == 102 && packet.ssrc == 0x1234_5678)
        #expect(Array(packet.payload) == [0x41, 5, 6])
        // A padding probe (no original sequence number) is nothing.
        let probe = try Self.protected(8, payloadType: 97, ssrc: 0x0bad_cafe, payload: [0], keys: connected.keys)
        guard case .nothing = connected.session.receiveSRTP(probe, now: 3) else { Issue.record("a probe became something"); return }
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
