import CFrameRing
import Foundation
import FrameFormats
import Glibc
import SharedFrames
import Testing

/// A ring mapped read-only as a C consumer maps it, with its header checked once: the borrow API of
/// streamrecv_shm.h (streamrecv_shm_borrow, streamrecv_shm_borrow_held, streamrecv_shm_copy) runs against it.
private final class CMappedRing {
    let base: UnsafeRawPointer
    let size: Int
    var geometry = streamrecv_shm_geometry()

    init(name: String) throws {
        let descriptor = shm_open("/" + name, O_RDONLY, 0)
        var status = stat()
        guard descriptor >= 0, fstat(descriptor, &status) == 0,
              let mapped = mmap(nil, Int(status.st_size), PROT_READ, MAP_SHARED, descriptor, 0), mapped != MAP_FAILED else {
            throw AttachError.notARing(name: name, reason: "cannot map it")
        }
        close(descriptor)
        (base, size) = (UnsafeRawPointer(mapped), Int(status.st_size))
        if let problem = streamrecv_shm_check_header(base.assumingMemoryBound(to: streamrecv_shm_header.self), UInt64(size), &geometry) {
            throw AttachError.notARing(name: name, reason: String(cString: problem))
        }
    }

    deinit { munmap(UnsafeMutableRawPointer(mutating: base), size) }

    func borrow(_ sequence: UInt64, into frame: inout streamrecv_shm_borrowed) -> Int32 {
        streamrecv_shm_borrow(base, &geometry, sequence, &frame)
    }

    /// Whether the borrowed planes carry `sequence`'s pattern, read where they lie.
    static func borrowedMatch(_ frame: streamrecv_shm_borrowed, sequence: UInt64) -> Bool {
        let seed = UInt8(truncatingIfNeeded: sequence &* 37)
        let pixels = UnsafeRawBufferPointer(start: frame.pixels, count: Int(frame.slot.data_size))
        for index in 0..<pixels.count where pixels[index] != seed &+ UInt8(truncatingIfNeeded: index / 64) { return false }
        return true
    }
}

/// A writer handed to the one thread that writes with it; the test does not touch it meanwhile.
private final class WriterOnItsThread: @unchecked Sendable {
    let writer: FrameRingWriter
    init(_ writer: FrameRingWriter) { self.writer = writer }
}

/// Frames borrowed where they lie, through the C header: a borrow the writer overtakes is never held, and a held
/// borrow is always the whole frame.
@Suite(.serialized) struct BorrowedFrameTests {
    static let layout = FrameLayout(format: .yuv420p, width: 64, height: 64)

