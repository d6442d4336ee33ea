@testable import Pipeline
import Testing

/// An event that happens once and that any number of tasks await, before or after it.
struct OneShotSignalTests {
    /// The limit catches a hang, not slowness: in a full run on 2 cores the waiters' tasks may wait minutes for a
    /// thread of the cooperative pool that other suites' blocking tests hold (307 s once), as DedicatedThreadTests say.
    @Test(.timeLimit(.minutes(10))) func waitersBeforeAndAfterTheFireAllReturn() async {
        let signal = OneShotSignal()
        let early = (0..<5).map { _ in Task { await signal.wait() } }
        // Let the early waiters get to their wait; a waiter that comes after the fire returns at once anyway.
        try? await Task.sleep(for: .milliseconds(50))
        signal.fire()
        for waiter in early { await waiter.value }
        await signal.wait()
        signal.fire()  // a second fire changes nothing
        await signal.wait()
    }
}
