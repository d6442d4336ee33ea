import Foundation
@testable import Pipeline
import SharedFrames
import Testing

/// The queue between the event loop and a decode thread: FIFO, the bytes waiting counted exactly (what the
/// listener's back-pressure reads), and a timed wait that ends empty-handed.
@Suite struct WorkQueueTests {
    @Test func itemsComeOutInOrderWithTheBytesStillWaiting() {
        let queue = WorkQueue<Int>()
        #expect(queue.push(1, bytes: 100) == 100)
        #expect(queue.push(2, bytes: 50) == 150)
        #expect(queue.push(3) == 150, "an item without bytes (an event) weighs nothing")
        #expect(queue.waitingBytes == 150)
        #expect(queue.pop() == (1, 50))
        #expect(queue.pop() == (2, 0))
        #expect(queue.pop() == (3, 0))
        #expect(queue.waitingBytes == 0)
    }

    @Test func aTimedWaitOnAnEmptyQueueEndsWithNothing() {
        let queue = WorkQueue<Int>()
        let started = MonotonicClock.nanoseconds()
        #expect(queue.pop(waitingAtMost: 20_000_000) == nil)
        #expect(MonotonicClock.nanoseconds() - started >= 20_000_000, "waited the time it was given")
        queue.push(7, bytes: 1)
        #expect(queue.pop(waitingAtMost: 0).map { $0.item } == 7, "an item waiting is taken even at the deadline")
    }

    /// A producer thread and a consumer thread: nothing lost, nothing reordered, the count back to zero (and the
    /// queue's storage compacted on the way: more than 1024 items pass).
    @Test func aProducerAndAConsumerOnTwoThreads() async {
        let queue = WorkQueue<Int>()
        let count = 20_000
        let producer = Thread {
            for index in 0..<count { queue.push(index, bytes: index % 7) }
        }
        producer.start()
        var expected = 0
        var outOfOrder = 0
        while expected < count {
            let (item, _) = queue.pop()
            if item != expected { outOfOrder += 1 }
            expected += 1
        }
        #expect(outOfOrder == 0)
        #expect(queue.waitingBytes == 0)
    }
}