    static func writer(_ name: String, slots: Int, size: Int = 64) throws -> FrameRingWriter {
        try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "borrow", slotCount: slots, maxWidth: size, maxHeight: size))
    }

    /// Frames `sequences`, each filled with its own pattern.
    static func publish(_ sequences: ClosedRange<UInt64>, with writer: FrameRingWriter, layout: FrameLayout = layout) {
        for sequence in sequences {
            _ = writer.publish(layout: layout, metadata: FrameMetadata()) { pattern($0, sequence: sequence); _ = $1 }
        }
    }

    @Test func aBorrowOvertakenByTheWriterIsNotHeld() throws {
        let name = uniqueShmName("borrow")
        defer { shm_unlink("/" + name) }
        let writer = try Self.writer(name, slots: 2)
        Self.publish(1...2, with: writer)
        let ring = try CMappedRing(name: name)
        var frame = streamrecv_shm_borrowed()
        #expect(ring.borrow(1, into: &frame) == STREAMRECV_SHM_FRAME.rawValue)
        #expect(frame.slot.sequence == 1 && frame.slot.width == 64 && CMappedRing.borrowedMatch(frame, sequence: 1))
        #expect(streamrecv_shm_borrow_held(&frame) != 0)
        #expect(ring.borrow(3, into: &frame) == STREAMRECV_SHM_NOT_YET.rawValue)
        // Frame 3 goes into frame 1's slot while frame 1 is borrowed.
        var borrowed = streamrecv_shm_borrowed()
        #expect(ring.borrow(1, into: &borrowed) == STREAMRECV_SHM_FRAME.rawValue)
        Self.publish(3...3, with: writer)
        #expect(streamrecv_shm_borrow_held(&borrowed) == 0)
        #expect(ring.borrow(1, into: &frame) == STREAMRECV_SHM_LAPPED.rawValue)
        #expect(ring.borrow(0, into: &frame) == STREAMRECV_SHM_LAPPED.rawValue)
        #expect(ring.borrow(3, into: &frame) == STREAMRECV_SHM_FRAME.rawValue && CMappedRing.borrowedMatch(frame, sequence: 3))
        // A copy is the borrowed frame's bytes, and points at the copy.
        var pixels = [UInt8](repeating: 0, count: Int(ring.geometry.slot_data_capacity))
        var copied = streamrecv_shm_borrowed()
        #expect(streamrecv_shm_copy(ring.base, &ring.geometry, 3, &copied, &pixels) == STREAMRECV_SHM_FRAME.rawValue)
        #expect(matchesPattern(Array(pixels.prefix(Int(copied.slot.data_size))), sequence: 3))
        #expect(copied.slot.sequence == 3 && copied.slot.data_size == frame.slot.data_size)
    }

    /// The slot being written (its seqlock odd): the frame before latest is being overwritten, latest itself is not
    /// ready yet.
    @Test func aSlotBeingWrittenIsNeitherBorrowedNorWaitedOnForEver() throws {
        let name = uniqueShmName("borrowing")
        defer { shm_unlink("/" + name) }
        let writer = try Self.writer(name, slots: 2)
        Self.publish(1...3, with: writer)
        let descriptor = shm_open("/" + name, O_RDWR, 0)
        defer { close(descriptor) }
        let ring = try CMappedRing(name: name)
        guard let writable = mmap(nil, ring.size, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0), writable != MAP_FAILED else {
            Issue.record("cannot map the ring writable")
            return
        }
        defer { munmap(writable, ring.size) }
        let seqlock = { (index: Int) in
            (writable + Int(ring.geometry.slot_table_offset) + index * Int(STREAMRECV_SHM_SLOT_SIZE)).assumingMemoryBound(to: UInt64.self)
        }
        var frame = streamrecv_shm_borrowed()
        seqlock(1).pointee |= 1  // frame 2's slot, where frame 4 goes
        #expect(ring.borrow(2, into: &frame) == STREAMRECV_SHM_OVERWRITING.rawValue)
        seqlock(1).pointee += 1
        seqlock(0).pointee |= 1  // frame 3's slot: latest, as a writer that died mid-write leaves it
        #expect(ring.borrow(3, into: &frame) == STREAMRECV_SHM_NOT_YET.rawValue)
    }

    /// A writer thread rewrites two slots as fast as it can while frames are borrowed and read in place: every
    /// borrow still held afterwards saw its whole frame, and the writer overtook some.
    @Test func noOvertakenBorrowIsEverHeld() throws {
        let name = uniqueShmName("borrowtorn")
        defer { shm_unlink("/" + name) }
        let layout = FrameLayout(format: .yuv420p, width: 256, height: 256)
        let handedOver = WriterOnItsThread(try Self.writer(name, slots: 2, size: 256))
        Self.publish(1...1, with: handedOver.writer, layout: layout)
        let ring = try CMappedRing(name: name)
        let frames: UInt64 = 4000
        let writing = Thread {
            Self.publish(2...frames, with: handedOver.writer, layout: layout)
        }
        writing.start()
        let latestSequence = (ring.base + MemoryLayout<streamrecv_shm_header>.offset(of: \.latest_sequence)!).assumingMemoryBound(to: UInt64.self)
        var (held, overtaken, tornButHeld) = (0, 0, 0)
        let deadline = Date().addingTimeInterval(30)
        while streamrecv_shm_load_u64(latestSequence) < frames, Date() < deadline {
            let latest = streamrecv_shm_load_u64(latestSequence)
            var frame = streamrecv_shm_borrowed()
            guard ring.borrow(latest, into: &frame) == STREAMRECV_SHM_FRAME.rawValue else { continue }
            let whole = CMappedRing.borrowedMatch(frame, sequence: latest)
            if streamrecv_shm_borrow_held(&frame) != 0 {
                held += 1
                if !whole { tornButHeld += 1 }
            } else {
                overtaken += 1
            }
        }
        while !writing.isFinished { usleep(1000) }
        // The writer done, the last frame is borrowed whole whatever the scheduling did above (a loaded machine can
        // leave the race loop few turns).
        var last = streamrecv_shm_borrowed()
        #expect(ring.borrow(frames, into: &last) == STREAMRECV_SHM_FRAME.rawValue && CMappedRing.borrowedMatch(last, sequence: frames)
                && streamrecv_shm_borrow_held(&last) != 0)
        #expect(tornButHeld == 0, "\(tornButHeld) torn frames were held")
        print("borrowed under a racing writer: \(held) held, \(overtaken) overtaken")
    }
}
