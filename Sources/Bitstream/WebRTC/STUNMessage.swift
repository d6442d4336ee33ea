/// Why a datagram is not a STUN message this receiver will look at.
public enum STUNError: Error, Sendable, Equatable, CustomStringConvertible {
    case truncated
    /// Over 1500 bytes: ICE checks fit a path MTU (RFC 8489 §6.1), and a bigger one is not worth reading.
    case tooLong(Int)
    /// The top two bits of the first byte are not 0 (RFC 8489 §5): another protocol on the same port.
    case notSTUN
    case badMagicCookie(UInt32)
    /// The header's length is not a multiple of 4 or is not what follows the header.
    case badLength(Int)
    /// An attribute's value runs past the end of the message.
    case attributeTruncated(type: UInt16)
    case tooManyAttributes
    /// FINGERPRINT is not the last attribute (RFC 8489 §14.7).
    case attributeAfterFingerprint

    public var description: String {
        switch self {
        case .truncated: return "shorter than a STUN header"
        case .tooLong(let count): return "\(count) bytes, over 1500"
        case .notSTUN: return "first two bits not 0"
        case .badMagicCookie(let cookie): return "magic cookie \(String(cookie, radix: 16)), not 2112a442"
        case .badLength(let length): return "message length \(length) not a multiple of 4 or not the bytes that follow"
        case .attributeTruncated(let type): return "attribute \(String(type, radix: 16)) runs past the message"
        case .tooManyAttributes: return "more than \(STUNMessage.maximumAttributes) attributes"
        case .attributeAfterFingerprint: return "an attribute after FINGERPRINT"
        }
    }
}

/// One STUN attribute (RFC 8489 §14): its value without the padding to 32 bits.
public struct STUNAttribute: Sendable, Equatable {
    public var type: UInt16
    public var value: [UInt8]

    public init(type: UInt16, value: [UInt8]) {
        self.type = type
        self.value = value
    }

    // The types this module reads or writes (RFC 8489 §18.3, RFC 8445 §16.1).
    public static let mappedAddress: UInt16 = 0x0001
    public static let username: UInt16 = 0x0006
    public static let messageIntegrity: UInt16 = 0x0008
    public static let errorCode: UInt16 = 0x0009
    public static let xorMappedAddress: UInt16 = 0x0020
    public static let priority: UInt16 = 0x0024
    public static let useCandidate: UInt16 = 0x0025
    public static let software: UInt16 = 0x8022
    public static let fingerprint: UInt16 = 0x8028
    public static let iceControlled: UInt16 = 0x8029
    public static let iceControlling: UInt16 = 0x802A
}

/// A STUN message (RFC 8489 §5) as ICE connectivity checks (RFC 8445 §7) use it. Parsing checks the framing only;
/// MESSAGE-INTEGRITY and FINGERPRINT are checked on the datagram's bytes (`verifyMessageIntegrity`,
/// `hasValidFingerprint`), since both cover the bytes as sent.
public struct STUNMessage: Sendable, Equatable {
    /// The two class bits of the message type (RFC 8489 §5).
    public enum Class: UInt8, Sendable, Equatable {
        case request = 0, indication = 1, successResponse = 2, errorResponse = 3
    }

    /// 12 bits; `binding` is the only method ICE uses.
    public var method: UInt16
    public var messageClass: Class
    /// 12 bytes, chosen by the requester and echoed in the response.
    public var transactionID: [UInt8]
    /// In message order. Attributes after MESSAGE-INTEGRITY other than FINGERPRINT are dropped: RFC 8489 §14.5
    /// says to ignore them, since nothing vouches for them.
    public var attributes: [STUNAttribute]

    public static let binding: UInt16 = 0x0001
    public static let magicCookie: UInt32 = 0x2112_A442
    public static let headerSize = 20
    /// Above any message ICE sends (a handful of attributes); keeps a hostile datagram's cost bounded.
    public static let maximumAttributes = 64
    public static let maximumSize = 1500

