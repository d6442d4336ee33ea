import Glibc
import SharedFrames

/// A blocking FIFO between the network event loop (producer) and a stream's decode thread (consumer).
/// It counts the bytes waiting in it: the listener stops reading from its socket above a high-water mark
/// (`SenderHandler`), and TCP flow control then holds the sender back, so a decoder slower than the network never
/// makes memory grow without bound. A pthread mutex and a condition variable on CLOCK_MONOTONIC (a wall-clock
/// step must not stretch or cut a timed wait); everything else is touched only with the mutex held.
// @unchecked: every stored property but the two pthread objects is touched only with `mutex` held (Swift's `Mutex`
// has no condition variable to wait on).
final class WorkQueue<Item: Sendable>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// Taken items are set to nil at once: a byte array left here would stay referenced and could not be reused.
    private var items: [(item: Item?, bytes: Int)] = []
    private var head = 0
    private var queuedBytes = 0

    init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    private func withLock<Result>(_ body: () -> Result) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }

    /// Adds an item; returns the bytes now waiting.
    @discardableResult
    func push(_ item: Item, bytes: Int = 0) -> Int {
        withLock {
            items.append((item, bytes))
            queuedBytes += bytes
            pthread_cond_signal(condition)
            return queuedBytes
        }
    }

    var waitingBytes: Int { withLock { queuedBytes } }

    /// Waits for the next item; returns it with the bytes still waiting after it.
    func pop() -> (item: Item, remainingBytes: Int) {
        pop(waitingAtMost: nil)!
    }

    /// Waits for the next item at most `timeout` nanoseconds (nil waits for ever); nil when that passed with the
    /// queue still empty. The wait is measured on CLOCK_MONOTONIC here, whatever clock the caller decides by.
    func pop(waitingAtMost timeout: UInt64?) -> (item: Item, remainingBytes: Int)? {
        let deadline = timeout.map { MonotonicClock.nanoseconds() &+ $0 }
        return withLock {
            while head == items.count {
                guard let deadline else {
                    pthread_cond_wait(condition, mutex)
                    continue
                }
                if MonotonicClock.nanoseconds() >= deadline { return nil }
                var until = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
                _ = pthread_cond_timedwait(condition, mutex, &until)
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
}
