/// One FCI entry of a Generic NACK (RFC 4585 §6.2.1): a lost packet's sequence number (PID) and a bitmask of
/// lost packets among the 16 after it (BLP).
public struct GenericNACKEntry: Sendable, Equatable {
    public var packetID: UInt16
    /// Bit i set: `packetID + i + 1` (modulo 2^16) is lost too.
    public var lostBitmask: UInt16

    public init(packetID: UInt16, lostBitmask: UInt16) {
        self.packetID = packetID
        self.lostBitmask = lostBitmask
    }

    /// The sequence numbers this entry names, in order, wrapping past 65535.
    public var sequenceNumbers: [UInt16] {
        [packetID] + (0..<16).filter { lostBitmask >> $0 & 1 != 0 }.map { packetID &+ UInt16($0) &+ 1 }
    }
}

/// Feedback a receiver sends about the transport: which packets to retransmit (Generic NACK, RFC 4585 §6.2.1) and
/// how fast the sender may send (REMB, draft-alvestrand-rmcat-remb-03 §2.2). Like `RTCPFeedback.keyframeRequest`,
/// each datagram is a compound packet that starts with an empty Receiver Report (RFC 3550 §6.1), which a receiver
/// that has not negotiated reduced-size RTCP (RFC 5506) requires. Each returns new arrays, owned by the caller.
public enum RTCPTransportFeedback {
    /// 64 entries name up to 1088 lost packets in 276 bytes: well under any path MTU.
    public static let defaultMaximumEntriesPerPacket = 64

    /// The FCI entries that name `lost` (in any order, duplicates allowed), fewest first: sequence numbers are
    /// ordered from just after the largest gap between them, so a run that wraps past 65535 stays one run.
    public static func genericNACKEntries(lost: [UInt16]) -> [GenericNACKEntry] {
        let sorted = lost.sorted()
        var unique: [UInt16] = []
        unique.reserveCapacity(sorted.count)
        for number in sorted where unique.last != number { unique.append(number) }
        guard !unique.isEmpty else { return [] }
        // The gap after element i runs to element i+1, and the last one's wraps to the first; the run starts after
        // the largest (ties keep the unwrapped order).
        var start = 0
        var largest = unique[0] &- unique[unique.count - 1]
        for index in 0..<unique.count - 1 where unique[index + 1] &- unique[index] > largest {
            largest = unique[index + 1] &- unique[index]
            start = index + 1
        }
        var entries: [GenericNACKEntry] = []
        for number in unique[start...] + unique[..<start] {
            let distance = entries.last.map { number &- $0.packetID } ?? 0
            if (1...16).contains(distance) {
                entries[entries.count - 1].lostBitmask |= 1 << (distance - 1)
            } else {
                entries.append(GenericNACKEntry(packetID: number, lostBitmask: 0))
            }
        }
        return entries
    }

    /// Datagrams asking `mediaSSRC` to resend `lost`: one per `maximumEntriesPerPacket` entries (none when nothing
    /// is lost). Each is an empty RR then a transport-layer feedback packet (PT 205, FMT 1).
    /// - Parameter maximumEntriesPerPacket: 1 to 16383; anything else traps (a programmer error).
    public static func genericNACK(
        senderSSRC: UInt32, mediaSSRC: UInt32, lost: [UInt16],
        maximumEntriesPerPacket: Int = defaultMaximumEntriesPerPacket
    ) -> [[UInt8]] {
        genericNACKEntryGroups(lost: lost, maximumEntriesPerPacket: maximumEntriesPerPacket).map {
            genericNACK(senderSSRC: senderSSRC, mediaSSRC: mediaSSRC, entries: $0)
        }
    }

