import Bitstream
@testable import Pipeline
import Testing

/// srt://'s PTS, extended past MPEG-TS's 33 bits.
@Suite struct TransportStreamIngestTests {
    @Test func ptsIsExtendedPastItsWrapAndNeverTraps() {
        var ingest = TransportStreamIngest()
        let period: Int64 = 1 << 33
        #expect(ingest.unwrap(period - 3000) == period - 3000)
        #expect(ingest.unwrap(0) == period, "the wrap continues upward")
        #expect(ingest.unwrap(3000) == period + 3000)
        #expect(ingest.unwrap(period - 1000) == period - 1000, "a step back over the wrap goes back")
        // A program stepping by just under half a period each packet: every step is taken forward (the extended
        // value wanders upward by 2^32 a packet, which is why the arithmetic wraps instead of trapping).
        var walker = TransportStreamIngest()
        let step = period / 2 - 1
        var previous = walker.unwrap(0)
        for index in 1...10_000 {
            let next = walker.unwrap(Int64(index) * step % period)
            #expect(next == previous + step)
            previous = next
        }
    }
}
