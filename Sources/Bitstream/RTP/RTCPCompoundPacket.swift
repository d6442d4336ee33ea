/// Why a datagram is not a compound RTCP packet this receiver will read (RFC 3550 appendix A.2's checks).
public enum RTCPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A header or a length runs past the datagram, or the datagram is empty.
    case truncated
    case unsupportedVersion(Int)
    /// Padding on a packet that is not the last, or a padding count of 0 or longer than the packet.
    case badPadding
    case tooManyPackets
    /// A packet too short for what its counts say.
    case malformed(payloadType: UInt8)

    public var description: String {
        switch self {
        case .truncated: return "shorter than its RTCP headers say"
        case .unsupportedVersion(let version): return "RTCP version \(version), not 2"
        case .badPadding: return "padding not at the end, or longer than its packet"
        case .tooManyPackets: return "more than \(RTCPPacketSummary.maximumPackets) packets in one datagram"
        case .malformed(let type): return "packet type \(type) too short for its counts"
        }
    }
}

/// One reception report block of an SR or RR (RFC 3550 §6.4.1).
public struct RTCPReportBlock: Sendable, Equatable {
    public var ssrc: UInt32
    /// Lost fraction since the previous report, in 1/256.
    public var fractionLost: UInt8
    /// 24 bits, signed: negative with duplicates.
    public var cumulativeLost: Int32
    public var extendedHighestSequence: UInt32
    public var jitter: UInt32
    /// The middle 32 bits of the NTP timestamp of the last SR from `ssrc`, and the delay since, in 1/65536 s.
    public var lastSenderReport: UInt32
    public var delaySinceLastSenderReport: UInt32

    public init(ssrc: UInt32, fractionLost: UInt8, cumulativeLost: Int32, extendedHighestSequence: UInt32, jitter: UInt32,
                lastSenderReport: UInt32, delaySinceLastSenderReport: UInt32) {
        self.ssrc = ssrc
        self.fractionLost = fractionLost
        self.cumulativeLost = cumulativeLost
        self.extendedHighestSequence = extendedHighestSequence
        self.jitter = jitter
        self.lastSenderReport = lastSenderReport
        self.delaySinceLastSenderReport = delaySinceLastSenderReport
    }
}

/// A Sender Report (RFC 3550 §6.4.1): the sender's clocks and counts, which map RTP timestamps to wall-clock time.
public struct RTCPSenderReport: Sendable, Equatable {
    public var ssrc: UInt32
    /// 64-bit NTP time: seconds since 1900 in the top 32 bits, fraction in the bottom.
    public var ntpTimestamp: UInt64
    public var rtpTimestamp: UInt32
    public var packetCount: UInt32
    public var octetCount: UInt32
    public var reportBlocks: [RTCPReportBlock]

    public init(ssrc: UInt32, ntpTimestamp: UInt64, rtpTimestamp: UInt32, packetCount: UInt32, octetCount: UInt32,
                reportBlocks: [RTCPReportBlock]) {
        self.ssrc = ssrc
        self.ntpTimestamp = ntpTimestamp
        self.rtpTimestamp = rtpTimestamp
        self.packetCount = packetCount
        self.octetCount = octetCount
        self.reportBlocks = reportBlocks
    }
}

/// One SDES chunk (RFC 3550 §6.5): the source and its CNAME, when it has a valid UTF-8 one.
public struct RTCPSourceDescriptionChunk: Sendable, Equatable {
    public var ssrc: UInt32
    public var cname: String?

    public init(ssrc: UInt32, cname: String?) {
        self.ssrc = ssrc
        self.cname = cname
    }
}

/// What each packet of a compound RTCP datagram says, for the packet types a WebRTC receiver acts on.
public enum RTCPPacketSummary: Sendable, Equatable {
    case senderReport(RTCPSenderReport)
    case receiverReport(ssrc: UInt32, reportBlocks: [RTCPReportBlock])
    case sourceDescription([RTCPSourceDescriptionChunk])
    case goodbye(ssrcs: [UInt32])
    case genericNACK(senderSSRC: UInt32, mediaSSRC: UInt32, entries: [GenericNACKEntry])
    case pictureLossIndication(senderSSRC: UInt32, mediaSSRC: UInt32)
    /// REMB (draft-alvestrand-rmcat-remb-03): the bitrate saturates at `UInt64.max`.
    case receiverEstimatedMaximumBitrate(senderSSRC: UInt32, bitrate: UInt64, ssrcs: [UInt32])
    /// Transport-wide congestion control feedback (RTPFB FMT 15).
    case transportWideFeedback(TransportWideFeedback)
    /// Any other type, with its 5-bit count or FMT field.
    case other(payloadType: UInt8, count: UInt8)

    /// Far above what any sender packs into one datagram (RFC 3550 §6.1 expects a handful).
    public static let maximumPackets = 64

    /// Reads every packet of a datagram; any malformed one rejects the whole datagram, as RFC 3550 A.2 asks. The
    /// first packet need not be SR or RR: WebRTC negotiates reduced-size RTCP (RFC 5506), which sends a lone NACK
    /// or PLI. Every length is checked against the datagram before it is used.
    public static func parseCompound(_ bytes: [UInt8]) throws(RTCPError) -> [RTCPPacketSummary] {
        guard !bytes.isEmpty else { throw .truncated }
        var packets: [RTCPPacketSummary] = []
        var offset = 0
        while offset < bytes.count {
            guard packets.count < maximumPackets else { throw .tooManyPackets }
            guard bytes.count - offset >= 4 else { throw .truncated }
            let first = bytes[offset]
            guard first >> 6 == 2 else { throw .unsupportedVersion(Int(first >> 6)) }
            let length = ((Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])) + 1) * 4
            guard length <= bytes.count - offset else { throw .truncated }
            var end = offset + length
            if first & 0x20 != 0 {
                // Only the last packet may be padded (RFC 3550 §6.4.1); the last byte counts the padding, itself too.
                guard end == bytes.count else { throw .badPadding }
                let padding = Int(bytes[end - 1])
                guard padding > 0, padding <= length - 4 else { throw .badPadding }
                end -= padding
            }
            let body = RTCPBody(bytes: bytes[offset + 4..<end], payloadType: bytes[offset + 1])
            packets.append(try body.summary(count: first & 0x1F))
            offset += length
        }
        return packets
    }
}

