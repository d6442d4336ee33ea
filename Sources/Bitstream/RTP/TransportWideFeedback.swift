/// One transport-wide congestion control feedback message (draft-holmer-rmcat-transport-wide-cc-extensions-01 §3.1;
/// RTPFB, PT 205, FMT 15): for `statusCount` transport-wide sequence numbers from `baseSequenceNumber`, which
/// arrived and when. The sender's own delay-based estimator (Chromium's GoogCC) reads it to probe up and back off.
///
/// Times are in the draft's units: `referenceTime` in 64 ms ticks (24 bits, wrapping), each arrival's `delta` in
/// 250 µs ticks from the one before (the first from the reference time). Lost packets are the sequence numbers in
/// the range that `received` does not name.
public struct TransportWideFeedback: Sendable, Equatable {
    public struct Arrival: Sendable, Equatable {
        public var sequenceNumber: UInt16
        /// 250 µs ticks after the previous arrival (the first: after the reference time); negative when reordered.
        public var delta: Int16

        public init(sequenceNumber: UInt16, delta: Int16) {
            self.sequenceNumber = sequenceNumber
            self.delta = delta
        }
    }

    /// A packet's status symbol (§3.1.1).
    enum Symbol: UInt16 {
        case notReceived = 0
        /// Received; delta 0...255 ticks, one byte.
        case smallDelta = 1
        /// Received; delta negative or above 255 ticks, two bytes.
        case largeDelta = 2
    }

    public static let deltaTickNanoseconds: UInt64 = 250_000
    public static let referenceTickNanoseconds: UInt64 = 64_000_000

    public var senderSSRC: UInt32
    public var mediaSSRC: UInt32
    public var baseSequenceNumber: UInt16
    public var statusCount: UInt16
    /// 24 bits.
    public var referenceTime: UInt32
    public var feedbackCount: UInt8
    /// In sequence order, each within the range.
    public var received: [Arrival]

    public init(senderSSRC: UInt32, mediaSSRC: UInt32, baseSequenceNumber: UInt16, statusCount: UInt16,
                referenceTime: UInt32, feedbackCount: UInt8, received: [Arrival]) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
        self.baseSequenceNumber = baseSequenceNumber
        self.statusCount = statusCount
        self.referenceTime = referenceTime & 0xFF_FFFF
        self.feedbackCount = feedbackCount
        self.received = received
    }

    /// The status of each sequence number in the range, in order. Arrivals outside the range, or out of order,
    /// are a programmer error.
    func symbols() -> [Symbol] {
        var symbols = [Symbol](repeating: .notReceived, count: Int(statusCount))
        var previous = -1
        for arrival in received {
            let offset = Int(arrival.sequenceNumber &- baseSequenceNumber)
            precondition(offset < symbols.count && offset > previous, "arrivals in sequence order, within the range")
            previous = offset
            symbols[offset] = (0...255).contains(arrival.delta) ? .smallDelta : .largeDelta
        }
        return symbols
    }

    /// The packet (its common header included), padded to 32 bits as RFC 3550 §6.4.1 says (P set, the last byte
    /// counting the padding), so it must end its compound datagram.
    public func bytes() -> [UInt8] {
        precondition(statusCount > 0, "a feedback message reports at least one packet (the draft allows no empty one)")
        var body: [UInt8] = []
        body.appendBigEndian(senderSSRC)
        body.appendBigEndian(mediaSSRC)
        body.appendBigEndian(UInt32(baseSequenceNumber) << 16 | UInt32(statusCount))
        body.appendBigEndian(referenceTime << 8 | UInt32(feedbackCount))
        for chunk in Self.chunks(symbols()) { body += [UInt8(chunk >> 8), UInt8(chunk & 0xFF)] }
        for arrival in received {
            if (0...255).contains(arrival.delta) {
                body.append(UInt8(arrival.delta))
            } else {
                let bits = UInt16(bitPattern: arrival.delta)
                body += [UInt8(bits >> 8), UInt8(bits & 0xFF)]
            }
        }
        let padding = (4 - body.count % 4) % 4
        if padding > 0 { body += [UInt8](repeating: 0, count: padding - 1) + [UInt8(padding)] }
        let words = body.count / 4
        return [0x80 | (padding > 0 ? 0x20 : 0) | 15, 205, UInt8(words >> 8), UInt8(words & 0xFF)] + body
    }

    /// Packet status chunks (§3.1.3, §3.1.4): a run-length chunk for a run of one symbol long enough to be worth
    /// it, otherwise a vector of 14 one-bit symbols when none needs two bytes, else 7 two-bit symbols. A last
    /// vector may reach past the count; the reader stops at it.
    static func chunks(_ symbols: [Symbol]) -> [UInt16] {
        var chunks: [UInt16] = []
        var index = 0
        while index < symbols.count {
            var run = 1
            while index + run < symbols.count, symbols[index + run] == symbols[index], run < 0x1FFF { run += 1 }
            if run >= 14 || (run >= 7 && symbols[index] == .largeDelta) {
                chunks.append(symbols[index].rawValue << 13 | UInt16(run))
                index += run
                continue
            }
            let oneBit = symbols[index..<min(index + 14, symbols.count)]
            if !oneBit.contains(.largeDelta) {
                var chunk: UInt16 = 0x8000
                for (position, symbol) in oneBit.enumerated() { chunk |= symbol.rawValue << (13 - position) }
                chunks.append(chunk)
                index += oneBit.count
            } else {
                let twoBit = symbols[index..<min(index + 7, symbols.count)]
                var chunk: UInt16 = 0xC000
                for (position, symbol) in twoBit.enumerated() { chunk |= symbol.rawValue << (12 - 2 * position) }
                chunks.append(chunk)
                index += twoBit.count
            }
        }
        return chunks
    }
}

