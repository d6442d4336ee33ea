/// A transport address as STUN carries it (RFC 8489 §14.1, §14.2).
public struct STUNAddress: Sendable, Equatable {
    public enum Family: Sendable, Equatable {
        /// 4 bytes, network order.
        case ipv4([UInt8])
        /// 16 bytes, network order.
        case ipv6([UInt8])
    }

    public var family: Family
    public var port: UInt16

    public init(_ family: Family, port: UInt16) {
        self.family = family
        self.port = port
    }

    /// Decodes an XOR-MAPPED-ADDRESS value: the port is XORed with the cookie's top 16 bits, an IPv4 address with
    /// the cookie, an IPv6 address with the cookie and the transaction ID (RFC 8489 §14.2). Nil for another
    /// family or a value of the wrong size.
    init?(xorValue value: [UInt8], transactionID: [UInt8]) {
        guard value.count >= 4, transactionID.count == 12 else { return nil }
        let mask = Self.mask(transactionID: transactionID)
        let port = (UInt16(value[2]) << 8 | UInt16(value[3])) ^ UInt16(STUNMessage.magicCookie >> 16)
        switch (value[1], value.count) {
        case (0x01, 8): self.init(.ipv4(zip(value[4...], mask).map { $0 ^ $1 }), port: port)
        case (0x02, 20): self.init(.ipv6(zip(value[4...], mask).map { $0 ^ $1 }), port: port)
        default: return nil
        }
    }

    /// The XOR-MAPPED-ADDRESS value for this address. Traps (a programmer error) on an address of the wrong size.
    func xorValue(transactionID: [UInt8]) -> [UInt8] {
        let (familyCode, address): (UInt8, [UInt8])
        switch family {
        case .ipv4(let bytes):
            precondition(bytes.count == 4, "an IPv4 address is 4 bytes")
            (familyCode, address) = (0x01, bytes)
        case .ipv6(let bytes):
            precondition(bytes.count == 16, "an IPv6 address is 16 bytes")
            (familyCode, address) = (0x02, bytes)
        }
        let xorPort = port ^ UInt16(STUNMessage.magicCookie >> 16)
        return [0, familyCode, UInt8(xorPort >> 8), UInt8(xorPort & 0xFF)]
            + zip(address, Self.mask(transactionID: transactionID)).map { $0 ^ $1 }
    }

    /// The magic cookie then the transaction ID: 16 bytes, of which IPv4 uses the first 4.
    private static func mask(transactionID: [UInt8]) -> [UInt8] {
        var mask: [UInt8] = []
        mask.appendBigEndian(STUNMessage.magicCookie)
        return mask + transactionID
    }
}

/// Which side of an ICE session an agent is, with its random tiebreaker for role conflicts (RFC 8445 §6.1.1,
/// §7.3.1.1). An ICE-lite agent is always controlled.
public enum ICERole: Sendable, Equatable {
    case controlling(tiebreaker: UInt64)
    case controlled(tiebreaker: UInt64)
}

/// The messages an ICE-lite agent (RFC 8445 §2.5) sends: answers to connectivity checks, and a request for tests
/// and consent checks (RFC 7675). Each ends with MESSAGE-INTEGRITY (when keyed) and FINGERPRINT, as ICE requires
/// (RFC 8445 §7.2.2, §7.3). `transactionID` must be 12 bytes and `hmacSHA1` must return 20; anything else traps (a
/// programmer error). Each returns a new array, owned by the caller.
extension STUNMessage {
    /// The answer to a Binding request that passed its checks: XOR-MAPPED-ADDRESS is where the request came from
    /// (RFC 8445 §7.3.1.4 so that the peer learns peer-reflexive candidates).
    /// - Parameter integrityKey: the local ICE password's bytes, as for the request (RFC 8445 §7.3).
    public static func bindingSuccessResponse(
        transactionID: [UInt8], mappedAddress: STUNAddress, integrityKey: [UInt8],
        hmacSHA1: (_ key: [UInt8], _ data: [UInt8]) -> [UInt8]
    ) -> [UInt8] {
        let attributes = [
            STUNAttribute(type: STUNAttribute.xorMappedAddress, value: mappedAddress.xorValue(transactionID: transactionID)),
        ]
        return signed(.successResponse, transactionID: transactionID, attributes, integrityKey: integrityKey, hmacSHA1: hmacSHA1)
    }

