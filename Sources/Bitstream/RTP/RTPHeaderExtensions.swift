/// The elements of an RTP packet's header extension (RFC 8285): found by their negotiated id, without copying.
/// Both forms are read: one-byte headers (profile 0xBEDE, ids 1–14) and two-byte headers (profile 0x100x, ids
/// 1–255). Pure: every length is checked against the packet before it is used.
public enum RTPHeaderExtensions {
    /// The data of the first element with `id` in `packet` (a whole RTP packet in clear), or nil when the packet has
    /// no extension, another profile, or no such element. A malformed extension block yields nil, not a trap.
    public static func element(id: UInt8, in packet: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        guard id != 0, packet.count >= 12 else { return nil }
        let base = packet.startIndex
        let first = packet[base]
        guard first >> 6 == 2, first & 0x10 != 0 else { return nil }
        let start = base + 12 + 4 * Int(first & 0x0F)
        guard start + 4 <= packet.endIndex else { return nil }
        let profile = UInt16(packet[start]) << 8 | UInt16(packet[start + 1])
        let end = start + 4 + 4 * (Int(packet[start + 2]) << 8 | Int(packet[start + 3]))
        guard end <= packet.endIndex else { return nil }
        let elements = packet[(start + 4)..<end]
        if profile == 0xBEDE { return oneByteElement(id: id, in: elements) }
        if profile & 0xFFF0 == 0x1000 { return twoByteElement(id: id, in: elements) }
        return nil
    }

    /// RFC 8285 §4.2: a byte of id (4 bits) and length − 1 (4 bits), then the data; 0 bytes are padding, and id 15
    /// ends the block.
    private static func oneByteElement(id: UInt8, in elements: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        guard id < 15 else { return nil }
        var index = elements.startIndex
        while index < elements.endIndex {
            let header = elements[index]
            if header == 0 { index += 1; continue }
            let elementID = header >> 4
            if elementID == 15 { return nil }
            let length = Int(header & 0x0F) + 1
            guard index + 1 + length <= elements.endIndex else { return nil }
            if elementID == id { return elements[(index + 1)..<(index + 1 + length)] }
            index += 1 + length
        }
        return nil
    }

    /// RFC 8285 §4.3: a byte of id and a byte of length (0 allowed), then the data; 0 bytes are padding.
    private static func twoByteElement(id: UInt8, in elements: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        var index = elements.startIndex
        while index < elements.endIndex {
            let elementID = elements[index]
            if elementID == 0 { index += 1; continue }
            guard index + 2 <= elements.endIndex else { return nil }
            let length = Int(elements[index + 1])
            guard index + 2 + length <= elements.endIndex else { return nil }
            if elementID == id { return elements[(index + 2)..<(index + 2 + length)] }
            index += 2 + length
        }
        return nil
    }

    /// The transport-wide sequence number (draft-holmer-rmcat-transport-wide-cc-extensions-01 §2): the element's
    /// first two bytes, big-endian; nil when absent or shorter.
    public static func transportSequenceNumber(id: UInt8, in packet: ArraySlice<UInt8>) -> UInt16? {
        guard let data = element(id: id, in: packet), data.count >= 2 else { return nil }
        return UInt16(data[data.startIndex]) << 8 | UInt16(data[data.startIndex + 1])
    }
}