extension TransportWideFeedback {
    /// Reads the FCI after the common header and the two SSRCs (`body` starts at the sender SSRC). Nil when a chunk
    /// or a delta the counts need is missing, or a symbol is the reserved one. Only arrivals are kept, so what it
    /// allocates is bounded by the packet's length whatever `statusCount` claims.
    static func parse(body: ArraySlice<UInt8>) -> TransportWideFeedback? {
        guard body.count >= 18 else { return nil }
        let base = body.startIndex
        func half(_ offset: Int) -> UInt16 { UInt16(body[base + offset]) << 8 | UInt16(body[base + offset + 1]) }
        func word(_ offset: Int) -> UInt32 { UInt32(half(offset)) << 16 | UInt32(half(offset + 2)) }
        let baseSequence = half(8), count = Int(half(10))
        guard count > 0 else { return nil }
        // Received symbols as (offset from base, size of delta); lost ones only advance the offset.
        var receivedSymbols: [(offset: Int, size: Int)] = []
        var offset = 0, index = 16
        while offset < count {
            guard index + 2 <= body.count else { return nil }
            let chunk = half(index)
            index += 2
            if chunk & 0x8000 == 0 {
                let size = Int(chunk >> 13 & 3), run = min(Int(chunk & 0x1FFF), count - offset)
                guard size != 3 else { return nil }
                // Every received symbol needs a delta byte at least: a run longer than the packet cannot be whole.
                if size > 0 {
                    guard run <= body.count else { return nil }
                    receivedSymbols += (offset..<offset + run).map { ($0, size) }
                }
                offset += run
            } else {
                let twoBit = chunk & 0x4000 != 0
                let capacity = twoBit ? 7 : 14
                for position in 0..<min(capacity, count - offset) {
                    let size = twoBit ? Int(chunk >> (12 - 2 * position) & 3) : Int(chunk >> (13 - position) & 1)
                    guard size != 3 else { return nil }
                    if size > 0 { receivedSymbols.append((offset + position, size)) }
                }
                offset += min(capacity, count - offset)
            }
        }
        var received: [Arrival] = []
        received.reserveCapacity(receivedSymbols.count)
        for symbol in receivedSymbols {
            guard index + symbol.size <= body.count else { return nil }
            let delta = symbol.size == 1 ? Int16(body[base + index]) : Int16(bitPattern: half(index))
            received.append(Arrival(sequenceNumber: baseSequence &+ UInt16(symbol.offset), delta: delta))
            index += symbol.size
        }
        return TransportWideFeedback(senderSSRC: word(0), mediaSSRC: word(4), baseSequenceNumber: baseSequence,
                                     statusCount: UInt16(count), referenceTime: word(12) >> 8,
                                     feedbackCount: body[base + 15], received: received)
    }
}
