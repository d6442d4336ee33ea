/// The SRTP protection profiles the server offers, in its order of preference.
public enum SRTPProfile: Sendable, Hashable {
    /// SRTP_AEAD_AES_128_GCM (RFC 7714): 16-byte key, 12-byte salt, 16-byte tag.
    case aeadAes128Gcm
    /// SRTP_AES128_CM_HMAC_SHA1_80 (RFC 5764): 16-byte key, 14-byte salt, 10-byte tag.
    case aes128CmSha1_80

    public var keyLength: Int { 16 }

    public var saltLength: Int {
        switch self {
        case .aeadAes128Gcm: 12
        case .aes128CmSha1_80: 14
        }
    }

    /// From the IANA DTLS-SRTP profile id OpenSSL reports.
    init?(ianaID: Int) {
        switch ianaID {
        case 0x0007: self = .aeadAes128Gcm
        case 0x0001: self = .aes128CmSha1_80
        default: return nil
        }
    }
}

/// SRTP master keys and salts from the DTLS handshake (RFC 5764 §4.2). The client's half protects what the DTLS
/// client sends (in WHIP the browser, which sends the media), the server's half what the daemon sends (RTCP).
public struct DTLSKeyingMaterial: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public let profile: SRTPProfile
    public let clientKey: [UInt8]
    public let clientSalt: [UInt8]
    public let serverKey: [UInt8]
    public let serverSalt: [UInt8]

    /// The lengths must suit `profile`; SRTP contexts refuse keys that do not.
    public init(
        profile: SRTPProfile, clientKey: [UInt8], clientSalt: [UInt8], serverKey: [UInt8], serverSalt: [UInt8]
    ) {
        self.profile = profile
        self.clientKey = clientKey
        self.clientSalt = clientSalt
        self.serverKey = serverKey
        self.serverSalt = serverSalt
    }

    /// Splits the exporter's output: client key, server key, client salt, server salt.
    init?(exported bytes: [UInt8], profile: SRTPProfile) {
        let key = profile.keyLength
        let salt = profile.saltLength
        guard bytes.count == 2 * (key + salt) else { return nil }
        self.init(
            profile: profile,
            clientKey: Array(bytes[0..<key]),
            clientSalt: Array(bytes[2 * key..<2 * key + salt]),
            serverKey: Array(bytes[key..<2 * key]),
            serverSalt: Array(bytes[2 * key + salt..<2 * (key + salt)])
        )
    }

    /// Keys never reach a log by accident.
    public var description: String { "DTLSKeyingMaterial(\(profile), keys redacted)" }
    public var debugDescription: String { description }
}

/// What one datagram (or timer) did to a DTLS association. After every call, send `takeOutgoingDatagrams()`.
public enum DTLSEvent: Sendable, Equatable {
    /// Still handshaking (also after a datagram that was dropped as garbage).
    case handshaking
    /// The handshake finished and the peer's fingerprint matched; reported once, with the SRTP keys.
    case connected(DTLSKeyingMaterial)
    /// Connected before; nothing new (a retransmitted Finished was answered, application data was dropped).
    case established
    /// The association failed; it stays failed. Any alert for the peer waits in `takeOutgoingDatagrams()`.
    case failed(DTLSFailure)
    /// The peer sent close_notify (answered), or `close()` was called.
    case closed
}

public enum DTLSFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The peer's certificate is not the one its SDP named.
    case fingerprintMismatch
    /// The peer offered none of the SRTP profiles we accept, or no use_srtp extension at all.
    case noCommonSRTPProfile
    /// The peer sent no certificate, so there is nothing to check the fingerprint against.
    case noPeerCertificate
    /// Our flight was retransmitted until OpenSSL gave up.
    case timedOut
    /// The peer ended the handshake with a fatal alert; OpenSSL's text for it.
    case peerAlert(String)
    /// Any other handshake failure; OpenSSL's reason text.
    case handshakeFailed(String)
    /// The keys could not be exported after the handshake.
    case keyExportFailed

    public var description: String {
        switch self {
        case .fingerprintMismatch: "certificate fingerprint does not match the SDP"
        case .noCommonSRTPProfile: "no SRTP profile in common"
        case .noPeerCertificate: "peer sent no certificate"
        case .timedOut: "handshake timed out"
        case .peerAlert(let reason): "peer sent an alert: \(reason)"
        case .handshakeFailed(let reason): "handshake failed: \(reason)"
        case .keyExportFailed: "cannot export the SRTP keys"
        }
    }
}
