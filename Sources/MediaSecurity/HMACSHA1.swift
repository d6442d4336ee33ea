import CDTLS

/// HMAC-SHA1 (RFC 2104) through OpenSSL, for STUN's MESSAGE-INTEGRITY (RFC 8489 §14.5).
public enum HMACSHA1 {
    public static let length = 20

    public static func authenticate(key: [UInt8], data: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: length) { output, count in
            let ok = key.withUnsafeBufferPointer { key in
                data.withUnsafeBufferPointer { data in
                    cdtls_hmac_sha1(key.baseAddress, key.count, data.baseAddress, data.count, output.baseAddress)
                }
            }
            // HMAC over memory we own fails only when OpenSSL itself is broken.
            precondition(ok == 1, "OpenSSL's HMAC-SHA1 failed")
            count = length
        }
    }

    /// Whether `mac` is the HMAC of `data`; the comparison takes the same time wherever the bytes differ, so a
    /// forger learns nothing from how fast a STUN request was refused.
    public static func isValid(_ mac: [UInt8], key: [UInt8], data: [UInt8]) -> Bool {
        let expected = authenticate(key: key, data: data)
        guard mac.count == expected.count else { return false }
        return zip(mac, expected).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
