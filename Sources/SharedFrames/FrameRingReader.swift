import CFrameRing
import FrameFormats
import Glibc

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
    /// CLOCK_MONOTONIC time the newest frame was published (0 when none, or when it is being overwritten).
    public var latestPublishedNanoseconds: UInt64
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

/// The reading side of a frame ring: maps it read-only, never writes, never slows the writer.
/// Follows the writer across restarts: when the object behind the name is replaced, `reattachIfReplaced()`
/// maps the new one.
public final class FrameRingReader: @unchecked Sendable {
    public let shmName: String
    private var object: SharedMemoryObject
    /// Frames skipped because the writer lapped this reader.
    public private(set) var lappedFrames: UInt64 = 0
    /// Reads retried because the slot was being written.
    public private(set) var tornReads: UInt64 = 0

    public init(shmName: String) throws(AttachError) {
        self.shmName = shmName
        object = try Self.attach(shmName)
    }

    private static func attach(_ name: String) throws(AttachError) -> SharedMemoryObject {
        let object: SharedMemoryObject
        do { object = try SharedMemoryObject.openForReading(name: name) } catch { throw .sharedMemory(error) }
        let problem: String? = object.withMapping { base in
            let header = RingPointers(base: base).header.pointee
            if streamrecv_shm_load_u64(RingPointers(base: base).headerField(\.magic, as: UInt64.self)) != STREAMRECV_SHM_MAGIC {
                return "no magic (not initialised yet?)"
            }
            if header.abi_version != STREAMRECV_SHM_ABI_VERSION { return "ABI version \(header.abi_version)" }
            if header.header_size != STREAMRECV_SHM_HEADER_SIZE || header.slot_size != STREAMRECV_SHM_SLOT_SIZE {
                return "unexpected header or slot size"
            }
            let tableEnd = header.slot_table_offset + UInt64(header.slot_count) * UInt64(header.slot_size)
            let dataEnd = header.slot_data_offset + UInt64(header.slot_count) * header.slot_data_stride
            if header.slot_count == 0 || header.total_size > UInt64(object.size) || tableEnd > header.slot_data_offset
                || dataEnd > header.total_size || header.slot_data_capacity > header.slot_data_stride {
                return "inconsistent sizes"
            }
            return nil
        }
        if let problem { throw .notARing(name: name, reason: problem) }
        return object
    }