/// A packet's bytes after its 4-byte header; offsets are from the start of the body.
private struct RTCPBody {
    var bytes: ArraySlice<UInt8>
    var payloadType: UInt8

    func summary(count: UInt8) throws(RTCPError) -> RTCPPacketSummary {
        switch (payloadType, count) {
        case (200, _): return .senderReport(try senderReport(blocks: Int(count)))
        case (201, _):
            try require(4 + 24 * Int(count))
            return .receiverReport(ssrc: word(0), reportBlocks: reportBlocks(at: 4, count: Int(count)))
        case (202, _): return .sourceDescription(try sourceDescription(chunks: Int(count)))
        case (203, _):
            try require(4 * Int(count))
            return .goodbye(ssrcs: (0..<Int(count)).map { word(4 * $0) })
        case (205, 1):
            try require(8)
            let entries = (0..<(bytes.count - 8) / 4).map { index in
                let fci = word(8 + 4 * index)
                return GenericNACKEntry(packetID: UInt16(fci >> 16), lostBitmask: UInt16(fci & 0xFFFF))
            }
            return .genericNACK(senderSSRC: word(0), mediaSSRC: word(4), entries: entries)
        case (205, 15):
            guard let feedback = TransportWideFeedback.parse(body: bytes) else { throw .malformed(payloadType: payloadType) }
            return .transportWideFeedback(feedback)
        case (206, 1):
            try require(8)
            return .pictureLossIndication(senderSSRC: word(0), mediaSSRC: word(4))
        case (206, 15) where bytes.count >= 16 && word(8) == 0x5245_4D42:  // "REMB"; other AFB is `other`
            return try estimatedMaximumBitrate()
        default:
            return .other(payloadType: payloadType, count: count)
        }
    }

    private func senderReport(blocks: Int) throws(RTCPError) -> RTCPSenderReport {
        try require(24 + 24 * blocks)
        return RTCPSenderReport(
            ssrc: word(0), ntpTimestamp: UInt64(word(4)) << 32 | UInt64(word(8)), rtpTimestamp: word(12),
            packetCount: word(16), octetCount: word(20), reportBlocks: reportBlocks(at: 24, count: blocks)
        )
    }

    /// Blocks of 24 bytes; `require` has checked they fit. Profile-specific extensions after them are skipped.
    private func reportBlocks(at offset: Int, count: Int) -> [RTCPReportBlock] {
        (0..<count).map { index in
            let start = offset + 24 * index
            let lost = word(start + 4)
            return RTCPReportBlock(
                ssrc: word(start), fractionLost: UInt8(lost >> 24),
                cumulativeLost: Int32(bitPattern: lost << 8) >> 8,  // sign-extends the 24 bits
                extendedHighestSequence: word(start + 8), jitter: word(start + 12),
                lastSenderReport: word(start + 16), delaySinceLastSenderReport: word(start + 20)
            )
        }
    }

    /// Chunks of an SSRC then items (type, length, text) up to a null type, padded to 32 bits (RFC 3550 §6.5).
    private func sourceDescription(chunks: Int) throws(RTCPError) -> [RTCPSourceDescriptionChunk] {
        var result: [RTCPSourceDescriptionChunk] = []
        var offset = 0
        for _ in 0..<chunks {
            try require(offset + 4)
            var chunk = RTCPSourceDescriptionChunk(ssrc: word(offset), cname: nil)
            offset += 4
            while true {
                try require(offset + 1)
                let type = byte(offset)
                if type == 0 { break }
                try require(offset + 2)
                let textStart = offset + 2
                offset = textStart + Int(byte(offset + 1))
                try require(offset)
                if type == 1 && chunk.cname == nil {
                    chunk.cname = String(validating: bytes[bytes.startIndex + textStart..<bytes.startIndex + offset], as: UTF8.self)
                }
            }
            offset = (offset + 4) & ~3  // past the null type and the nulls after it to the next 32-bit boundary
            result.append(chunk)
        }
        return result
    }

    /// Sender SSRC, media SSRC (unused), "REMB", SSRC count, exponent and mantissa, then the SSRCs.
    private func estimatedMaximumBitrate() throws(RTCPError) -> RTCPPacketSummary {
        let fields = word(12)
        let count = Int(fields >> 24)
        try require(16 + 4 * count)
        let bitrate = RTCPTransportFeedback.rembBitrate(exponent: UInt8(fields >> 18 & 0x3F), mantissa: fields & 0x3FFFF)
        return .receiverEstimatedMaximumBitrate(
            senderSSRC: word(0), bitrate: bitrate, ssrcs: (0..<count).map { word(16 + 4 * $0) }
        )
    }

    private func require(_ size: Int) throws(RTCPError) {
        guard bytes.count >= size else { throw .malformed(payloadType: payloadType) }
    }

    private func byte(_ offset: Int) -> UInt8 { bytes[bytes.startIndex + offset] }

    private func word(_ offset: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(bytes[bytes.startIndex + offset + $1]) }
    }
}