    /// The entries that name `lost`, in the groups that go in one datagram each.
    /// - Parameter maximumEntriesPerPacket: 1 to 16383; anything else traps (a programmer error).
    public static func genericNACKEntryGroups(
        lost: [UInt16], maximumEntriesPerPacket: Int = defaultMaximumEntriesPerPacket
    ) -> [ArraySlice<GenericNACKEntry>] {
        precondition((1...16383).contains(maximumEntriesPerPacket), "1 to 16383 NACK entries per packet")
        let entries = genericNACKEntries(lost: lost)
        return stride(from: 0, to: entries.count, by: maximumEntriesPerPacket).map {
            entries[$0..<min($0 + maximumEntriesPerPacket, entries.count)]
        }
    }

    /// One datagram naming `entries` (at most 16383; more traps, a programmer error).
    public static func genericNACK(senderSSRC: UInt32, mediaSSRC: UInt32, entries: ArraySlice<GenericNACKEntry>) -> [UInt8] {
        precondition(entries.count <= 16383, "at most 16383 NACK entries per packet")
        var bytes = emptyReceiverReport(senderSSRC: senderSSRC)
        let length = 2 + entries.count
        bytes += [0x80 | 1, 205, UInt8(length >> 8), UInt8(length & 0xFF)]
        bytes.appendBigEndian(senderSSRC)
        bytes.appendBigEndian(mediaSSRC)
        for entry in entries { bytes.appendBigEndian(UInt32(entry.packetID) << 16 | UInt32(entry.lostBitmask)) }
        return bytes
    }

    /// An estimate of the total bitrate the receiver can take for `mediaSSRCs` (REMB: PT 206, FMT 15, "REMB").
    /// The rate is written as an 18-bit mantissa and a 6-bit exponent, rounded down so the sender is never told more
    /// than `bitrate`.
    /// - Parameter mediaSSRCs: at most 255; more traps (a programmer error).
    public static func receiverEstimatedMaximumBitrate(senderSSRC: UInt32, bitrate: UInt64, mediaSSRCs: [UInt32]) -> [UInt8] {
        precondition(mediaSSRCs.count <= 255, "REMB names at most 255 SSRCs")
        let (exponent, mantissa) = rembFields(bitrate)
        var bytes = emptyReceiverReport(senderSSRC: senderSSRC)
        bytes += [0x80 | 15, 206, 0, UInt8(4 + mediaSSRCs.count)]
        bytes.appendBigEndian(senderSSRC)
        bytes.appendBigEndian(0)  // media source: unused, the SSRCs follow (§2.2)
        bytes += Array("REMB".utf8)
        bytes.appendBigEndian(UInt32(mediaSSRCs.count) << 24 | UInt32(exponent) << 18 | mantissa)
        for ssrc in mediaSSRCs { bytes.appendBigEndian(ssrc) }
        return bytes
    }

    /// A transport-wide feedback message (transport-cc) after an empty RR, as its own compound datagram: it is
    /// padded, so it must come last.
    public static func transportWide(_ feedback: TransportWideFeedback) -> [UInt8] {
        emptyReceiverReport(senderSSRC: feedback.senderSSRC) + feedback.bytes()
    }

    /// The smallest exponent whose mantissa fits 18 bits, and that mantissa (the rate shifted right, rounded down).
    static func rembFields(_ bitrate: UInt64) -> (exponent: UInt8, mantissa: UInt32) {
        let exponent = max(0, UInt64.bitWidth - bitrate.leadingZeroBitCount - 18)
        return (UInt8(exponent), UInt32(bitrate >> UInt64(exponent)))
    }

    /// REMB's bitrate: mantissa × 2^exponent, saturating (a 63 exponent overflows 64 bits).
    static func rembBitrate(exponent: UInt8, mantissa: UInt32) -> UInt64 {
        let shift = Int(exponent & 0x3F)
        guard mantissa != 0 else { return 0 }
        guard UInt64(mantissa).leadingZeroBitCount >= shift else { return .max }
        return UInt64(mantissa) << UInt64(shift)
    }

    /// RR with no report blocks: V=2 RC=0, PT=201, length 1.
    private static func emptyReceiverReport(senderSSRC: UInt32) -> [UInt8] {
        var bytes: [UInt8] = [0x80, 201, 0, 1]
        bytes.appendBigEndian(senderSSRC)
        return bytes
    }
}
