import Bitstream
import Testing

/// Source validation and the reorder window together, as `RTPReceiver` runs them: packets in as they come, out in
/// sequence order, one source at a time.
@Suite struct RTPPacketOrderTests {
    static func packet(_ sequence: UInt16, ssrc: UInt32 = 0x1234) -> RTPPacket {
        RTPPacket(marker: true, payloadType: 96, sequenceNumber: sequence, timestamp: 3000, ssrc: ssrc, payload: [0x41][...])
    }

    static func run(_ packets: [RTPPacket], window: Int = 8, authenticated: Bool = false, flush: Bool = true) -> [String] {
        var order = RTPPacketOrder(reorderWindow: window, authenticatedSources: authenticated)
        var out: [String] = []
        let collect: (RTPOrderedEvent) -> Void = { event in
            switch event {
            case .packet(let packet): out.append("\(packet.sequenceNumber)")
            case .sourceChanged(let ssrc, let restarted): out.append("source \(ssrc)\(restarted ? " restarted" : "")")
            case .discarded(let reason): out.append("discarded \(reason.rawValue)")
            }
        }
        for packet in packets { order.push(packet, collect) }
        if flush { order.flush(collect) }
        return out
    }

    @Test func packetsComeOutInSequenceOrderWithinTheWindow() {
        #expect(Self.run((1...10).map { Self.packet($0) }) == (1...10).map { "\($0)" })
        // Overtaken by up to 3: put back in order.
        let shuffled: [UInt16] = [1, 2, 5, 3, 4, 8, 6, 7, 9, 10]
        #expect(Self.run(shuffled.map { Self.packet($0) }) == (1...10).map { "\($0)" })
    }

    /// A missing packet is given up on once the window is full; the rest come out (the depacketizer sees the gap).
    @Test func aMissingPacketIsLeftBehindAndTheRestComeOut() {
        let output = Self.run(([1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14] as [UInt16]).map { Self.packet($0) }, window: 4)
        #expect(output == ([1, 2, 3] + Array(5...14)).map { "\($0)" })
    }

    /// A restarted sender (a new SSRC) is a new source once two of its packets follow each other: what the old one
    /// left is handed out first, then the change, then the new one's from its own first packet.
    @Test func aNewSourceReplacesTheOldOne() {
        let old = [1, 2, 4].map { Self.packet($0, ssrc: 7) }
        let new = (900...903).map { Self.packet($0, ssrc: 8) }
        #expect(Self.run(old + new) == ["1", "2", "4", "source 8", "900", "901", "902", "903"])
    }

    /// Where the transport authenticated the sender (SRTP), its new SSRC is its new source at its first packet.
    @Test func anAuthenticatedSourceNeedsNoProbation() {
        #expect(Self.run([Self.packet(1, ssrc: 7), Self.packet(50, ssrc: 8)], authenticated: true, flush: false) == ["1", "source 8", "50"])
        #expect(Self.run([Self.packet(1, ssrc: 7), Self.packet(50, ssrc: 8)], flush: false) == ["discarded probation"],
                "where anyone may send, a lone packet never passes probation")
    }

    /// A stranger's lone packets never pass probation: discarded once replaced, nothing of theirs comes out.
    @Test func strangersLonePacketsAreDiscarded() {
        let output = Self.run([Self.packet(1), Self.packet(2), Self.packet(70, ssrc: 9), Self.packet(3), Self.packet(90, ssrc: 10), Self.packet(4)])
        #expect(output == ["1", "2", "3", "discarded other_source", "4"])
    }

    /// The sender goes: what probation and the window hold comes out in order.
    @Test func theEndHandsOnWhatIsHeld() {
        #expect(Self.run([Self.packet(1)], flush: false).isEmpty)
        #expect(Self.run([Self.packet(1)]) == ["1"])
        #expect(Self.run([1, 2, 5, 4].map { Self.packet($0) }) == ["1", "2", "4", "5"])
    }
}
