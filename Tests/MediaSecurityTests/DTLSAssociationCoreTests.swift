@testable import MediaSecurity
import Testing

/// The one owner of an OpenSSL DTLS association, shared by the daemon's server and the tests' client: what it
/// sends when, its timer, how events are reported, and how it ends.
@Suite struct DTLSAssociationCoreTests {
    static func client(initialTimeout: Duration?) throws -> DTLSClientAssociation {
        try DTLSClientAssociation(
            identity: DTLSIdentity.generate(), expectedPeerFingerprint: Array(repeating: 1, count: 32),
            initialTimeout: initialTimeout)
    }

    /// The first timeout is at most a minute (the longest DTLS ever waits), and without one it is OpenSSL's
    /// second. Nothing below a millisecond, zero or negative, is taken as it is: OpenSSL counts under 15 ms left as
    /// expired and doubles at once, so the shortest comes out as 16 ms, and reads as 0 once under 15 ms are left.
    /// The lower bounds leave a loaded machine seconds between the ClientHello and the read.
    @Test func theFirstTimeoutIsKeptWithinAMinuteAndAboveZero() throws {
        let cases: [(given: Duration?, within: ClosedRange<Duration>)] = [
            (.seconds(3600), .seconds(50) ... .seconds(60)),
            // Far past a minute: clamped, where multiplying it into milliseconds trapped.
            (.seconds(Int64.max), .seconds(50) ... .seconds(60)),
            (.milliseconds(250), .zero ... .milliseconds(250)),
            (.microseconds(10), .zero ... .milliseconds(32)),
            (.seconds(-5), .zero ... .milliseconds(32)),
            (nil, .zero ... .seconds(1)),
        ]
        for (given, within) in cases {
            let client = try Self.client(initialTimeout: given)
            let delay = try #require(client.core.retransmissionDelay, "a ClientHello went out, so a timer runs")
            #expect(within.contains(delay), "given \(String(describing: given)): \(delay)")
        }
    }

    /// A client writes one ClientHello on connect (a DTLS 1.2 handshake record in epoch 0), once; a server says
    /// nothing and runs no timer until it hears one.
    @Test func aClientSpeaksFirstOnceAndAServerWaits() throws {
        let server = try DTLSServerAssociation(
            identity: DTLSIdentity.generate(), expectedPeerFingerprint: Array(repeating: 1, count: 32))
        #expect(server.takeOutgoingDatagrams().isEmpty)
        #expect(server.retransmissionDeadline == nil)
        #expect(server.peerFingerprintSHA256 == nil)

        let client = try Self.client(initialTimeout: nil)
        let hello = client.core.takeOutgoingDatagrams()
        try #require(hello.count == 1)
        #expect(hello[0][0] == 22, "handshake")
        #expect(hello[0][3...4] == [0, 0], "epoch 0")
        #expect(hello[0][13] == 1, "ClientHello")
        // The record says DTLS 1.0 for the sake of old servers (RFC 6347 §4.1); the hello asks for 1.2.
        #expect(hello[0][25...26] == [0xFE, 0xFD], "client_version DTLS 1.2")
        #expect(client.core.takeOutgoingDatagrams().isEmpty, "taken datagrams are gone")
        client.core.connect()
        #expect(client.core.takeOutgoingDatagrams().isEmpty, "a second connect sends no second hello")
        #expect(client.core.peerFingerprintSHA256 == nil, "no certificate seen yet")
    }

    /// `.connected` with the keys is reported exactly once; a repeated final flight afterwards is `.established`.
    @Test func theKeysAreReportedOnceAndLaterRecordsAreEstablished() throws {
        let pair = try InMemoryHandshake()
        pair.deliverToServer(pair.takeFromClient())
        pair.deliverToClient(pair.takeFromServer())
        pair.deliverToServer(pair.takeFromClient())
        let finalFlight = pair.takeFromServer()
        pair.deliverToClient(finalFlight)
        let connected = pair.clientEvents.filter { if case .connected = $0 { true } else { false } }
        #expect(connected.count == 1)
        #expect(pair.clientKeys != nil && pair.clientKeys == pair.serverKeys)
        for datagram in finalFlight {
            #expect(pair.client.core.receive(datagram) == .established)
        }
        #expect(pair.client.core.retransmissionDelay == nil, "no timer once connected")
    }

    /// A timer read before its deadline changes nothing: no datagram, the same deadline still ahead.
    @Test func handlingTheTimerBeforeItsDeadlineSendsNothing() throws {
        let client = try Self.client(initialTimeout: .seconds(30))
        _ = client.core.takeOutgoingDatagrams()
        #expect(client.core.handleRetransmissionTimer() == .handshaking)
        #expect(client.core.takeOutgoingDatagrams().isEmpty)
        let delay = try #require(client.core.retransmissionDelay)
        #expect(delay > .seconds(20))
    }

    /// Closed before the handshake finished: there are no keys to protect, so no close_notify; the peer's next
    /// flight is ignored and the timer stops.
    @Test func closingDuringTheHandshakeSendsNothingAndIgnoresThePeer() throws {
        let pair = try InMemoryHandshake()
        pair.deliverToServer(pair.takeFromClient())
        pair.client.core.close()
        #expect(pair.takeFromClient().isEmpty)
        #expect(pair.client.core.retransmissionDelay == nil)
        pair.deliverToClient(pair.takeFromServer())
        #expect(!pair.clientEvents.isEmpty && pair.clientEvents.allSatisfy { $0 == .closed }, "\(pair.clientEvents)")
        #expect(pair.takeFromClient().isEmpty)
        #expect(pair.client.core.handleRetransmissionTimer() == .closed)
    }

    /// A failure is final, keeps its first reason, and stops the timer. The side that sent the alert says what
    /// was wrong; the side that got it says it was told, with OpenSSL's text for the alert.
    @Test func aFailureIsFinalAndNamesItsReasonOnBothSides() throws {
        let pair = try InMemoryHandshake(clientExpects: Array(repeating: 0x5A, count: 32))
        pair.exchange()
        #expect(pair.clientFailure == .fingerprintMismatch)
        guard case .peerAlert(let reason) = pair.serverFailure else {
            Issue.record("the server should have been told by an alert, got \(pair.serverEvents)")
            return
        }
        #expect(reason.contains("alert"), "\(reason)")
        #expect(pair.client.core.retransmissionDelay == nil && pair.server.retransmissionDeadline == nil)
        #expect(pair.client.core.handleRetransmissionTimer() == .failed(.fingerprintMismatch))
        #expect(pair.client.core.receive([0x16, 0xFE, 0xFD, 0, 0]) == .failed(.fingerprintMismatch))
    }
}
