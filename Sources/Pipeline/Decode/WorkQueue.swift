import Foundation
import SharedFrames

/// A blocking FIFO between the network event loop (producer) and a stream's decode thread (consumer).
/// It counts the bytes waiting in it: the listener stops reading from its socket above a high-water mark
/// (`SenderHandler`), and TCP flow control then holds the sender back, so a decoder slower than the network never
/// makes memory grow without bound.
final class WorkQueue<Item: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    /// Taken items are set to nil at once: a byte array left here would stay referenced and could not be reused.
    private var items: [(item: Item?, bytes: Int)] = []
    private var head = 0
    private var queuedBytes = 0

    /// Adds an item; returns the bytes now waiting.
    @discardableResult
    func push(_ item: Item, bytes: Int = 0) -> Int {
        condition.lock()
        items.append((item, bytes))
        queuedBytes += bytes
        let waiting = queuedBytes
        condition.signal()
        condition.unlock()
        return waiting
    }

    var waitingBytes: Int {
        condition.lock()
        defer { condition.unlock() }
        return queuedBytes
    }

    /// Waits for the next item; returns it with the bytes still waiting after it.
    func pop() -> (item: Item, remainingBytes: Int) {
        pop(deadline: nil)!
    }

    /// Waits for the next item until `deadline` (CLOCK_MONOTONIC nanoseconds; nil waits for ever); nil when the
    /// deadline passed with the queue still empty.
    func pop(deadline: UInt64?) -> (item: Item, remainingBytes: Int)? {
        condition.lock()
        defer { condition.unlock() }
        while head == items.count {
            guard let deadline else {
                condition.wait()
                continue
            }
            let now = MonotonicClock.nanoseconds()
            if now >= deadline { return nil }
            // NSCondition only takes wall-clock dates: the remaining monotonic time, from now.
            _ = condition.wait(until: Date(timeIntervalSinceNow: Double(deadline - now) / 1e9))
        }
        let entry = items[head]
        items[head].item = nil
        head += 1
        queuedBytes -= entry.bytes
        if head > 1024 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
        return (entry.item!, queuedBytes)
    }
}
