/// What a receiver tells an RTP sender about reception (RFC 3550 §6.4.2, appendix A.3 and A.8): packets lost,
/// highest sequence number, interarrival jitter, and the delay since the sender's last report. Fed with every
/// packet's header as it arrives; `report` makes the compound RTCP packet (RR plus SDES CNAME, §6.1).
public struct RTPReceptionStatistics: Sendable {
    /// The sender's SSRC, once a packet has arrived.
    public private(set) var ssrc: UInt32?
    /// When the last packet arrived.
    public private(set) var lastArrival: UInt64?
    private var baseSequence: UInt32 = 0
    private var maximumSequence: UInt16 = 0
    private var cycles: UInt32 = 0
    private var received: UInt32 = 0
    private var expectedPrior: UInt32 = 0
    private var receivedPrior: UInt32 = 0
    /// Interarrival jitter in timestamp units, scaled by 16 (A.8).
    private var jitter: UInt32 = 0
    private var lastTransit: UInt32?
    private var firstArrival: UInt64 = 0
    /// The middle 32 bits of the last sender report's NTP time, and when (nanoseconds) it arrived.
    private var lastSenderReport: (ntp: UInt32, arrival: UInt64)?
    public let clockRate: UInt32

    public init(clockRate: UInt32) {
        self.clockRate = clockRate
    }

    /// One RTP packet's header fields, and its arrival (monotonic nanoseconds).
    public mutating func record(ssrc packetSSRC: UInt32, sequenceNumber: UInt16, timestamp: UInt32, arrival: UInt64) {
        if ssrc != packetSSRC {
            // A new source (the sender restarted): its statistics start afresh.
            self = RTPReceptionStatistics(clockRate: clockRate)
            ssrc = packetSSRC
            baseSequence = UInt32(sequenceNumber)
            maximumSequence = sequenceNumber
            firstArrival = arrival
        }
        let delta = sequenceNumber &- maximumSequence
        if delta < 0x8000 {
            if sequenceNumber < maximumSequence { cycles &+= 1 << 16 }
            maximumSequence = sequenceNumber
        }
        received &+= 1
        lastArrival = arrival
        // Arrival in timestamp units since the first packet, modulo 2^32 like RTP timestamps (A.8): only
        // differences matter, and nothing here can overflow whatever the uptime or the clock rate.
        let microseconds = (arrival > firstArrival ? arrival - firstArrival : 0) / 1000
        let units = microseconds / 1_000_000 &* UInt64(clockRate) &+ microseconds % 1_000_000 * UInt64(clockRate) / 1_000_000
        let transit = UInt32(truncatingIfNeeded: units) &- timestamp
        if let lastTransit {
            let difference = Int32(bitPattern: transit &- lastTransit).magnitude
            // J += (|D| - J) / 16, kept scaled by 16.
            jitter = UInt32(clamping: Int64(jitter) + Int64(difference) - Int64(jitter >> 4))
        }
        lastTransit = transit
    }

    /// A sender report arrived: its NTP timestamp (64 bits) is echoed, with the delay since, in the next report.
    public mutating func recordSenderReport(ntpTimestamp: UInt64, arrival: UInt64) {
        lastSenderReport = (UInt32(truncatingIfNeeded: ntpTimestamp >> 16), arrival)
    }

    /// Packets expected (from the sequence numbers) minus received: negative with duplicates.
    public var cumulativeLost: Int64 { Int64(extendedHighestSequence) - Int64(baseSequence) + 1 - Int64(received) }

    public var extendedHighestSequence: UInt32 { cycles &+ UInt32(maximumSequence) }

