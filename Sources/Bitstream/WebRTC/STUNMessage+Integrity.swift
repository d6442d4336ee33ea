/// MESSAGE-INTEGRITY and FINGERPRINT, checked on the datagram's bytes. The HMAC comes from the caller: this module
/// does no cryptography; the CRC is not cryptography and is computed here.
extension STUNMessage {
    /// XORed into FINGERPRINT's CRC so that a STUN message is not mistaken for another protocol's CRC-protected
    /// packet (RFC 8489 §14.7).
    static let fingerprintXOR: UInt32 = 0x5354_554E

    /// Whether the first MESSAGE-INTEGRITY attribute holds the HMAC-SHA1 of the message before it (RFC 8489
    /// §14.5): computed over the header and the attributes before MESSAGE-INTEGRITY, with the header's length
    /// rewritten to end just after MESSAGE-INTEGRITY (so a FINGERPRINT after it is left out).
    /// The comparison takes the same time wherever the bytes differ, so a forger learns nothing from timing.
    /// False for a datagram that does not parse, has no MESSAGE-INTEGRITY, or whose `hmacSHA1` result is not 20
    /// bytes.
    /// - Parameters:
    ///   - key: with ICE's short-term credentials (RFC 8489 §9.1.1, RFC 8445 §7.2.2), the password's bytes as
    ///     they are (ICE passwords are ASCII ice-chars, which OpaqueString leaves alone): the local ICE password
    ///     for requests received, the remote one for responses. The caller passes it; nothing is derived here.
    ///   - hmacSHA1: HMAC-SHA1 of `data` under `key` (RFC 2104), supplied by a module that does cryptography.
    public static func verifyMessageIntegrity(
        of bytes: [UInt8], key: [UInt8], hmacSHA1: (_ key: [UInt8], _ data: [UInt8]) -> [UInt8]
    ) -> Bool {
        guard let fields = try? STUNAttributeField.walk(bytes),
              let integrity = fields.first(where: { $0.type == STUNAttribute.messageIntegrity }),
              integrity.valueRange.count == 20
        else { return false }
        var covered = Array(bytes[..<integrity.start])
        covered.setSTUNLength(integrity.valueRange.upperBound - headerSize)
        let expected = hmacSHA1(key, covered)
        guard expected.count == 20 else { return false }
        var difference: UInt8 = 0
        for (index, byte) in zip(integrity.valueRange, expected) { difference |= bytes[index] ^ byte }
        return difference == 0
    }

    /// Whether the message ends with a FINGERPRINT that matches it (RFC 8489 §14.7): the CRC-32 of everything
    /// before the attribute, XOR 0x5354554E. The header's length already covers FINGERPRINT when it is last, which
    /// it must be. ICE requires FINGERPRINT on every check (RFC 8445 §7.2.2), so false means "not ICE's STUN".
    public static func hasValidFingerprint(_ bytes: [UInt8]) -> Bool {
        guard let fields = try? STUNAttributeField.walk(bytes), let last = fields.last,
              last.type == STUNAttribute.fingerprint, last.valueRange.count == 4
        else { return false }
        let stated = bytes[last.valueRange].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return CRC32ISOHDLC.checksum(bytes[..<last.start]) ^ fingerprintXOR == stated
    }

    /// Appends MESSAGE-INTEGRITY (when there is a key) and FINGERPRINT to a serialized message, fixing the length
    /// field before each is computed, as `verifyMessageIntegrity` and `hasValidFingerprint` expect.
    static func appendIntegrityAndFingerprint(
        to bytes: inout [UInt8], integrityKey: [UInt8]?, hmacSHA1: (_ key: [UInt8], _ data: [UInt8]) -> [UInt8]
    ) {
        if let integrityKey {
            bytes.setSTUNLength(bytes.count - headerSize + 24)
            let mac = hmacSHA1(integrityKey, bytes)
            precondition(mac.count == 20, "HMAC-SHA1 is 20 bytes")
            bytes.appendSTUNAttribute(STUNAttribute.messageIntegrity, mac)
        }
        bytes.setSTUNLength(bytes.count - headerSize + 8)
        var crc: [UInt8] = []
        crc.appendBigEndian(CRC32ISOHDLC.checksum(bytes[...]) ^ fingerprintXOR)
        bytes.appendSTUNAttribute(STUNAttribute.fingerprint, crc)
    }
}

/// The CRC-32 of zlib, PNG and Ethernet (the catalogue's CRC-32/ISO-HDLC): reflected polynomial 0xEDB88320,
/// initial value and final XOR all ones. STUN's FINGERPRINT uses it (RFC 8489 §14.7).
enum CRC32ISOHDLC {
    static let table: [UInt32] = (0..<256).map { byte in
        var crc = UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        return crc
    }

    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = (crc >> 8) ^ table[Int((crc ^ UInt32(byte)) & 0xFF)] }
        return ~crc
    }
}