    /// Whether the process that last attached as the writer still exists.
    public var writerIsAlive: Bool {
        let pid = pid_t(status.writerPID)
        return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM)
    }

    /// Maps the object now behind the name if it is not the one we have (the daemon re-created it).
    /// Returns true when it switched.
    @discardableResult
    public func reattachIfReplaced() -> Bool {
        guard let inode = SharedMemoryObject.currentInode(name: shmName), inode != object.inode,
              let replacement = try? Self.attach(shmName) else { return false }
        object = replacement
        return true
    }

    public var status: RingStatus {
        object.withMapping { base in
            let ring = RingPointers(base: base)
            let header = ring.header.pointee
            let latest = streamrecv_shm_load_u64(ring.headerField(\.latest_sequence, as: UInt64.self))
            var published: UInt64 = 0
            if latest > 0, header.slot_count > 0, object.currentSize >= object.size {
                let slot = UnsafePointer(ring.slot(Int((latest - 1) % UInt64(header.slot_count))))
                let begin = streamrecv_shm_read_begin(slot)
                let time = slot.pointee.time_published_ns
                if slot.pointee.sequence == latest && streamrecv_shm_read_end(slot, begin) != 0 { published = time }
            }
            return RingStatus(
                streamName: CString.read(header.stream_name), codec: CString.read(header.codec),
                state: StreamState(rawValue: streamrecv_shm_load_u32(ring.headerField(\.stream_state, as: UInt32.self))) ?? .stopped,
                writerPID: header.writer_pid,
                writerEpoch: streamrecv_shm_load_u64(ring.headerField(\.writer_epoch, as: UInt64.self)),
                generation: streamrecv_shm_load_u64(ring.headerField(\.generation, as: UInt64.self)),
                latestSequence: latest,
                slotCount: Int(header.slot_count), slotCapacity: Int(header.slot_data_capacity),
                maxWidth: Int(header.max_width), maxHeight: Int(header.max_height), counters: ring.loadCounters(),
                ptsClockRate: header.pts_clock_rate, latestPublishedNanoseconds: published)
        }
    }

    public var latestSequence: UInt64 {
        object.withMapping { streamrecv_shm_load_u64(RingPointers(base: $0).headerField(\.latest_sequence, as: UInt64.self)) }
    }

    /// The futex word's current value, to pass to `wait(seen:timeoutNanoseconds:)`.
    public var wakeWord: UInt32 {
        object.withMapping { streamrecv_shm_load_u32(RingPointers(base: $0).headerField(\.wake_word, as: UInt32.self)) }
    }

    /// Sleeps until the writer publishes or changes state after `seen` was read, or the timeout passes.
    /// Returns false on timeout.
    @discardableResult
    public func wait(seen: UInt32, timeoutNanoseconds: Int64) -> Bool {
        object.withMapping { base in
            streamrecv_shm_wait(RingPointers(base: base).header, seen, timeoutNanoseconds) != ETIMEDOUT
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
        // A truncated object would raise SIGBUS on access: check before touching the slots.
        guard object.currentSize >= object.size else { return .invalid }
        return try object.withMapping { base in
            let ring = RingPointers(base: base)
            let header = ring.header.pointee
            let latest = streamrecv_shm_load_u64(ring.headerField(\.latest_sequence, as: UInt64.self))
            guard sequence > 0, sequence <= latest else { return .notYetPublished }
            let count = UInt64(header.slot_count)
            if latest - sequence >= count { return .lapped(oldestAvailable: latest - count + 1) }
            let index = Int((sequence - 1) % count)
            let slot = UnsafePointer(ring.slot(index))
            let begin = streamrecv_shm_read_begin(slot)
            if begin == 0 { return .torn }
            let copy = slot.pointee
            guard copy.sequence == sequence else {
                return copy.sequence > sequence ? .lapped(oldestAvailable: latest - count + 1) : .torn
            }
            guard let format = PixelFormat(rawValue: copy.pixel_format), copy.width > 0, copy.height > 0,
                  copy.width <= 65535, copy.height <= 65535 else {
                return streamrecv_shm_read_end(slot, begin) != 0 ? .invalid : .torn
            }
            let layout = FrameLayout(format: format, width: Int(copy.width), height: Int(copy.height))
            guard layout.byteCount <= Int(header.slot_data_capacity), copy.data_size == UInt64(layout.byteCount) else {
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
    }

    public enum NextOutcome: Sendable, Equatable {
        case frame(FrameInfo)
        case timedOut
        case stopped
    }

    /// The frame after `previous`, waiting up to `timeoutNanoseconds` for it. Skips ahead (counting
    /// `lappedFrames`) when the writer lapped us; retries torn reads; follows a restarted daemon.
    public func next(after previous: UInt64, into pixels: inout [UInt8], timeoutNanoseconds: Int64, stopWhenStopped: Bool = false) -> NextOutcome {
        var wanted = previous + 1
        let deadline = MonotonicClock.nanoseconds() + UInt64(max(0, timeoutNanoseconds))
        var consecutiveTorn = 0
        while true {
            let seen = wakeWord
            switch read(sequence: wanted, into: &pixels) {
            case .frame(let info):
                return .frame(info)
            case .lapped(let oldest):
                lappedFrames += oldest - wanted
                wanted = oldest
                continue
            case .torn:
                tornReads += 1
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
                if !reattachIfReplaced() { return .stopped }
                continue
            case .notYetPublished:
                if latestSequence + 1 < wanted {
                    // The writer restarted with a fresh object (sequence numbers began again).
                    wanted = latestSequence + 1
                }
                if stopWhenStopped && status.state == .stopped { return .stopped }
                let now = MonotonicClock.nanoseconds()
                if now >= deadline { return .timedOut }
                let slice = min(Int64(deadline - now), 200_000_000)
                if !wait(seen: seen, timeoutNanoseconds: slice) { reattachIfReplaced() }
            }
        }
    }
}
