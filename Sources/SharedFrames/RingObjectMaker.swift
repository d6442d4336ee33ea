import CFrameRing
import Dispatch
import Glibc
import Synchronization

/// A new ring object being made on another thread. Reserving and pre-faulting every page of a large ring takes
/// seconds on a loaded machine (a 4K P010 ring of 32 slots is 760 MiB: 0.7 s here, 6 s on a busy one), and the
/// decode thread must go on taking packets meanwhile: a stalled decode thread drops datagrams and makes its sender
/// look gone. The writer starts one (`FrameRingWriter.requestObject`), keeps publishing into the object it has, and
/// installs this one once made (`installMadeObject`). Only the new object is touched here; naming it, copying
/// frames into it and telling readers stay on the writer's thread.
final class RingObjectMaker: Sendable {
    enum State {
        case making
        case made(SharedMemoryObject, RingGeometry)
        case failed(SharedMemoryError)
        /// The writer no longer wants it (closed, or wants another size): whatever is made is thrown away.
        case abandoned
        /// The writer has it.
        case taken
    }

    /// The frame size (bytes) the object's slots hold.
    let capacity: Int
    /// When it was started (CLOCK_MONOTONIC nanoseconds).
    let started: UInt64
    private let state = Mutex(State.making)
    /// Set once the making thread holds no reference to the object any more: the object holds the ring's write
    /// lock until its last reference goes, and a writer that takes it and closes at once must leave the lock free
    /// for the next one. Nothing is handed out before.
    private let threadDone = Atomic(false)
    private let finished = DispatchSemaphore(value: 0)

    /// Starts making an object for frames of `capacity` bytes on a thread of its own (seconds of page reservation
    /// would hold a worker of a shared pool). `delay`: tests stand in for a loaded machine, where reserving the
    /// pages is what takes long: the object is there, under its temporary name, all that time.
    init(capacity: Int, slots: Int, configuration: FrameRingConfiguration, delay: UInt64 = 0) {
        self.capacity = capacity
        started = MonotonicClock.nanoseconds()
        Self.detach { [self] in
            do {
                let outcome: Result<(SharedMemoryObject, RingGeometry), SharedMemoryError>
                do throws(SharedMemoryError) {
                    let made = try Self.makeObject(capacity: capacity, slots: slots, configuration: configuration)
                    if delay > 0 { Self.sleep(nanoseconds: delay) }
                    outcome = .success(made)
                } catch {
                    outcome = .failure(error)
                }
                record(outcome)
            }
            threadDone.store(true, ordering: .releasing)
            finished.signal()
        }
    }

    /// A made object nobody took (the writer dropped without closing) must not stay in /dev/shm.
    deinit {
        if case .made(let object, _) = state.withLock({ $0 }) { object.discard() }
    }

    private func record(_ outcome: consuming Result<(SharedMemoryObject, RingGeometry), SharedMemoryError>) {
        let unwanted: SharedMemoryObject? = state.withLock { state in
            switch (state, outcome) {
            case (.making, .success(let made)):
                state = .made(made.0, made.1)
                return nil
            case (.making, .failure(let error)):
                state = .failed(error)
                return nil
            case (_, .success(let made)):
                return made.0
            case (_, .failure):
                return nil
            }
        }
        unwanted?.discard()
    }

    /// Whether the making thread is done (made, failed, or thrown away) and holds nothing of it.
    var isFinished: Bool { threadDone.load(ordering: .acquiring) }

    /// Waits until `deadline` (CLOCK_MONOTONIC nanoseconds) at most for the object to be made.
    func wait(until deadline: UInt64) {
        let now = MonotonicClock.nanoseconds()
        guard deadline > now else { return }
        if finished.wait(timeout: .now() + .nanoseconds(Int(deadline - now))) == .success { finished.signal() }
    }

    /// The object once made (nil while it is being made); given out once.
    func take() -> Result<(object: SharedMemoryObject, geometry: RingGeometry), SharedMemoryError>? {
        guard isFinished else { return nil }
        return state.withLock { state in
            switch state {
            case .made(let object, let geometry):
                state = .taken
                return .success((object, geometry))
            case .failed(let error):
                state = .taken
                return .failure(error)
            case .making, .abandoned, .taken:
                return nil
            }
        }
    }

    /// The writer no longer wants it: removed at once if made, or as soon as it is.
    func abandon() {
        let unwanted: SharedMemoryObject? = state.withLock { state in
            defer { if case .making = state { state = .abandoned } }
            guard case .made(let object, _) = state else { return nil }
            state = .abandoned
            return object
        }
        unwanted?.discard()
    }

    /// A new object whose header holds the geometry (and nothing of the writer's yet), under a temporary name.
    static func makeObject(capacity: Int, slots: Int, configuration: FrameRingConfiguration)
        throws(SharedMemoryError) -> (SharedMemoryObject, RingGeometry)
    {
        let geometry = RingGeometry(slotCount: slots, slotCapacity: capacity)
        let object = try SharedMemoryObject.create(
            for: configuration.shmName, size: geometry.totalSize, mode: configuration.mode, group: configuration.group)
        object.withMapping { base in
            // Zero header and slot table; the magic, stored last by the writer, makes it valid.
            base.initializeMemory(as: UInt8.self, repeating: 0, count: geometry.slotDataOffset)
            geometry.write(into: RingPointers(base: base, geometry: geometry).header)
        }
        return (object, geometry)
    }

    /// Runs `body` on a new detached thread.
    private static func detach(_ body: @escaping @Sendable () -> Void) {
        let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(&thread, nil, { context in
            Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue().body()
            return nil
        }, context)
        guard created == 0 else {
            // No thread to be had (the process is at its limit): made here, as before there was a thread.
            Unmanaged<ThreadBody>.fromOpaque(context).takeRetainedValue().body()
            return
        }
        pthread_detach(thread)
    }

    private static func sleep(nanoseconds: UInt64) {
        var request = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        var remaining = timespec()
        while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
    }
}

/// What a maker's thread runs, handed to pthread_create as an opaque pointer.
private final class ThreadBody: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}
