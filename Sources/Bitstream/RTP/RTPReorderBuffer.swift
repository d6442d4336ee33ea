/// Puts RTP packets back in sequence order within a small window before depacketization. A packet overtaken by
/// up to `window − 1` later ones is slotted into place; when the window is full and the next expected packet is
/// still missing, it is declared lost and the buffer moves on (the depacketizer then reports the gap). Packets
/// older than what was already released, and duplicates, are dropped by the depacketizer.
public struct RTPReorderBuffer: Sendable {
    public let window: Int
    private var expected: UInt16?
    private var waiting: [UInt16: RTPPacket] = [:]

    public init(window: Int = 16) {
        precondition(window >= 1, "window must hold at least one packet")
        self.window = window
    }

    /// Takes one packet; `release` receives the packets that are now in order.
    public mutating func push(_ packet: RTPPacket, _ release: (RTPPacket) -> Void) {
        guard let next = expected else {
            expected = packet.sequenceNumber &+ 1
            release(packet)
            return
        }
        let distance = packet.sequenceNumber &- next
        if distance >= 0x8000 {
            release(packet)  // late or duplicate: the depacketizer counts and drops it
            return
        }
        if distance == 0 {
            expected = next &+ 1
            release(packet)
            drainInOrder(release)
            return
        }
        waiting[packet.sequenceNumber] = packet
        // Too far ahead, or the window is full: give up on the missing packets up to the oldest one held.
        while let oldest = oldestWaiting(), waiting.count >= window || Int(packet.sequenceNumber &- expected!) >= window {
            expected = oldest
            drainInOrder(release)
            if waiting.isEmpty { break }
        }
    }

    /// Releases everything held, in order (end of stream).
    public mutating func flush(_ release: (RTPPacket) -> Void) {
        while let oldest = oldestWaiting() {
            expected = oldest
            drainInOrder(release)
        }
    }

    private mutating func drainInOrder(_ release: (RTPPacket) -> Void) {
        while let next = expected, let packet = waiting.removeValue(forKey: next) {
            expected = next &+ 1
            release(packet)
        }
    }

    private func oldestWaiting() -> UInt16? {
        guard let next = expected else { return nil }
        return waiting.keys.min { ($0 &- next) < ($1 &- next) }
    }
}
