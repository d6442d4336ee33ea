import CFrameRing
import FrameFormats
import Glibc
import Synchronization

/// One frame as read from a slot: its fields, and its pixels copied out (the copy is what makes a seqlock read
/// safe: it is checked after copying).
public struct FrameInfo: Sendable, Equatable {
    public var sequence: UInt64
    public var generation: UInt64
    public var layout: FrameLayout
    public var flags: FrameFlags
    public var pts: Int64
    public var timeFirstByte: UInt64
    public var timeAccessUnitComplete: UInt64
    public var timeDecoded: UInt64
    public var timePublished: UInt64
    public var sampleAspectRatio: (UInt32, UInt32) { (sarNumerator, sarDenominator) }
    public var sarNumerator: UInt32
    public var sarDenominator: UInt32
    public var colorRange: UInt8
    public var rotation: Int32
    /// The rectangle to display: x, y, width, height.
    public var visible: [Int]
}

/// The ring's header as a reader sees it.
public struct RingStatus: Sendable {
    public var streamName: String
    public var codec: String
    /// What the header says; see `writerAlive` for whether anyone still writes it.
    public var state: StreamState
    public var writerPID: UInt32
    public var writerEpoch: UInt64
    public var generation: UInt64
    public var latestSequence: UInt64
    public var slotCount: Int
    public var slotCapacity: Int
    public var maxWidth: Int
    public var maxHeight: Int
    public var counters: RingCounters
    /// Ticks per second of `FrameInfo.pts`; 0 when pts is the access-unit index.
    public var ptsClockRate: UInt32 = 0
    /// rtsp:// sources: where the client stands ("rtsp playing h264 over UDP", "rtsp cannot connect: …"); "" otherwise.
    public var sourceStatus = ""
    /// CLOCK_MONOTONIC time the newest frame was published (0 when none, or when it is being overwritten).
    public var latestPublishedNanoseconds: UInt64
    /// Bytes of the shared-memory object.
    public var objectSize: Int = 0
    /// The user who created the object (only objects of the daemon's user are rings it writes).
    public var ownerUID: UInt32 = 0
    /// Whether a writer holds the ring now: false after the daemon died, whatever `state` says.
    public var writerAlive = true
}

public enum ReadOutcome: Sendable, Equatable {
    case frame(FrameInfo)
    /// The slot already holds a newer frame: the reader fell more than `slot_count` frames behind.
    case lapped(oldestAvailable: UInt64)
    /// The frame is not published yet.
    case notYetPublished
    /// The slot changed while it was copied; the copy was discarded.
    case torn
    /// The slot holds something that cannot be a valid frame (a damaged or foreign object).
    case invalid
}

/// What `FrameRingReader.withFrame` found; `.frame` carries the closure's result, valid because the slot was not
/// overwritten while the closure ran.
public enum ZeroCopyOutcome<Result> {
    case frame(FrameInfo, Result)
    case lapped(oldestAvailable: UInt64)
    case notYetPublished
    case torn
    case invalid
}

public enum AttachError: Error, CustomStringConvertible, Sendable {
    case sharedMemory(SharedMemoryError)
    case notARing(name: String, reason: String)

    public var description: String {
        switch self {
        case .sharedMemory(let error): return error.description
        case .notARing(let name, let reason): return "/dev/shm/\(name) is not a streamrecv frame ring: \(reason)"
        }
    }
}

/// The reading side of a frame ring: maps it read-only, never writes, never slows the writer. The header is
/// untrusted (anyone can create an object under /dev/shm): its geometry is validated once against the mapping
/// and only the validated values are used; each slot is checked before its planes are; an object that shrinks
/// under the mapping turns into `.invalid` instead of SIGBUS. Follows the writer across restarts and across
/// moves to a new object (`reattachIfReplaced()`).
///
/// Safe to share between threads: the object it reads is swapped whole under a lock (a call that began on the old
/// one finishes on it, which stays mapped while the call holds it), and the counters are atomic.
public final class FrameRingReader: Sendable {
    public let shmName: String
    private let attachment: Mutex<RingAttachment>
    private let lapped = Atomic<UInt64>(0)
    private let torn = Atomic<UInt64>(0)
    /// Frames skipped because the writer lapped this reader (every caller of `next` together).
    public var lappedFrames: UInt64 { lapped.load(ordering: .relaxed) }
    /// Reads retried because the slot was being written.
    public var tornReads: UInt64 { torn.load(ordering: .relaxed) }

    /// Whether the object being read shrank under this reader (its owner or root truncated it): it reads as zeros
    /// from then on, and its frames are invalid. For saying why a frame was, rather than calling the ring forged.
    public var objectShrank: Bool { current.object.faulted }

    /// The object and its geometry now: one consistent pair for the whole of a call.
    private var current: RingAttachment { attachment.withLock { $0 } }

    public init(shmName: String) throws(AttachError) {
        self.shmName = shmName
        attachment = Mutex(try Self.attach(shmName))
    }