    /// The compound RTCP packet: a Receiver Report with one block (none before the first packet) and an SDES with
    /// `cname`. Updates the "since the last report" counts.
    public mutating func report(senderSSRC: UInt32, cname: String, now: UInt64) -> [UInt8] {
        var bytes: [UInt8] = []
        let blocks: UInt8 = ssrc == nil ? 0 : 1
        bytes += [0x80 | blocks, 201, 0, blocks == 1 ? 7 : 1]
        bytes.appendBigEndian(senderSSRC)
        if let ssrc {
            let expected = extendedHighestSequence &- baseSequence &+ 1
            let expectedInterval = expected &- expectedPrior
            let receivedInterval = received &- receivedPrior
            expectedPrior = expected
            receivedPrior = received
            let lostInterval = Int64(expectedInterval) - Int64(receivedInterval)
            let fraction: UInt8 = expectedInterval == 0 || lostInterval <= 0 ? 0 : UInt8(min(255, (lostInterval << 8) / Int64(expectedInterval)))
            // Cumulative loss is a 24-bit signed number.
            let cumulative = UInt32(bitPattern: Int32(clamping: max(-0x800000, min(0x7fffff, cumulativeLost)))) & 0xffffff
            bytes.appendBigEndian(ssrc)
            bytes.appendBigEndian(UInt32(fraction) << 24 | cumulative)
            bytes.appendBigEndian(extendedHighestSequence)
            bytes.appendBigEndian(jitter >> 4)
            if let lastSenderReport {
                // Delay since the last SR, in 1/65536 s (zero if the SR was stamped after `now` was read).
                let elapsed = now > lastSenderReport.arrival ? now - lastSenderReport.arrival : 0
                let delay = min(elapsed / 1000, 1 << 40) * 65536 / 1_000_000
                bytes.appendBigEndian(lastSenderReport.ntp)
                bytes.appendBigEndian(UInt32(clamping: delay))
            } else {
                bytes.appendBigEndian(0)
                bytes.appendBigEndian(0)
            }
        }
        // SDES with one chunk: SSRC, CNAME item, end, padded to 32 bits.
        let name = Array(cname.utf8.prefix(255))
        var chunk: [UInt8] = []
        chunk.appendBigEndian(senderSSRC)
        chunk += [1, UInt8(name.count)] + name + [0]
        while chunk.count % 4 != 0 { chunk.append(0) }
        bytes += [0x81, 202, 0, UInt8(chunk.count / 4)]
        bytes += chunk
        return bytes
    }

    /// What a compound RTCP packet from the sender says that matters to a receiver, with the SSRCs it speaks for:
    /// only the session's own source may end it or time it (anyone can send RTCP to a UDP port).
    public struct SenderNews: Sendable, Equatable {
        /// Its sender report (PT 200), if it has one: the reporter's SSRC and the NTP timestamp.
        public var senderReport: SenderReport?
        /// The SSRCs a BYE (PT 203) says leave, at most 31 (its 5-bit count).
        public var goodbyeSources: [UInt32] = []

        public struct SenderReport: Sendable, Equatable {
            public var ssrc: UInt32
            public var ntpTimestamp: UInt64
            public init(ssrc: UInt32, ntpTimestamp: UInt64) {
                self.ssrc = ssrc
                self.ntpTimestamp = ntpTimestamp
            }
        }

        public init() {}

        /// The NTP timestamp of its sender report, if it has one (whoever sent it).
        public var senderReportTimestamp: UInt64? { senderReport?.ntpTimestamp }
        /// A BYE for any source.
        public var goodbye: Bool { !goodbyeSources.isEmpty }
    }

    /// Reads the packets of a compound RTCP packet, up to the first malformed one.
    public static func news(in packet: UnsafeRawBufferPointer) -> SenderNews {
        var news = SenderNews()
        var index = 0
        func word(at offset: Int) -> UInt32 { (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(packet[offset + $1]) } }
        while packet.count - index >= 4 {
            let length = ((Int(packet[index + 2]) << 8 | Int(packet[index + 3])) + 1) * 4
            guard packet[index] >> 6 == 2, length <= packet.count - index else { break }
            switch packet[index + 1] {
            case 200 where length >= 28:
                let ntp = (8..<16).reduce(UInt64(0)) { $0 << 8 | UInt64(packet[index + $1]) }
                news.senderReport = SenderNews.SenderReport(ssrc: word(at: index + 4), ntpTimestamp: ntp)
            case 203:
                // SC sources follow the header, as far as the packet's length holds them.
                let count = min(Int(packet[index] & 0x1f), (length - 4) / 4)
                for source in 0..<count { news.goodbyeSources.append(word(at: index + 4 + 4 * source)) }
            default:
                break
            }
            index += length
        }
        return news
    }
}
