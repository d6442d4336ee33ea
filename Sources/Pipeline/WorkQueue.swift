import Foundation

/// A blocking FIFO between the network event loop (producer) and a stream's decode thread (consumer).
/// Unbounded in items but the producer counts bytes: `ByteBudget` in StreamWorker stops reading from the socket
/// when the decode thread falls behind, so memory stays bounded by TCP flow control.
final class WorkQueue<Item>: @unchecked Sendable {
    private let condition = NSCondition()
    private var items: [Item] = []
    private var head = 0

    func push(_ item: Item) {
        condition.lock()
        items.append(item)
        condition.signal()
        condition.unlock()
    }

    /// Waits for the next item.
    func pop() -> Item {
        condition.lock()
        defer { condition.unlock() }
        while head == items.count { condition.wait() }
        let item = items[head]
        head += 1
        if head > 1024 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
        return item
    }
}
