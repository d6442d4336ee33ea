/// Puts RTP packets back in sequence order within a small window before depacketization. A packet overtaken by
/// up to `window − 1` later ones is slotted into place; when the window is full and the next expected packet is
/// still missing, it is declared lost and the buffer moves on (the depacketizer then reports the gap). Packets
/// older than what was already released, and duplicates, are dropped by the depacketizer.
///
/// The held packets sit in a ring of `window` slots, the next expected packet's at `head`, with a bit per slot saying
/// which are taken: a step costs the same whatever the window (it runs on the event loop that every stream shares),
/// and finding the oldest packet held reads at most `window / 64 + 1` words.
public struct RTPReorderBuffer: Sendable {
    public let window: Int
    private var expected: UInt16?
    /// Packets ahead of `expected`: the one `d` ahead at `(head + d) % window`.
    private var slots: [RTPPacket?]
    /// Bit `i % 64` of word `i / 64`: slot `i` holds a packet.
    private var taken: [UInt64]
    private var head = 0
    private var held = 0

    public init(window: Int = 16) {
        precondition(window >= 1, "window must hold at least one packet")
        self.window = window
        slots = Array(repeating: nil, count: window)
        taken = Array(repeating: 0, count: (window + 63) / 64)
    }

    /// Takes one packet; `release` receives the packets that are now in order.
    public mutating func push(_ packet: RTPPacket, _ release: (RTPPacket) -> Void) {
        guard let next = expected else {
            expected = packet.sequenceNumber &+ 1
            release(packet)
            return
        }
        if packet.sequenceNumber &- next >= 0x8000 {
            release(packet)  // late or duplicate: the depacketizer counts and drops it
            return
        }
        // Too far ahead: give up on the missing packets up to the oldest one held, until it fits the window (or,
        // with nothing held, jump to it).
        while Int(packet.sequenceNumber &- expected!) >= window {
            guard let oldest = oldestHeldOffset() else {
                expected = packet.sequenceNumber
                break
            }
            skip(oldest)
            drainInOrder(release)
        }
        let ahead = Int(packet.sequenceNumber &- expected!)
        if ahead == 0 {
            expected = packet.sequenceNumber &+ 1
            head = (head + 1) % window
            release(packet)
            drainInOrder(release)
            return
        }
        // Held until what it waits for comes, or a packet a window ahead of that gives up on it.
        let index = (head + ahead) % window
        if slots[index] == nil {
            held += 1
            taken[index >> 6] |= 1 << UInt64(index & 63)
        }
        slots[index] = packet
    }

    /// Releases everything held, in order (end of stream).
    public mutating func flush(_ release: (RTPPacket) -> Void) {
        while let oldest = oldestHeldOffset() {
            skip(oldest)
            drainInOrder(release)
        }
    }

    private mutating func drainInOrder(_ release: (RTPPacket) -> Void) {
        while let packet = slots[head] {
            slots[head] = nil
            taken[head >> 6] &= ~(1 << UInt64(head & 63))
            held -= 1
            head = (head + 1) % window
            expected = expected! &+ 1
            release(packet)
        }
    }

    /// The next expected packet is `offset` ahead: those before it are lost.
    private mutating func skip(_ offset: Int) {
        head = (head + offset) % window
        expected = expected! &+ UInt16(truncatingIfNeeded: offset)
    }

    /// How far ahead of `expected` the oldest packet held is; nil when none is.
    private func oldestHeldOffset() -> Int? {
        guard held > 0 else { return nil }
        // The first taken slot from `head` to the end, else from the start to `head`.
        guard let index = firstTaken(from: head, to: window) ?? firstTaken(from: 0, to: head) else { return nil }
        return (index - head + window) % window
    }

    /// The first taken slot in `start..<end`.
    private func firstTaken(from start: Int, to end: Int) -> Int? {
        guard start < end else { return nil }
        var word = start >> 6
        var bits = taken[word] & (~0 << UInt64(start & 63))
        while word <= (end - 1) >> 6 {
            if bits != 0 {
                let index = word << 6 + bits.trailingZeroBitCount
                return index < end ? index : nil
            }
            word += 1
            guard word < taken.count else { return nil }
            bits = taken[word]
        }
        return nil
    }
}
