import CDTLS
import Synchronization

/// The daemon's DTLS certificate and key: ECDSA P-256, self-signed, valid from a day ago for 30 days. Peers trust
/// it by `fingerprintSHA256`, which goes into every SDP answer (`a=fingerprint:sha-256 <fingerprintText>`).
///
/// Sendable so that one identity made at startup serves every session: associations take their own references to
/// the certificate and key when they are created, and the lock only serialises those creations.
public final class DTLSIdentity: Sendable {
    public let fingerprintSHA256: [UInt8]
    /// The owned `cdtls_identity`; freed in deinit.
    private let handle: Mutex<OpaquePointer>

    private init(handle: consuming sending OpaquePointer, fingerprint: [UInt8]) {
        self.handle = Mutex(handle)
        self.fingerprintSHA256 = fingerprint
    }

    deinit {
        handle.withLock { cdtls_identity_free($0) }
    }

    /// Makes a new key pair and certificate (about a millisecond of work).
    public static func generate() throws(DTLSSetupError) -> DTLSIdentity {
        let handle = try DTLSSetupError.checking { error, capacity in cdtls_identity_generate(error, capacity) }
        let fingerprint = [UInt8](unsafeUninitializedCapacity: Int(CDTLS_FINGERPRINT_SIZE)) { buffer, count in
            cdtls_identity_fingerprint_sha256(handle, buffer.baseAddress)
            count = buffer.count
        }
        return DTLSIdentity(handle: handle, fingerprint: fingerprint)
    }

    /// "AB:CD:…", the form SDP's a=fingerprint uses (RFC 8122).
    public var fingerprintText: String {
        DTLSIdentity.fingerprintText(fingerprintSHA256)
    }

    static func fingerprintText(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789ABCDEF")
        return bytes.map { String([digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]]) }.joined(separator: ":")
    }

    /// A new server `cdtls_association` with this identity; the caller owns it. C is called straight from inside
    /// the lock (no caller's closure), so the compiler can see that the identity's pointer stays there.
    func makeServerAssociation(expecting fingerprint: [UInt8]) throws(DTLSSetupError) -> OpaquePointer {
        try handle.withLock { identity in
            DTLSSetupError.attempt { error, capacity in
                fingerprint.withUnsafeBufferPointer { cdtls_association_new(identity, $0.baseAddress, error, capacity) }
            }
        }.get()
    }

    /// A new client `cdtls_association` with this identity (tests); the caller owns it.
    func makeClientAssociation(expecting fingerprint: [UInt8], srtpProfiles: String?) throws(DTLSSetupError)
        -> OpaquePointer
    {
        try handle.withLock { identity in
            DTLSSetupError.attempt { error, capacity in
                fingerprint.withUnsafeBufferPointer { fingerprint in
                    cdtls_association_new_client(identity, fingerprint.baseAddress, srtpProfiles, error, capacity)
                }
            }
        }.get()
    }
}

/// Setting up DTLS failed: OpenSSL could not make a key, a certificate or a context, or a fingerprint from SDP
/// had the wrong length.
public struct DTLSSetupError: Error, CustomStringConvertible, Sendable {
    public let description: String

    /// Runs a C constructor that reports failure as NULL plus a message in the buffer it is given.
    static func checking(
        _ make: (UnsafeMutablePointer<CChar>, Int) -> OpaquePointer?
    ) throws(DTLSSetupError) -> OpaquePointer {
        try attempt(make).get()
    }

    static func attempt(
        _ make: (UnsafeMutablePointer<CChar>, Int) -> OpaquePointer?
    ) -> Result<OpaquePointer, DTLSSetupError> {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 256) { error in
            error.initialize(repeating: 0)
            guard let handle = make(error.baseAddress!, error.count) else {
                let text = error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
                return .failure(DTLSSetupError(description: String(decoding: text, as: UTF8.self)))
            }
            return .success(handle)
        }
    }
}