    private static func attach(_ name: String) throws(AttachError) -> RingAttachment {
        let object: SharedMemoryObject
        do { object = try SharedMemoryObject.openForReading(name: name) } catch { throw .sharedMemory(error) }
        let result = object.withMapping { base in
            RingGeometry.validated(base.assumingMemoryBound(to: streamrecv_shm_header.self), mappedSize: object.size)
        }
        if object.faulted { throw .notARing(name: name, reason: "it shrank while being read") }
        switch result {
        case .success(let geometry): return RingAttachment(object: object, geometry: geometry)
        case .failure(let defect): throw .notARing(name: name, reason: defect.reason)
        }
    }

    /// Maps the object now behind the name if it is not the one we have (the daemon re-created or replaced it).
    /// Returns true when the reader's object changed (here, or meanwhile by another caller of a shared reader).
    @discardableResult
    public func reattachIfReplaced() -> Bool {
        let seen = current.object.identity
        guard case .object(let identity) = SharedMemoryObject.lookup(shmName), identity != seen,
              let replacement = try? Self.attach(shmName) else { return false }
        // Only over the object looked at: a caller that was slower must not put back an older one.
        return attachment.withLock { attached in
            if attached.object.identity == seen { attached = replacement }
            return true
        }
    }

    /// Size of the mapped object in bytes.
    public var objectSize: Int { current.object.size }

    /// Whether a writer holds the ring now (its lock; a daemon killed with SIGKILL holds none). Falls back to the
    /// header's pid where the lock cannot be tested.
    public var writerIsAlive: Bool { current.writerIsAlive }
    public var status: RingStatus { current.status }
    public var latestSequence: UInt64 { current.latestSequence }
    /// The state the header says now (`.replaced`: the stream moved to a new object).
    public var state: StreamState { current.state }
    /// The futex word's current value, to pass to `wait(seen:timeoutNanoseconds:)`.
    public var wakeWord: UInt32 { current.wakeWord }

    /// Sleeps until the writer publishes or changes state after `seen` was read, or the timeout passes.
    /// Returns false on timeout.
    @discardableResult
    public func wait(seen: UInt32, timeoutNanoseconds: Int64) -> Bool { current.wait(seen: seen, timeoutNanoseconds: timeoutNanoseconds) }

    /// Copies frame `sequence` into `pixels` (resized as needed) if it is still in the ring.
    public func read(sequence: UInt64, into pixels: inout [UInt8]) -> ReadOutcome {
        if state == .replaced { reattachIfReplaced() }
        return Self.read(sequence: sequence, into: &pixels, from: current)
    }

    private static func read(sequence: UInt64, into pixels: inout [UInt8], from attached: RingAttachment) -> ReadOutcome {
        var olderInSlot = false
        return read(sequence: sequence, into: &pixels, from: attached, olderInSlot: &olderInSlot)
    }

    private static func read(
        sequence: UInt64, into pixels: inout [UInt8], from attached: RingAttachment, olderInSlot: inout Bool
    ) -> ReadOutcome {
        read(sequence: sequence, from: attached, olderInSlot: &olderInSlot) { _, bytes in
            if pixels.count != bytes.count { pixels = [UInt8](repeating: 0, count: bytes.count) }
            pixels.withUnsafeMutableBytes { $0.copyMemory(from: bytes) }
        }
    }

    /// Runs `body` on frame `sequence` where it lies; `.frame` only when the writer left the slot alone meanwhile.
    private static func read(
        sequence: UInt64, from attached: RingAttachment, olderInSlot: inout Bool,
        _ body: (FrameInfo, UnsafeRawBufferPointer) -> Void
    ) -> ReadOutcome {
        let outcome = attached.withFrame(sequence: sequence, olderInSlot: &olderInSlot, body)
        switch outcome {
        case .frame(let info, _): return .frame(info)
        case .lapped(let oldest): return .lapped(oldestAvailable: oldest)
        case .notYetPublished: return .notYetPublished
        case .torn: return .torn
        case .invalid: return .invalid
        }
    }

    /// Frame `sequence` without a copy: `body` gets the frame's metadata and its pixel bytes in the ring itself
    /// (planes at `info.layout`'s offsets). The bytes are only valid inside `body`, and only if the outcome is
    /// `.frame`: the writer never waits, so it may overwrite the slot while `body` runs; that is detected after
    /// `body` returns, and its result is then discarded (`.torn`). `body` must not keep the pointer.
    public func withFrame<Result>(
        sequence: UInt64, _ body: (FrameInfo, UnsafeRawBufferPointer) throws -> Result
    ) rethrows -> ZeroCopyOutcome<Result> {
        // The stream moved to a new object since the last read: read from that one.
        if state == .replaced { reattachIfReplaced() }
        return try current.withFrame(sequence: sequence, body)
    }

    public enum NextOutcome: Sendable, Equatable {
        case frame(FrameInfo)
        case timedOut
        case stopped
        /// The slot of frame `sequence` does not hold a valid frame (a damaged or forged ring), and no writer put
        /// a new ring in its place.
        case invalidFrame(sequence: UInt64)
    }

