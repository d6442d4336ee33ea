import Bitstream
import StreamrecvTestSupport
import Testing

@Suite struct RTPReorderBufferTests {
    static func packet(_ sequence: UInt16) -> RTPPacket {
        RTPPacket(marker: false, payloadType: 96, sequenceNumber: sequence, timestamp: 0, ssrc: 1, payload: [0x41][...])
    }

    @Test func reorderBufferPutsPacketsBackInOrder() {
        var buffer = RTPReorderBuffer(window: 4)
        var released: [UInt16] = []
        for sequence: UInt16 in [65534, 0, 65535, 1, 3, 4, 5, 6, 7, 2, 8] {
            buffer.push(Self.packet(sequence)) { released.append($0.sequenceNumber) }
        }
        buffer.flush { released.append($0.sequenceNumber) }
        // 65535 overtaken by 0 (across the wrap) is put back; 2 arrives after four later packets filled the window,
        // so the buffer moved on without it and releases it late (the depacketizer drops it as late).
        #expect(released == [65534, 65535, 0, 1, 3, 4, 5, 6, 7, 2, 8])
    }

    /// The ring of slots releases exactly what the plain dictionary it replaced did, on random arrivals: reordered,
    /// lost, duplicated, far jumps, across the 16-bit wrap, for windows from 1 to 1024 (a word of the ring's bits and more).
    @Test(arguments: [1, 2, 3, 8, 16, 63, 64, 65, 128, 256, 300, 1024])
    func releasesWhatTheDictionaryVersionDid(window: Int) {
        var generator = SeededGenerator(seed: UInt64(window))
        for _ in 0..<20 {
            var ring = RTPReorderBuffer(window: window)
            var reference = DictionaryReorderBuffer(window: window)
            var (fromRing, fromReference): ([UInt16], [UInt16]) = ([], [])
            var sequence = UInt16(truncatingIfNeeded: generator.next())
            for _ in 0..<2000 {
                let roll = generator.next() % 100
                let arriving: UInt16 = switch roll {
                case 0..<70: sequence &+ UInt16(generator.next() % UInt64(min(window + 2, 40)))  // a little ahead
                case 70..<80: sequence &- UInt16(generator.next() % 50)  // late or a duplicate
                case 80..<82: sequence &+ UInt16(generator.next() % 5000)  // a far jump
                default: sequence
                }
                if roll >= 82 || generator.next() % 3 == 0 { sequence &+= 1 }
                ring.push(Self.packet(arriving)) { fromRing.append($0.sequenceNumber) }
                reference.push(Self.packet(arriving)) { fromReference.append($0.sequenceNumber) }
            }
            ring.flush { fromRing.append($0.sequenceNumber) }
            reference.flush { fromReference.append($0.sequenceNumber) }
            #expect(fromRing == fromReference)
        }
    }
}

/// The reorder buffer as it was before the ring (a dictionary, the oldest found by a scan of its keys): the reference.
private struct DictionaryReorderBuffer {
    let window: Int
    var expected: UInt16?
    var waiting: [UInt16: RTPPacket] = [:]

    mutating func push(_ packet: RTPPacket, _ release: (RTPPacket) -> Void) {
        guard let next = expected else {
            expected = packet.sequenceNumber &+ 1
            release(packet)
            return
        }
        let distance = packet.sequenceNumber &- next
        if distance >= 0x8000 { return release(packet) }
        if distance == 0 {
            expected = next &+ 1
            release(packet)
            drainInOrder(release)
            return
        }
        waiting[packet.sequenceNumber] = packet
        while let oldest = oldestWaiting(), waiting.count >= window || Int(packet.sequenceNumber &- expected!) >= window {
            expected = oldest
            drainInOrder(release)
            if waiting.isEmpty { break }
        }
    }

    mutating func flush(_ release: (RTPPacket) -> Void) {
        while let oldest = oldestWaiting() {
            expected = oldest
            drainInOrder(release)
        }
    }

    mutating func drainInOrder(_ release: (RTPPacket) -> Void) {
        while let next = expected, let packet = waiting.removeValue(forKey: next) {
            expected = next &+ 1
            release(packet)
        }
    }

    func oldestWaiting() -> UInt16? {
        guard let next = expected else { return nil }
        return waiting.keys.min { ($0 &- next) < ($1 &- next) }
    }
}
