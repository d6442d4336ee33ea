import Glibc
@testable import Pipeline
import NIOConcurrencyHelpers
import Testing

/// The decode threads and libsrt's listeners run on threads of their own, named for top -H and perf.
@Suite struct DedicatedThreadTests {
    /// The calling thread's name as the kernel has it (what top -H and perf show).
    static func threadName() -> String {
        let descriptor = open("/proc/thread-self/comm", O_RDONLY)
        guard descriptor >= 0 else { return "(unreadable)" }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = read(descriptor, &buffer, buffer.count)
        guard count > 0 else { return "(unreadable)" }
        return String(decoding: buffer[..<count], as: UTF8.self).trimmingCharacters(in: "\n")
    }

    /// What a body saw of the thread it ran on.
    struct Seen: Sendable {
        var name: String
        var onCallersThread: Bool
    }

    /// Runs `body`'s look at its thread on a dedicated thread named `name`, and waits for what it saw.
    static func look(named name: String) async -> Seen {
        // The caller's thread is alive while it waits, so no new thread can have its id.
        let caller = pthread_self()
        return await withCheckedContinuation { continuation in
            runOnDedicatedThread(named: name) {
                continuation.resume(returning: Seen(name: threadName(), onCallersThread: pthread_equal(pthread_self(), caller) != 0))
            }
        }
    }

    // Ten minutes, for a hang only: an async test also waits for a thread of the shared pool, which the long
    // synchronous tests of a full run may hold for a minute.
    @Test(.timeLimit(.minutes(10))) func theBodyRunsOnANewThreadWithTheGivenName() async {
        let seen = await Self.look(named: "decode-desk")
        #expect(seen.name == "decode-desk")
        #expect(!seen.onCallersThread)
    }

    /// The kernel keeps 15 characters of a thread's name: the name is cut there, not refused.
    @Test(.timeLimit(.minutes(10))) func aLongNameIsCutToFifteenCharacters() async {
        let seen = await Self.look(named: "decode-a-very-long-stream-name")
        #expect(seen.name == "decode-a-very-l", "\(seen.name)")
        #expect(seen.name.utf8.count == 15)
    }

    /// State made for the thread alone (not Sendable) is handed over and used there; it comes back only through
    /// what the body chooses to send.
    @Test(.timeLimit(.minutes(10))) func nonSendableStateIsHandedToTheThread() async {
        final class Tally { var values: [Int] = [] }
        let total = await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
            let tally = Tally()
            tally.values = [1, 2, 3]
            runOnDedicatedThread(named: "tally") {
                tally.values.append(4)
                continuation.resume(returning: tally.values.reduce(0, +))
            }
        }
        #expect(total == 10)
    }

    /// Each body has a thread of its own, never a place in a shared pool: eight bodies that each block until all
    /// eight have started all get through (run by a pool of fewer threads they would wait forever, and the time
    /// limit would fail the test).
    @Test(.timeLimit(.minutes(10))) func bodiesThatBlockDoNotHoldEachOtherBack() async {
        let count = 8
        let barrier = Barrier(count: count)
        let names = NIOLockedValueBox<[String]>([])
        let all: [String] = await withCheckedContinuation { continuation in
            for index in 0..<count {
                runOnDedicatedThread(named: "blocker-\(index)") {
                    barrier.wait()
                    let name = Self.threadName()
                    let done: [String]? = names.withLockedValue { names in
                        names.append(name)
                        return names.count == count ? names : nil
                    }
                    if let done { continuation.resume(returning: done) }
                }
            }
        }
        #expect(all.sorted() == (0..<count).map { "blocker-\($0)" }.sorted())
    }
}

/// A pthread barrier shared by the bodies; freed after the last body has let go of it.
private final class Barrier: @unchecked Sendable {
    private let barrier = UnsafeMutablePointer<pthread_barrier_t>.allocate(capacity: 1)

    init(count: Int) { pthread_barrier_init(barrier, nil, UInt32(count)) }

    deinit {
        pthread_barrier_destroy(barrier)
        barrier.deallocate()
    }

    func wait() { _ = pthread_barrier_wait(barrier) }
}