    public init(method: UInt16, messageClass: Class, transactionID: [UInt8], attributes: [STUNAttribute]) {
        self.method = method
        self.messageClass = messageClass
        self.transactionID = transactionID
        self.attributes = attributes
    }

    /// Parses one datagram. Every length is checked against the bytes before it is used.
    public static func parse(_ bytes: [UInt8]) throws(STUNError) -> STUNMessage {
        let fields = try STUNAttributeField.walk(bytes)
        let type = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
        var attributes: [STUNAttribute] = []
        var afterIntegrity = false
        for field in fields {
            if afterIntegrity && field.type != STUNAttribute.fingerprint { continue }
            attributes.append(STUNAttribute(type: field.type, value: Array(bytes[field.valueRange])))
            if field.type == STUNAttribute.messageIntegrity { afterIntegrity = true }
        }
        return STUNMessage(
            method: type & 0x000F | (type & 0x00E0) >> 1 | (type & 0x3E00) >> 2,
            messageClass: Class(rawValue: UInt8(type >> 7 & 0x2 | type >> 4 & 0x1)) ?? .request,
            transactionID: Array(bytes[8..<20]),
            attributes: attributes
        )
    }

    /// The message as sent: header and attributes, each padded with zeros to 32 bits. MESSAGE-INTEGRITY and
    /// FINGERPRINT are written as they are held, not recomputed (the writers below compute them).
    /// Traps (a programmer error) if `method` is over 12 bits, `transactionID` is not 12 bytes, or an attribute's
    /// value is over 65535 bytes.
    public func serialized() -> [UInt8] {
        precondition(method <= 0x0FFF, "STUN methods are 12 bits")
        precondition(transactionID.count == 12, "STUN transaction IDs are 12 bytes")
        let klass = UInt16(messageClass.rawValue)
        let type = method & 0x000F | (method & 0x0070) << 1 | (method & 0x0F80) << 2 | (klass & 1) << 4 | (klass & 2) << 7
        var bytes: [UInt8] = [UInt8(type >> 8), UInt8(type & 0xFF), 0, 0]
        bytes.appendBigEndian(Self.magicCookie)
        bytes += transactionID
        for attribute in attributes { bytes.appendSTUNAttribute(attribute.type, attribute.value) }
        bytes.setSTUNLength(bytes.count - Self.headerSize)
        return bytes
    }

    /// The value of the first attribute of `type` (RFC 8489 §14: only the first need be processed).
    public func value(of type: UInt16) -> [UInt8]? {
        attributes.first { $0.type == type }?.value
    }

    /// USERNAME (RFC 8489 §14.3): at most 513 bytes of UTF-8; for ICE, "remote ufrag:local ufrag" (RFC 8445 §7.2.2).
    public var username: String? {
        guard let value = value(of: STUNAttribute.username), value.count <= 513 else { return nil }
        return String(validating: value, as: UTF8.self)
    }