    /// A Binding error response (RFC 8489 §6.3.4): 400 for a malformed request, 401 when its MESSAGE-INTEGRITY or
    /// USERNAME does not check out (then without MESSAGE-INTEGRITY: there is no shared key to sign with, RFC 8489
    /// §9.1.3), 487 for a role conflict (RFC 8445 §7.3.1.1).
    /// - Parameters:
    ///   - code: 300 to 699; anything else traps (a programmer error).
    ///   - reason: cut to 127 Unicode scalars (RFC 8489 §14.8 asks for under 128 characters).
    public static func bindingErrorResponse(
        transactionID: [UInt8], code: Int, reason: String, integrityKey: [UInt8]?,
        hmacSHA1: (_ key: [UInt8], _ data: [UInt8]) -> [UInt8]
    ) -> [UInt8] {
        precondition((300...699).contains(code), "STUN error codes are 300 to 699")
        var value: [UInt8] = [0, 0, UInt8(code / 100), UInt8(code % 100)]
        var scalars = String.UnicodeScalarView()
        scalars.append(contentsOf: reason.unicodeScalars.prefix(127))
        value += Array(String(scalars).utf8)
        let attributes = [STUNAttribute(type: STUNAttribute.errorCode, value: value)]
        return signed(.errorResponse, transactionID: transactionID, attributes, integrityKey: integrityKey, hmacSHA1: hmacSHA1)
    }

    /// A Binding request as an ICE agent sends it (RFC 8445 §7.2.2): USERNAME "remote ufrag:local ufrag", PRIORITY,
    /// ICE-CONTROLLING or ICE-CONTROLLED with the agent's tiebreaker (one of them is required, §7.1.3), and
    /// USE-CANDIDATE when nominating.
    /// - Parameters:
    ///   - username: at most 513 bytes of UTF-8 (RFC 8489 §14.3; two 256-character ufrags and a colon, RFC 8839
    ///     §5.4); longer traps, so limit ufrags where they are read.
    ///   - integrityKey: the remote ICE password's bytes.
    public static func bindingRequest(
        transactionID: [UInt8], username: String, priority: UInt32, role: ICERole, useCandidate: Bool,
        integrityKey: [UInt8], hmacSHA1: (_ key: [UInt8], _ data: [UInt8]) -> [UInt8]
    ) -> [UInt8] {
        let name = Array(username.utf8)
        precondition(name.count <= 513, "USERNAME is at most 513 bytes")
        var priorityValue: [UInt8] = []
        priorityValue.appendBigEndian(priority)
        var attributes = [
            STUNAttribute(type: STUNAttribute.username, value: name),
            STUNAttribute(type: STUNAttribute.priority, value: priorityValue),
        ]
        let (roleType, tiebreaker) = switch role {
        case .controlling(let tiebreaker): (STUNAttribute.iceControlling, tiebreaker)
        case .controlled(let tiebreaker): (STUNAttribute.iceControlled, tiebreaker)
        }
        var tiebreakerValue: [UInt8] = []
        tiebreakerValue.appendBigEndian(UInt32(tiebreaker >> 32))
        tiebreakerValue.appendBigEndian(UInt32(tiebreaker & 0xFFFF_FFFF))
        attributes.append(STUNAttribute(type: roleType, value: tiebreakerValue))
        if useCandidate { attributes.append(STUNAttribute(type: STUNAttribute.useCandidate, value: [])) }
        return signed(.request, transactionID: transactionID, attributes, integrityKey: integrityKey, hmacSHA1: hmacSHA1)
    }

    /// A Binding message of `messageClass` with `attributes`, then MESSAGE-INTEGRITY and FINGERPRINT.
    private static func signed(
        _ messageClass: Class, transactionID: [UInt8], _ attributes: [STUNAttribute], integrityKey: [UInt8]?,
        hmacSHA1: (_ key: [UInt8], _ data: [UInt8]) -> [UInt8]
    ) -> [UInt8] {
        let message = STUNMessage(method: binding, messageClass: messageClass, transactionID: transactionID, attributes: attributes)
        var bytes = message.serialized()
        appendIntegrityAndFingerprint(to: &bytes, integrityKey: integrityKey, hmacSHA1: hmacSHA1)
        return bytes
    }
}

/// What a datagram on a WebRTC port is, from its first bytes (RFC 7983 §7, RFC 5761 §4): STUN, DTLS, RTP and RTCP
/// share one port, and each goes to its own parser.
public enum MultiplexedPacketKind: Sendable, Equatable {
    case stun, dtls, rtp, rtcp, unknown

    /// First byte 0–3 STUN, 20–63 DTLS, 128–191 RTP or RTCP; then RTCP when the second byte (RTP's marker bit and
    /// payload type together) is 192–223, the RTCP packet types RTP payload types must avoid (RFC 5761 §4).
    /// ZRTP, TURN channels and anything else are `unknown`.
    public static func classify(_ bytes: [UInt8]) -> MultiplexedPacketKind {
        guard let first = bytes.first else { return .unknown }
        switch first {
        case 0...3: return .stun
        case 20...63: return .dtls
        case 128...191:
            guard bytes.count >= 2 else { return .unknown }
            return (192...223).contains(bytes[1]) ? .rtcp : .rtp
        default: return .unknown
        }
    }
}
