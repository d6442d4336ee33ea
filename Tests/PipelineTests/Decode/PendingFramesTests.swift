@testable import Pipeline
import Testing

@Suite struct PendingFramesTests {
    @Test func pendingFramesAreMatchedByPtsAndOldOnesForgotten() {
        var pending = PendingFrames()
        let frame = PendingFrame(timeFirstByte: 1, timeComplete: 2, keyframe: true, afterLoss: false)
        #expect(pending.add(frame) == 0 && pending.add(frame) == 1)
        pending.completed(1, at: 9)
        #expect(pending.take(1)?.timeComplete == 9 && pending.take(1) == nil)
        // Frames the decoder never returned do not pile up.
        for _ in 0..<2000 { _ = pending.add(frame) }
        #expect(pending.count <= 2 * Int(PendingFrames.horizon) + 1)
        #expect(pending.take(pending.nextPTS - 1) != nil && pending.take(0) == nil)
        pending.removeAll()
        #expect(pending.count == 0)
    }

    /// Entries the decoder will never return are counted.
    @Test func entriesFarBehindAFrameThatCameOutAreAbandonedAndCounted() {
        var pending = PendingFrames()
        let frame = PendingFrame(timeFirstByte: 1, timeComplete: 2, keyframe: false, afterLoss: false)
        for _ in 0..<50 { _ = pending.add(frame) }
        // Reordered output within the limit abandons nothing.
        #expect(pending.take(3) != nil && pending.take(1) != nil && pending.takeAbandoned() == 0)
        // A frame 40 access units later: entries 34 or more before it will never come out.
        #expect(pending.take(40) != nil)
        #expect(pending.takeAbandoned() == 4 && pending.takeAbandoned() == 0)  // 0, 2, 4, 5
        pending.removeAll()
        #expect(pending.takeAbandoned() == 50 - 3 - 4)
    }
}