    /// The frame after `previous`, waiting up to `timeoutNanoseconds` for it. Skips ahead (counting
    /// `lappedFrames`) when the writer lapped us; retries torn reads; follows a restarted daemon.
    public func next(after previous: UInt64, into pixels: inout [UInt8], timeoutNanoseconds: Int64, stopWhenStopped: Bool = false) -> NextOutcome {
        var skipped: UInt64 = 0
        return next(after: previous, into: &pixels, timeoutNanoseconds: timeoutNanoseconds, stopWhenStopped: stopWhenStopped, skipped: &skipped)
    }

    /// `next`, adding the frames this call skipped to `skipped`: per caller, where `lappedFrames` counts every
    /// caller of a shared reader together.
    public func next(
        after previous: UInt64, into pixels: inout [UInt8], timeoutNanoseconds: Int64, stopWhenStopped: Bool, skipped: inout UInt64
    ) -> NextOutcome {
        nextBorrowed(after: previous, timeoutNanoseconds: timeoutNanoseconds, stopWhenStopped: stopWhenStopped, skipped: &skipped) { _, bytes in
            if pixels.count != bytes.count { pixels = [UInt8](repeating: 0, count: bytes.count) }
            pixels.withUnsafeMutableBytes { $0.copyMemory(from: bytes) }
        }
    }

    /// `next` without the copy: `body` gets the frame's pixels where they lie in the ring, as `withFrame` does, and
    /// may run more than once: when the writer reuses the slot while `body` runs, what it made is thrown away by
    /// running it again on the frame read next. On `.frame`, the last run of `body` saw that frame whole. `body`
    /// must not keep the pointer, nor act on what it read (write it out, say) before this returns.
    public func nextBorrowed(
        after previous: UInt64, timeoutNanoseconds: Int64, stopWhenStopped: Bool, skipped: inout UInt64,
        _ body: (FrameInfo, UnsafeRawBufferPointer) -> Void
    ) -> NextOutcome {
        // Frame 0 does not exist: after a (forged) latest of 2^64 - 1 the next frame is looked for from 1.
        var wanted = max(previous &+ 1, 1)
        let deadline = MonotonicClock.nanoseconds() + UInt64(max(0, timeoutNanoseconds))
        var consecutiveTorn = 0
        var lappedByOlderSlots = 0
        var laps = 0
        var olderInSlot = false
        // One object per round: its futex word, its slots and its header (a shared reader's other callers may
        // move it on meanwhile; this round then finishes on the old one, and the next takes the new one).
        var attached = current
        func moveOn() -> Bool {
            guard reattachIfReplaced() else { return false }
            attached = current
            return true
        }
        while true {
            if attached.state == .replaced, moveOn() { continue }
            let seen = attached.wakeWord
            switch Self.read(sequence: wanted, from: attached, olderInSlot: &olderInSlot, body) {
            case .frame(let info):
                return .frame(info)
            case .lapped(let oldest):
                // Always ahead (RingAttachment.withFrame refuses a slot that would send us back). Lapped because
                // the slot holds an older frame happens once when a writer moves to a new object; round after
                // round it is a forged ring walking us forward a frame at a time, scanning every slot each step.
                if olderInSlot { lappedByOlderSlots += 1 }
                guard oldest > wanted, lappedByOlderSlots <= 16 else { return .invalidFrame(sequence: wanted) }
                // Wrapping: a forged latest_sequence can make the count of skipped frames as large as it likes.
                lapped.wrappingAdd(oldest &- wanted, ordering: .relaxed)
                skipped &+= oldest &- wanted
                wanted = oldest
                // A real writer laps a reader a few times in a row at most; a forged ring (every slot "being
                // written", its latest moving on) can do it for ever: from the 64th lap the reader backs off and
                // keeps its deadline.
                laps += 1
                if laps > 64 {
                    usleep(1000)
                    if MonotonicClock.nanoseconds() >= deadline { return .timedOut }
                }
            case .torn:
                torn.add(1, ordering: .relaxed)
                consecutiveTorn += 1
                // A slot stays "being written" only if its writer died mid-write: stop spinning, and give up
                // once the writer is gone.
                if consecutiveTorn > 100 {
                    usleep(1000)
                    if consecutiveTorn > 2000 && !attached.writerIsAlive { return .stopped }
                    if MonotonicClock.nanoseconds() >= deadline { return .timedOut }
                }
            case .invalid:
                // A damaged or shrunk object: the writer puts a new one under the name; wait for it a little.
                if moveOn() { continue }
                if MonotonicClock.nanoseconds() >= deadline || !attached.writerIsAlive { return .invalidFrame(sequence: wanted) }
                usleep(10_000)
            case .notYetPublished:
                let latest = attached.latestSequence
                // The writer restarted with a fresh object (sequence numbers began again).
                if latest &+ 1 < wanted { wanted = latest &+ 1 }
                let state = attached.state
                if state == .replaced && moveOn() { continue }
                if stopWhenStopped && state == .stopped { return .stopped }
                let now = MonotonicClock.nanoseconds()
                if now >= deadline { return .timedOut }
                let slice = min(Int64(deadline - now), state == .replaced ? 10_000_000 : 200_000_000)
                if !attached.wait(seen: seen, timeoutNanoseconds: slice) { _ = moveOn() }
            }
        }
    }
}
