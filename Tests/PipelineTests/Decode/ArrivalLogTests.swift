@testable import Pipeline
import Testing

@Suite struct ArrivalLogTests {
    @Test func anAccessUnitIsDatedByTheChunkThatCarriedItsFirstByte() {
        var log = ArrivalLog()
        #expect(log.arrival(ofOffset: 0) == nil)
        log.record(offset: 0, time: 100)
        log.record(offset: 1000, time: 200, mediaTimestamp: 9000)
        log.record(offset: 5000, time: 300)
        #expect(log.arrival(ofOffset: 999)?.time == 100)
        #expect(log.arrival(ofOffset: 1000)?.time == 200 && log.arrival(ofOffset: 4999)?.mediaTimestamp == 9000)
        #expect(log.arrival(ofOffset: 1 << 40)?.time == 300)
        for index in 0..<10_000 { log.record(offset: 10_000 + Int64(index), time: 1000 + UInt64(index)) }
        // The oldest are forgotten; an offset older than all left gets the oldest known.
        #expect(log.arrival(ofOffset: 0).map { $0.time > 1000 } == true)
    }
}
