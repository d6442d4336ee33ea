@testable import MediaSecurity
import Testing

/// The bound on the streams an inbound libsrtp session keeps: the SSRC unused the longest goes first.
@Suite struct SRTPStreamRosterTests {
    @Test func theLeastRecentlyUsedSSRCGoesOnceTheRosterIsFull() {
        var roster = SRTPStreamRoster()
        for ssrc in UInt32(0)..<UInt32(SRTPStreamRoster.capacity) { #expect(roster.use(ssrc) == nil) }
        #expect(roster.count == SRTPStreamRoster.capacity)
        // Using 0 again makes 1 the oldest.
        #expect(roster.use(0) == nil)
        #expect(roster.use(100) == 1)
        #expect(roster.use(101) == 2)
        #expect(roster.count == SRTPStreamRoster.capacity)
    }

    /// Video, RTX and audio interleaved, as a browser sends them, never evict one another, whatever else came.
    @Test func aFewSSRCsInTurnStayWhileAFloodOfNewOnesPasses() {
        var roster = SRTPStreamRoster()
        var evicted: [UInt32] = []
        for round in UInt32(0)..<1000 {
            for ssrc: UInt32 in [0xA, 0xB, 0xC] { if let gone = roster.use(ssrc) { evicted.append(gone) } }
            if let gone = roster.use(0x1000 + round) { evicted.append(gone) }
        }
        #expect(!evicted.contains(0xA) && !evicted.contains(0xB) && !evicted.contains(0xC))
        #expect(evicted.count == 1000 - (SRTPStreamRoster.capacity - 3))
        #expect(roster.count == SRTPStreamRoster.capacity)
    }
}
