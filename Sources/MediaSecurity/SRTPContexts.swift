/// Decrypts and authenticates what the peer sends: SRTP media and SRTCP reports, with the peer's half of the DTLS
/// keys. In WHIP the browser is the DTLS client, so that half is the client's.
///
/// Not Sendable: libsrtp's replay windows and rollover counters change with every packet.
public final class SRTPReceiveContext {
    private let session: SRTPSession

    public init(keying: DTLSKeyingMaterial, remoteIsDTLSClient: Bool = true) throws(SRTPSetupError) {
        session = try SRTPSession(keying: keying, clientHalf: remoteIsDTLSClient, direction: .inbound)
    }

    /// The RTP packet inside `packet`, or why it was refused (a refused packet changes no state).
    public func unprotectRTP(_ packet: [UInt8]) -> Result<[UInt8], SRTPFailure> {
        session.unprotect(packet, rtcp: false)
    }

    /// The compound RTCP packet inside `packet`, or why it was refused.
    public func unprotectRTCP(_ packet: [UInt8]) -> Result<[UInt8], SRTPFailure> {
        session.unprotect(packet, rtcp: true)
    }
}

@available(*, unavailable)
extension SRTPReceiveContext: Sendable {}

/// Encrypts what we send: our RTCP (receiver reports, NACK, PLI) with our half of the DTLS keys, the server's.
///
/// Not Sendable: libsrtp's packet indexes change with every packet.
public final class SRTPSendContext {
    private let session: SRTPSession

    /// `localIsDTLSClient` true takes the client's keys: what a browser would send with (tests).
    public init(keying: DTLSKeyingMaterial, localIsDTLSClient: Bool = false) throws(SRTPSetupError) {
        session = try SRTPSession(keying: keying, clientHalf: localIsDTLSClient, direction: .outbound)
    }

    /// `packet` (a compound RTCP packet) as SRTCP.
    public func protectRTCP(_ packet: [UInt8]) -> Result<[UInt8], SRTPFailure> {
        session.protect(packet, rtcp: true)
    }

    /// `packet` (an RTP packet) as SRTP. The daemon sends no media; this is what the tests' browser sends with.
    public func protectRTP(_ packet: [UInt8]) -> Result<[UInt8], SRTPFailure> {
        session.protect(packet, rtcp: false)
    }
}

@available(*, unavailable)
extension SRTPSendContext: Sendable {}

extension SRTPSession {
    /// A session keyed with one half of the DTLS keying material (RFC 5764 §4.2): the DTLS client's when
    /// `clientHalf`, else the server's.
    convenience init(keying: DTLSKeyingMaterial, clientHalf: Bool, direction: Direction) throws(SRTPSetupError) {
        try self.init(profile: keying.profile, key: clientHalf ? keying.clientKey : keying.serverKey,
                      salt: clientHalf ? keying.clientSalt : keying.serverSalt, direction: direction)
    }
}