    /// PRIORITY (RFC 8445 §7.1.1): the priority a peer-reflexive candidate learned from this check would get.
    public var priority: UInt32? {
        guard let value = value(of: STUNAttribute.priority), value.count == 4 else { return nil }
        return value.reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// USE-CANDIDATE (RFC 8445 §7.1.2): the controlling agent nominates this pair.
    public var useCandidate: Bool { value(of: STUNAttribute.useCandidate) != nil }

    /// ICE-CONTROLLING's tiebreaker (RFC 8445 §7.1.3): the sender thinks it is the controlling agent.
    public var iceControlling: UInt64? { tiebreaker(STUNAttribute.iceControlling) }

    /// ICE-CONTROLLED's tiebreaker (RFC 8445 §7.1.3).
    public var iceControlled: UInt64? { tiebreaker(STUNAttribute.iceControlled) }

    public var hasMessageIntegrity: Bool { value(of: STUNAttribute.messageIntegrity) != nil }

    public var hasFingerprint: Bool { value(of: STUNAttribute.fingerprint) != nil }

    /// ERROR-CODE (RFC 8489 §14.8): the code (300 to 699) and its reason phrase.
    public var errorCode: (code: Int, reason: String)? {
        guard let value = value(of: STUNAttribute.errorCode), value.count >= 4, value.count <= 4 + 763 else { return nil }
        let code = Int(value[2] & 0x07) * 100 + Int(value[3])
        guard (300...699).contains(code), value[3] < 100 else { return nil }
        return (code, String(decoding: value[4...], as: UTF8.self))
    }

    /// XOR-MAPPED-ADDRESS (RFC 8489 §14.2): the address the request came from, as the responder saw it.
    public var xorMappedAddress: STUNAddress? {
        guard let value = value(of: STUNAttribute.xorMappedAddress) else { return nil }
        return STUNAddress(xorValue: value, transactionID: transactionID)
    }

    private func tiebreaker(_ type: UInt16) -> UInt64? {
        guard let value = value(of: type), value.count == 8 else { return nil }
        return value.reduce(0) { $0 << 8 | UInt64($1) }
    }
}

/// Where one attribute sits in a datagram: found by `walk`, which checks all of the framing.
struct STUNAttributeField {
    var type: UInt16
    /// The offset of its 4-byte header.
    var start: Int
    var valueRange: Range<Int>

    /// The attributes of a framed STUN message, in order, after the header checks of RFC 8489 §5 and §6.3.
    static func walk(_ bytes: [UInt8]) throws(STUNError) -> [STUNAttributeField] {
        guard bytes.count >= STUNMessage.headerSize else { throw .truncated }
        guard bytes.count <= STUNMessage.maximumSize else { throw .tooLong(bytes.count) }
        guard bytes[0] & 0xC0 == 0 else { throw .notSTUN }
        let cookie = UInt32(bytes[4]) << 24 | UInt32(bytes[5]) << 16 | UInt32(bytes[6]) << 8 | UInt32(bytes[7])
        guard cookie == STUNMessage.magicCookie else { throw .badMagicCookie(cookie) }
        let length = Int(bytes[2]) << 8 | Int(bytes[3])
        guard length % 4 == 0, length == bytes.count - STUNMessage.headerSize else { throw .badLength(length) }
        var fields: [STUNAttributeField] = []
        var offset = STUNMessage.headerSize
        // The length is a multiple of 4, so at least a whole attribute header is left whenever offset < count.
        while offset < bytes.count {
            guard fields.last?.type != STUNAttribute.fingerprint else { throw .attributeAfterFingerprint }
            guard fields.count < STUNMessage.maximumAttributes else { throw .tooManyAttributes }
            let type = UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
            let valueLength = Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
            let valueStart = offset + 4
            let paddedEnd = valueStart + ((valueLength + 3) & ~3)
            guard paddedEnd <= bytes.count else { throw .attributeTruncated(type: type) }
            fields.append(STUNAttributeField(type: type, start: offset, valueRange: valueStart..<valueStart + valueLength))
            offset = paddedEnd
        }
        return fields
    }
}

extension [UInt8] {
    /// One attribute: type, length, value, zeros to the next 32-bit boundary (RFC 8489 §14).
    mutating func appendSTUNAttribute(_ type: UInt16, _ value: [UInt8]) {
        precondition(value.count <= 0xFFFF, "a STUN attribute holds at most 65535 bytes")
        self += [UInt8(type >> 8), UInt8(type & 0xFF), UInt8(value.count >> 8), UInt8(value.count & 0xFF)]
        self += value
        self += [UInt8](repeating: 0, count: (4 - value.count % 4) % 4)
    }

    /// The header's message length field: the bytes after the 20-byte header.
    mutating func setSTUNLength(_ length: Int) {
        self[2] = UInt8(length >> 8 & 0xFF)
        self[3] = UInt8(length & 0xFF)
    }
}
