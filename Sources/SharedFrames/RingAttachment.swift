import CFrameRing
import FrameFormats
import Glibc

/// One mapped ring object with its validated geometry: what a `FrameRingReader` reads through. A reader swaps its
/// attachment whole when the stream moves to a new object; a call, or one round of `next`, keeps the one it began
/// with (its strong reference keeps that object mapped), so a header, a slot and a futex word are always read from
/// the same object and with that object's geometry.
struct RingAttachment: Sendable {
    let object: SharedMemoryObject
    let geometry: RingGeometry

    /// Whether a writer holds the ring now (its lock; a daemon killed with SIGKILL holds none). Falls back to the
    /// header's pid where the lock cannot be tested.
    var writerIsAlive: Bool {
        if let present = object.writerPresent { return present }
        let pid = object.withMapping { pid_t(bitPattern: RingPointers(base: $0, geometry: geometry).header.pointee.writer_pid) }
        return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM)
    }

    var latestSequence: UInt64 {
        object.withMapping { streamrecv_shm_load_u64(RingPointers(base: $0, geometry: geometry).headerField(\.latest_sequence, as: UInt64.self)) }
    }

    var state: StreamState {
        let raw = object.withMapping { streamrecv_shm_load_u32(RingPointers(base: $0, geometry: geometry).headerField(\.stream_state, as: UInt32.self)) }
        return StreamState(rawValue: raw) ?? .stopped
    }

    var wakeWord: UInt32 {
        object.withMapping { streamrecv_shm_load_u32(RingPointers(base: $0, geometry: geometry).headerField(\.wake_word, as: UInt32.self)) }
    }

    func wait(seen: UInt32, timeoutNanoseconds: Int64) -> Bool {
        object.withMapping { base in
            // A futex on a page the object no longer has fails with EFAULT (no signal): treated as a wake-up.
            streamrecv_shm_wait(RingPointers(base: base, geometry: geometry).header, seen, timeoutNanoseconds) != ETIMEDOUT
        }
    }

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

    var status: RingStatus {
        let alive = writerIsAlive
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
                objectSize: object.size, ownerUID: object.owner, writerAlive: alive)
        }
    }

    /// `FrameRingReader.withFrame`, on this object.
    func withFrame<Result>(
        sequence: UInt64, _ body: (FrameInfo, UnsafeRawBufferPointer) throws -> Result
    ) rethrows -> ZeroCopyOutcome<Result> {
        var olderInSlot = false
        return try withFrame(sequence: sequence, olderInSlot: &olderInSlot, body)
    }

    /// `olderInSlot`: set when the outcome is `.lapped` because the frame's slot holds an older frame (the object
    /// began after it: legitimate once, when a writer moves to a new object; round after round, a forged ring).
    func withFrame<Result>(
        sequence: UInt64, olderInSlot: inout Bool, _ body: (FrameInfo, UnsafeRawBufferPointer) throws -> Result
    ) rethrows -> ZeroCopyOutcome<Result> {
        var older = false
        defer { olderInSlot = older }
        let geometry = self.geometry
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
                older = true
                return .lapped(oldestAvailable: Self.oldestHeld(after: sequence, latest: latest, ring: ring, geometry: geometry))
            }
            let begin = streamrecv_shm_read_begin(slot)
            // The writer is in the slot, which it only ever fills with frame latest + 1: a frame before latest is
            // being overwritten, so it is lost (lapped), and the next one is whole in its own slot. Waiting for it
            // instead had a slow reader chase the oldest slot, the very one the writer fills next, for ever.
            if begin == 0 { return sequence < latest ? .lapped(oldestAvailable: sequence + 1) : .torn }
            var copy = slot.pointee
            guard copy.sequence == sequence else {
                guard streamrecv_shm_read_end(slot, begin) != 0 else { return .torn }
                // Newer: overwritten since `latest` was read; the slot's own frame bounds what is still held. A frame
                // that can be in this slot is `count` or more ahead; one that is not (a forged slot) would send a
                // reader back and forth between two sequence numbers for ever.
                if copy.sequence > sequence {
                    return copy.sequence &- count &+ 1 > sequence ? .lapped(oldestAvailable: copy.sequence &- count &+ 1) : .invalid
                }
                // Older than latest says: this object began after that frame (the writer moved to it).
                older = true
                return .lapped(oldestAvailable: Self.oldestHeld(after: sequence, latest: latest, ring: ring, geometry: geometry))
            }
            var checked = geometry.checked
            guard let format = PixelFormat(rawValue: copy.pixel_format), streamrecv_shm_check_slot(&copy, &checked) == nil,
                  case let layout = FrameLayout(format: format, width: Int(copy.width), height: Int(copy.height)),
                  layout.byteCount <= geometry.slotDataCapacity, copy.data_size == UInt64(layout.byteCount),
                  Self.slot(copy, describes: layout) else {
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

    /// Whether the slot describes its frame as the writer does (`FrameLayout`'s planes, the format's sample size):
    /// the pixels are read by that layout, so a slot that says anything else is not a frame a writer made whole.
    private static func slot(_ slot: streamrecv_shm_slot, describes layout: FrameLayout) -> Bool {
        guard slot.plane_count == UInt32(layout.planes.count), slot.bits_per_sample == UInt32(layout.format.bitDepth) else { return false }
        // By index into the C arrays (Swift tuples) without building arrays: this runs for every frame read.
        func element<T>(_ values: (T, T, T, T), _ index: Int) -> T {
            switch index {
            case 0: values.0
            case 1: values.1
            case 2: values.2
            default: values.3
            }
        }
        return layout.planes.indices.allSatisfy { plane in
            let expected = layout.planes[plane]
            return element(slot.plane_offset, plane) == UInt64(expected.offset) && element(slot.plane_stride, plane) == UInt32(expected.stride)
                && element(slot.plane_width, plane) == UInt32(expected.rowBytes) && element(slot.plane_height, plane) == UInt32(expected.rows)
        }
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
}
