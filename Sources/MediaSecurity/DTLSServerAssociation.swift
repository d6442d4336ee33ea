import CDTLS

/// The daemon's side of one WHIP session's DTLS handshake (`a=setup:passive`): a DTLS 1.2 server over datagrams
/// the caller moves. Feed every DTLS datagram from the peer's 5-tuple to `receive`, send whatever
/// `takeOutgoingDatagrams()` returns after every call, and arm a timer for `retransmissionDeadline`.
///
/// Not Sendable: OpenSSL's SSL objects are used from one thread at a time. Create it there, or hand it over as a
/// `sending` value.
public final class DTLSServerAssociation {
    private let core: DTLSAssociationCore

    /// `expectedPeerFingerprint` is the SHA-256 from the offer's `a=fingerprint:sha-256` (32 bytes); a handshake
    /// with any other certificate fails with `.fingerprintMismatch` and never yields keys.
    public convenience init(identity: DTLSIdentity, expectedPeerFingerprint: [UInt8]) throws(DTLSSetupError) {
        try self.init(identity: identity, expectedPeerFingerprint: expectedPeerFingerprint, initialTimeout: nil)
    }

    /// `initialTimeout` shortens the first retransmission timeout, so tests need not wait OpenSSL's second.
    init(identity: DTLSIdentity, expectedPeerFingerprint: [UInt8], initialTimeout: Duration?) throws(DTLSSetupError) {
        let fingerprint = try DTLSServerAssociation.checkedFingerprint(expectedPeerFingerprint)
        let handle = try identity.makeServerAssociation(expecting: fingerprint)
        core = DTLSAssociationCore(handle: handle)
        if let initialTimeout { core.setInitialRetransmissionTimeout(initialTimeout) }
    }

    static func checkedFingerprint(_ fingerprint: [UInt8]) throws(DTLSSetupError) -> [UInt8] {
        guard fingerprint.count == Int(CDTLS_FINGERPRINT_SIZE) else {
            throw DTLSSetupError(description: "a SHA-256 fingerprint has 32 bytes, not \(fingerprint.count)")
        }
        return fingerprint
    }

    /// Takes one datagram from the peer (first byte 20...63, RFC 7983). Garbage is dropped as DTLS requires.
    public func receive(_ datagram: [UInt8]) -> DTLSEvent {
        core.receive(datagram)
    }

    /// The datagrams to send to the peer now, in order; each is at most 1200 bytes.
    public func takeOutgoingDatagrams() -> [[UInt8]] {
        core.takeOutgoingDatagrams()
    }

    /// How long from now until `handleRetransmissionTimer()` is due, or nil when no retransmission is pending.
    /// Read it again after every call: each datagram and each retransmission moves it.
    public var retransmissionDeadline: Duration? {
        core.retransmissionDelay
    }

    /// Retransmits our last flight if its timer has run out; `.failed(.timedOut)` after OpenSSL's limit.
    @discardableResult
    public func handleRetransmissionTimer() -> DTLSEvent {
        core.handleRetransmissionTimer()
    }

    /// Ends the association: once connected, a close_notify waits in `takeOutgoingDatagrams()`.
    public func close() {
        core.close()
    }

    /// The SHA-256 of the certificate the peer presented, once it has presented one.
    public var peerFingerprintSHA256: [UInt8]? {
        core.peerFingerprintSHA256
    }
}

@available(*, unavailable)
extension DTLSServerAssociation: Sendable {}

/// The DTLS client a browser would be, so tests can handshake with `DTLSServerAssociation` in memory.
final class DTLSClientAssociation {
    let core: DTLSAssociationCore

    /// `identity` nil sends no certificate; `srtpProfiles` nil offers no use_srtp extension.
    init(
        identity: DTLSIdentity?, expectedPeerFingerprint: [UInt8],
        srtpProfiles: String? = "SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80", initialTimeout: Duration? = nil
    ) throws(DTLSSetupError) {
        let fingerprint = try DTLSServerAssociation.checkedFingerprint(expectedPeerFingerprint)
        let handle = if let identity {
            try identity.makeClientAssociation(expecting: fingerprint, srtpProfiles: srtpProfiles)
        } else {
            try DTLSSetupError.checking { error, capacity in
                fingerprint.withUnsafeBufferPointer { fingerprint in
                    cdtls_association_new_client(nil, fingerprint.baseAddress, srtpProfiles, error, capacity)
                }
            }
        }
        core = DTLSAssociationCore(handle: handle)
        if let initialTimeout { core.setInitialRetransmissionTimeout(initialTimeout) }
        core.connect()
    }
}
