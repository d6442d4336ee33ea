/// The cheapest look at a datagram on the ICE port, before anything is copied or parsed: strangers' floods of STUN
/// with random usernames are dropped on the username's first half alone.
extension STUNMessage {
    /// The local part of a binding request's USERNAME ("LOCAL:REMOTE", RFC 8445 §7.2.2), as offsets into `bytes`;
    /// nil when `bytes` is not a binding request with the magic cookie, a length that fits, and attributes that
    /// walk to a USERNAME holding a colon. Allocates nothing. Every request `parse` takes with such a USERNAME
    /// passes (a request this rejects would be rejected after parsing too).
    public static func bindingRequestLocalFragment<Bytes: RandomAccessCollection>(_ bytes: Bytes) -> Range<Int>?
    where Bytes.Element == UInt8, Bytes.Index == Int {
        let base = bytes.startIndex
        guard bytes.count >= headerSize, bytes.count <= 65535 + headerSize else { return nil }
        func word16(_ offset: Int) -> Int { Int(bytes[base + offset]) << 8 | Int(bytes[base + offset + 1]) }
        guard word16(0) == Int(binding), word16(2) + headerSize == bytes.count,
              word16(4) == Int(magicCookie >> 16), word16(6) == Int(magicCookie & 0xFFFF) else { return nil }
        var offset = headerSize
        while offset + 4 <= bytes.count {
            let (type, length) = (word16(offset), word16(offset + 2))
            let value = offset + 4
            guard value + length <= bytes.count else { return nil }
            if type == Int(STUNAttribute.username) {
                guard let colon = (value..<value + length).first(where: { bytes[base + $0] == UInt8(ascii: ":") }) else { return nil }
                return value..<colon
            }
            offset = value + (length + 3) & ~3
        }
        return nil
    }
}
