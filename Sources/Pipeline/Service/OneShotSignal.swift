import NIOConcurrencyHelpers

/// An event that happens once (a stream became ready, a stop was asked for) and that any number of tasks await.
/// Waiters that arrive after it fired return at once.
final class OneShotSignal: Sendable {
    private enum State {
        case waiting([CheckedContinuation<Void, Never>])
        case fired
    }

    private let state = NIOLockedValueBox(State.waiting([]))

    func fire() {
        let waiters = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            guard case .waiting(let waiters) = state else { return [] }
            state = .fired
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let fired = state.withLockedValue { state -> Bool in
                guard case .waiting(var waiters) = state else { return true }
                waiters.append(continuation)
                state = .waiting(waiters)
                return false
            }
            if fired { continuation.resume() }
        }
    }
}
