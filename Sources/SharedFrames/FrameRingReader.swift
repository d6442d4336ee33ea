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
    private struct Attachment: Sendable {
        var object: SharedMemoryObject
        var geometry: RingGeometry
    }
    private let attachment: Mutex<Attachment>
    private let lapped = Atomic<UInt64>(0)
    private let torn = Atomic<UInt64>(0)
    /// Frames skipped because the writer lapped this reader (every caller of `next` together).
    public var lappedFrames: UInt64 { lapped.load(ordering: .relaxed) }
    /// Reads retried because the slot was being written.
    public var tornReads: UInt64 { torn.load(ordering: .relaxed) }

    /// The object and its geometry now: one consistent pair for the whole of a call.
    private var current: (object: SharedMemoryObject, geometry: RingGeometry) {
        let now = attachment.withLock { $0 }
        return (now.object, now.geometry)
    }

    public init(shmName: String) throws(AttachError) {
        self.shmName = shmName
        let (object, geometry) = try Self.attach(shmName)
        attachment = Mutex(Attachment(object: object, geometry: geometry))
    }

    private static func attach(_ name: String) throws(AttachError) -> (SharedMemoryObject, RingGeometry) {
        let object: SharedMemoryObject
        do { object = try SharedMemoryObject.openForReading(name: name) } catch { throw .sharedMemory(error) }
        let result = object.withMapping { base in
            RingGeometry.validated(base.assumingMemoryBound(to: streamrecv_shm_header.self), mappedSize: object.size)
        }
        if object.faulted { throw .notARing(name: name, reason: "it shrank while being read") }
        switch result {
        case .success(let geometry): return (object, geometry)
        case .failure(let defect): throw .notARing(name: name, reason: defect.reason)
        }
    }

    /// Whether a writer holds the ring now (its lock; a daemon killed with SIGKILL holds none). Falls back to the
    /// header's pid where the lock cannot be tested.
    public var writerIsAlive: Bool {
        let (object, geometry) = current
        if let present = object.writerPresent { return present }
        let pid = object.withMapping { pid_t(bitPattern: RingPointers(base: $0, geometry: geometry).header.pointee.writer_pid) }
        return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM)
    }

    /// Maps the object now behind the name if it is not the one we have (the daemon re-created or replaced it).
    /// Returns true when it switched.
    @discardableResult
    public func reattachIfReplaced() -> Bool {
        guard case .object(let identity) = SharedMemoryObject.lookup(shmName), identity != current.object.identity,
              let replacement = try? Self.attach(shmName) else { return false }
        attachment.withLock { $0 = Attachment(object: replacement.0, geometry: replacement.1) }
        return true
    }

    /// Size of the mapped object in bytes.
    public var objectSize: Int { current.object.size }

    /// The header's advisory source status, read until two reads agree (the writer may be rewriting it).
    private static func sourceStatus(_ ring: RingPointers) -> String {
        var previous = CString.read(ring.header.pointee.source_status)
        for _ in 0..<4 {
            let again = CString.read(ring.header.pointee.source_status)
            if again == previous { return again }
            previous = again
        }
        return ""
    }

    public var status: RingStatus {
        let (object, geometry) = current
        return object.withMapping { base in
            let ring = RingPointers(base: base, geometry: geometry)
            let header = ring.header.pointee
            let latest = streamrecv_shm_load_u64(ring.headerField(\.latest_sequence, as: UInt64.self))
            var published: UInt64 = 0
            if latest > 0 {
                let slot = UnsafePointer(ring.slot(Int((latest - 1) % UInt64(geometry.slotCount))))
                let begin = streamrecv_shm_read_begin(slot)
                let time = slot.pointee.time_published_ns
                if slot.pointee.sequence == latest && streamrecv_shm_read_end(slot, begin) != 0 { published = time }
            }
            let state = streamrecv_shm_load_u32(ring.headerField(\.stream_state, as: UInt32.self))
            return RingStatus(
                streamName: CString.read(header.stream_name), codec: CString.read(header.codec),
                state: StreamState(rawValue: state) ?? .stopped,
                writerPID: header.writer_pid,
                writerEpoch: streamrecv_shm_load_u64(ring.headerField(\.writer_epoch, as: UInt64.self)),
                generation: streamrecv_shm_load_u64(ring.headerField(\.generation, as: UInt64.self)),
                latestSequence: latest,
                slotCount: geometry.slotCount, slotCapacity: geometry.slotDataCapacity,
                maxWidth: Int(header.max_width), maxHeight: Int(header.max_height), counters: ring.loadCounters(),
                ptsClockRate: header.pts_clock_rate, sourceStatus: Self.sourceStatus(ring),
                latestPublishedNanoseconds: published,
                objectSize: object.size, ownerUID: object.owner, writerAlive: writerIsAlive)
        }
    }

    public var latestSequence: UInt64 {
        let (object, geometry) = current
        return object.withMapping { streamrecv_shm_load_u64(RingPointers(base: $0, geometry: geometry).headerField(\.latest_sequence, as: UInt64.self)) }
    }

    /// The state the header says now (`.replaced`: the stream moved to a new object).
    public var state: StreamState {
        let (object, geometry) = current
        let raw = object.withMapping { streamrecv_shm_load_u32(RingPointers(base: $0, geometry: geometry).headerField(\.stream_state, as: UInt32.self)) }
        return StreamState(rawValue: raw) ?? .stopped
    }

    /// The futex word's current value, to pass to `wait(seen:timeoutNanoseconds:)`.
    public var wakeWord: UInt32 {
        let (object, geometry) = current
        return object.withMapping { streamrecv_shm_load_u32(RingPointers(base: $0, geometry: geometry).headerField(\.wake_word, as: UInt32.self)) }
    }

    /// Sleeps until the writer publishes or changes state after `seen` was read, or the timeout passes.
    /// Returns false on timeout.
    @discardableResult
    public func wait(seen: UInt32, timeoutNanoseconds: Int64) -> Bool {
        let (object, geometry) = current
        return object.withMapping { base in
            // A futex on a page the object no longer has fails with EFAULT (no signal): treated as a wake-up.
            streamrecv_shm_wait(RingPointers(base: base, geometry: geometry).header, seen, timeoutNanoseconds) != ETIMEDOUT
        }
    }

    /// Copies frame `sequence` into `pixels` (resized as needed) if it is still in the ring.
    public func read(sequence: UInt64, into pixels: inout [UInt8]) -> ReadOutcome {
        let outcome = withFrame(sequence: sequence) { info, bytes in
            if pixels.count != bytes.count { pixels = [UInt8](repeating: 0, count: bytes.count) }
            pixels.withUnsafeMutableBytes { $0.copyMemory(from: bytes) }
        }
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
        let (object, geometry) = current
        let outcome: ZeroCopyOutcome<Result> = try object.withMapping { base in
            let ring = RingPointers(base: base, geometry: geometry)
            let latest = streamrecv_shm_load_u64(ring.headerField(\.latest_sequence, as: UInt64.self))
            guard sequence > 0, sequence <= latest else { return .notYetPublished }
            let count = UInt64(geometry.slotCount)
            if latest - sequence >= count { return .lapped(oldestAvailable: latest - count + 1) }
            let index = Int((sequence - 1) % count)
            let slot = UnsafePointer(ring.slot(index))
            // Never written (seqlock 0) while latest says the frame exists: this object began after it.
            if streamrecv_shm_load_u64(UnsafePointer(ring.slotField(index, \.seqlock))) == 0 {
                return .lapped(oldestAvailable: Self.oldestHeld(after: sequence, latest: latest, ring: ring, geometry: geometry))
            }
            let begin = streamrecv_shm_read_begin(slot)
            if begin == 0 { return .torn }
            var copy = slot.pointee
            guard copy.sequence == sequence else {
                guard streamrecv_shm_read_end(slot, begin) != 0 else { return .torn }
                // Newer: overwritten since `latest` was read; the slot's own frame bounds what is still held.
                if copy.sequence > sequence { return .lapped(oldestAvailable: copy.sequence &- count &+ 1) }
                // Older than latest says: this object began after that frame (the writer moved to it).
                return .lapped(oldestAvailable: Self.oldestHeld(after: sequence, latest: latest, ring: ring, geometry: geometry))
            }
            var checked = geometry.checked
            guard let format = PixelFormat(rawValue: copy.pixel_format), streamrecv_shm_check_slot(&copy, &checked) == nil,
                  case let layout = FrameLayout(format: format, width: Int(copy.width), height: Int(copy.height)),
                  layout.byteCount <= geometry.slotDataCapacity, copy.data_size == UInt64(layout.byteCount) else {
                return streamrecv_shm_read_end(slot, begin) != 0 ? .invalid : .torn
            }
            let info = FrameInfo(
                sequence: copy.sequence, generation: copy.generation, layout: layout,
                flags: FrameFlags(rawValue: copy.flags), pts: copy.pts, timeFirstByte: copy.time_first_byte_ns,
                timeAccessUnitComplete: copy.time_au_complete_ns, timeDecoded: copy.time_decoded_ns,
                timePublished: copy.time_published_ns, sarNumerator: copy.sample_aspect_num,
                sarDenominator: copy.sample_aspect_den, colorRange: copy.color_range, rotation: copy.rotation,
                visible: [Int(copy.visible_x), Int(copy.visible_y), Int(copy.visible_width), Int(copy.visible_height)])
            let result = try body(info, UnsafeRawBufferPointer(start: ring.slotData(index), count: layout.byteCount))
            guard streamrecv_shm_read_end(slot, begin) != 0 else { return .torn }
            return .frame(info, result)
        }
        // Shrunk under us: what was copied may be zeros, and the object is useless.
        return object.faulted ? .invalid : outcome
    }

    /// The oldest frame after `sequence` this object holds (one the writer began it with), or `latest + 1`.
    private static func oldestHeld(after sequence: UInt64, latest: UInt64, ring: RingPointers, geometry: RingGeometry) -> UInt64 {
        var oldest = latest &+ 1
        for index in 0..<geometry.slotCount {
            let slot = UnsafePointer(ring.slot(index))
            let begin = streamrecv_shm_read_begin(slot)
            let held = slot.pointee.sequence
            if streamrecv_shm_read_end(slot, begin) != 0, held > sequence, held < oldest { oldest = held }
        }
        return oldest
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
        var wanted = previous &+ 1
        let deadline = MonotonicClock.nanoseconds() + UInt64(max(0, timeoutNanoseconds))
        var consecutiveTorn = 0
        while true {
            let seen = wakeWord
            switch read(sequence: wanted, into: &pixels) {
            case .frame(let info):
                return .frame(info)
            case .lapped(let oldest):
                let missed = oldest > wanted ? oldest - wanted : 0
                lapped.add(missed, ordering: .relaxed)
                skipped &+= missed
                wanted = oldest
                continue
            case .torn:
                torn.add(1, ordering: .relaxed)
                consecutiveTorn += 1
                // A slot stays "being written" only if its writer died mid-write: stop spinning, and give up
                // once the writer is gone.
                if consecutiveTorn > 100 {
                    usleep(1000)
                    if consecutiveTorn > 2000 && !writerIsAlive { return .stopped }
                    if MonotonicClock.nanoseconds() >= deadline { return .timedOut }
                }
                continue
            case .invalid:
                // A damaged or shrunk object: the writer puts a new one under the name; wait for it a little.
                if reattachIfReplaced() { continue }
                if MonotonicClock.nanoseconds() >= deadline || !writerIsAlive { return .invalidFrame(sequence: wanted) }
                usleep(10_000)
                continue
            case .notYetPublished:
                if latestSequence &+ 1 < wanted {
                    // The writer restarted with a fresh object (sequence numbers began again).
                    wanted = latestSequence &+ 1
                }
                let state = self.state
                if state == .replaced && reattachIfReplaced() { continue }
                if stopWhenStopped && state == .stopped { return .stopped }
                let now = MonotonicClock.nanoseconds()
                if now >= deadline { return .timedOut }
                let slice = min(Int64(deadline - now), state == .replaced ? 10_000_000 : 200_000_000)
                if !wait(seen: seen, timeoutNanoseconds: slice) { reattachIfReplaced() }
            }
        }
    }
}
