/// Why a datagram is not a usable RTP packet.
public enum RTPError: Error, Sendable, Equatable, CustomStringConvertible {
    case truncated
    case unsupportedVersion(Int)
    case badPadding
    case emptyPayload

    public var description: String {
        switch self {
        case .truncated: return "shorter than its RTP header says"
        case .unsupportedVersion(let version): return "RTP version \(version), not 2"
        case .badPadding: return "padding longer than the payload"
        case .emptyPayload: return "no payload"
        }
    }
}

/// One RTP packet (RFC 3550 §5.1), parsed without copying: `payload` is a slice of the datagram.
public struct RTPPacket: Sendable, Equatable {
    public var marker: Bool
    public var payloadType: UInt8
    public var sequenceNumber: UInt16
    public var timestamp: UInt32
    public var ssrc: UInt32
    public var payload: ArraySlice<UInt8>

    public init(marker: Bool, payloadType: UInt8, sequenceNumber: UInt16, timestamp: UInt32, ssrc: UInt32,
                payload: ArraySlice<UInt8>) {
        self.marker = marker
        self.payloadType = payloadType
        self.sequenceNumber = sequenceNumber
        self.timestamp = timestamp
        self.ssrc = ssrc
        self.payload = payload
    }

    /// Parses a datagram; CSRC lists and header extensions are skipped, padding removed. Every length is checked
    /// against the datagram before it is used.
    public init(parsing datagram: ArraySlice<UInt8>) throws(RTPError) {
        guard datagram.count >= 12 else { throw .truncated }
        let base = datagram.startIndex
        let first = datagram[base]
        let version = Int(first >> 6)
        guard version == 2 else { throw .unsupportedVersion(version) }
        let hasPadding = first & 0x20 != 0
        let hasExtension = first & 0x10 != 0
        let csrcCount = Int(first & 0x0F)
        marker = datagram[base + 1] & 0x80 != 0
        payloadType = datagram[base + 1] & 0x7F
        sequenceNumber = UInt16(datagram[base + 2]) << 8 | UInt16(datagram[base + 3])
        timestamp = Self.word(datagram, base + 4)
        ssrc = Self.word(datagram, base + 8)
        var start = base + 12 + 4 * csrcCount
        guard start <= datagram.endIndex else { throw .truncated }
        if hasExtension {
            guard start + 4 <= datagram.endIndex else { throw .truncated }
            let words = Int(datagram[start + 2]) << 8 | Int(datagram[start + 3])
            start += 4 + 4 * words
            guard start <= datagram.endIndex else { throw .truncated }
        }
        var end = datagram.endIndex
        if hasPadding {
            guard end > start else { throw .badPadding }
            let padding = Int(datagram[end - 1])
            guard padding > 0, padding <= end - start else { throw .badPadding }
            end -= padding
        }
        guard end > start else { throw .emptyPayload }
        payload = datagram[start..<end]
    }

    private static func word(_ bytes: ArraySlice<UInt8>, _ index: Int) -> UInt32 {
        UInt32(bytes[index]) << 24 | UInt32(bytes[index + 1]) << 16 | UInt32(bytes[index + 2]) << 8 | UInt32(bytes[index + 3])
    }
}
