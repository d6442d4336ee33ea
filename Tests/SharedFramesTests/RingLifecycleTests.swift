import CFrameRing
import Foundation
import FrameFormats
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// Inode of what /dev/shm/NAME is now.
func inode(of name: String) -> UInt? {
    var status = stat()
    return lstat("/dev/shm/" + name, &status) == 0 ? UInt(status.st_ino) : nil
}

/// The ring's object: sized to the frames it carries, moved to a new object when needed, never adopted from
/// another user, never killed by someone shrinking it.
@Suite(.serialized) struct RingLifecycleTests {
    /// A ring starts small, grows (under a new inode) for the first frame and again for a larger format, and a
    /// reader attached from the start reads every frame across both moves.
    @Test func theRingIsSizedToTheFramesAndReadersFollowItsMoves() throws {
        let name = uniqueShmName("grow")
        defer { shm_unlink("/" + name) }
        var events: [FrameRingEvent] = []
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "grow", slotCount: 4, maxWidth: 1920, maxHeight: 1080)) { events.append($0) }
        #expect(writer.size.bytes < 64 << 10, "no pixels before the first frame: \(writer.size)")
        let reader = try FrameRingReader(shmName: name)
        let small = FrameLayout(format: .nv12, width: 320, height: 180)
        let large = FrameLayout(format: .nv12, width: 1280, height: 720)
        var inodes: Set<UInt> = []
        var pixels: [UInt8] = []
        for sequence in 1...12 {
            let layout = sequence <= 6 ? small : large
            #expect(writer.publish(layout: layout, metadata: FrameMetadata()) { pattern($0, sequence: UInt64(sequence)); _ = $1 }
                    == .published(sequence: UInt64(sequence)))
            inodes.insert(try #require(inode(of: name)))
            guard case .frame(let info) = reader.next(after: UInt64(sequence - 1), into: &pixels, timeoutNanoseconds: 1_000_000_000) else {
                Issue.record("reader stopped before frame \(sequence)")
                return
            }
            #expect(info.sequence == UInt64(sequence) && matchesPattern(pixels, sequence: info.sequence))
        }
        #expect(inodes.count == 2, "one object for each format")
        #expect(writer.size.slotCapacity >= large.byteCount && writer.size.slotCapacity < 2 * large.byteCount)
        #expect(events.filter { if case .resized = $0 { true } else { false } }.count == 2, "\(events)")
        #expect(reader.lappedFrames == 0)
        #expect(reader.status.counters.framesPublished == 12, "counters continue in the new object")
    }

    /// Small frames for a while shrink an oversized ring; the sequence numbers go on.
    @Test func anOversizedRingShrinks() throws {
        let name = uniqueShmName("shrink")
        defer { shm_unlink("/" + name) }
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "shrink", slotCount: 2, maxWidth: 1920, maxHeight: 1080))
        _ = writer.publish(layout: FrameLayout(format: .nv12, width: 1920, height: 1080), metadata: FrameMetadata()) { _, _ in }
        let big = writer.size.bytes
        let small = FrameLayout(format: .nv12, width: 160, height: 90)
        for _ in 0..<FrameRingWriter.shrinkAfterFrames {
            _ = writer.publish(layout: small, metadata: FrameMetadata()) { _, _ in }
        }
        // The smaller object is made on another thread and taken by a frame published after it is made.
        var published = FrameRingWriter.shrinkAfterFrames + 1
        let deadline = MonotonicClock.nanoseconds() + 5_000_000_000
        while writer.size.bytes * 10 >= big && MonotonicClock.nanoseconds() < deadline {
            usleep(5_000)
            _ = writer.publish(layout: small, metadata: FrameMetadata()) { _, _ in }
            published += 1
        }
        #expect(writer.size.bytes * 10 < big, "\(writer.size.bytes) of \(big)")
        #expect(writer.latestSequence == UInt64(published))
    }

    /// Another process truncates the object again and again while frames are published: the writer never dies,
    /// every publish succeeds, and each damage is reported.
    @Test func truncatingTheObjectAtAnyInstantNeverKillsTheWriter() throws {
        let name = uniqueShmName("truncate")
        defer { shm_unlink("/" + name) }
        let recreations = ManagedAtomicCounter()
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "truncate", slotCount: 4, maxWidth: 640, maxHeight: 480)) {
                if case .recreated = $0 { recreations.increment() }
            }
        let layout = FrameLayout(format: .nv12, width: 640, height: 480)
        let stop = ManagedAtomicCounter()
        let truncator = Thread {
            while stop.value == 0 {
                let descriptor = open("/dev/shm/" + name, O_RDWR)
                if descriptor >= 0 {
                    ftruncate(descriptor, off_t(UInt32.random(in: 0...600_000)))
                    close(descriptor)
                }
                usleep(UInt32.random(in: 100...3000))
            }
        }
        truncator.start()
        for sequence in 1...400 {
            let outcome = writer.publish(layout: layout, metadata: FrameMetadata()) { pattern($0, sequence: UInt64(sequence)); _ = $1 }
            #expect(outcome == .published(sequence: UInt64(sequence)))
            writer.setState(.streaming)
            writer.count(\.accessUnits)
        }
        stop.increment()
        while !truncator.isFinished { usleep(1000) }
        #expect(recreations.value > 0)
        // Whatever the last truncation left, the next frame lands in a whole object readers can read.
        writer.checkName(now: .max)
        #expect(writer.publish(layout: layout, metadata: FrameMetadata()) { pattern($0, sequence: 401); _ = $1 } == .published(sequence: 401))
        let reader = try FrameRingReader(shmName: name)
        var pixels: [UInt8] = []
        guard case .frame(let info) = reader.read(sequence: 401, into: &pixels) else {
            Issue.record("frame 401 not readable")
            return
        }
        #expect(matchesPattern(pixels, sequence: info.sequence))
        #expect(reader.status.counters.accessUnits == 400, "counters survive every re-creation")
    }

    /// An object someone else created under the name (here: handed to another user) is never adopted; as root
    /// the writer puts its own in its place, and says what it found.
    @Test func anotherUsersObjectIsNeverAdopted() throws {
        let name = uniqueShmName("squat")
        defer { shm_unlink("/" + name) }
        let descriptor = open("/dev/shm/" + name, O_RDWR | O_CREAT, 0o666)
        #expect(descriptor >= 0)
        fchmod(descriptor, 0o666)
        ftruncate(descriptor, 1 << 20)
        let squatter = try #require(getuid() == 0 ? UInt32(65534) : nil, "needs root to give the object away")
        #expect(fchown(descriptor, squatter, squatter) == 0)
        var squatted = stat()
        fstat(descriptor, &squatted)
        close(descriptor)
        var events: [FrameRingEvent] = []
        _ = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "squat", slotCount: 2, maxWidth: 64, maxHeight: 64)) { events.append($0) }
        #expect(events.contains(.foreignObject(owner: squatter, mode: 0o666, replaced: true)), "\(events)")
        var now = stat()
        #expect(lstat("/dev/shm/" + name, &now) == 0)
        #expect(now.st_ino != squatted.st_ino && now.st_uid == 0 && now.st_mode & 0o777 == 0o640)
    }

    /// A reader holding flock(LOCK_EX) or trying the writer's lock on its read-only descriptor takes nothing from
    /// the writer: the writer's lock needs write access.
    @Test func aReaderCannotTakeTheWritersLock() throws {
        let name = uniqueShmName("lock")
        defer { shm_unlink("/" + name) }
        let configuration = FrameRingConfiguration(shmName: name, streamName: "lock", slotCount: 2, maxWidth: 16, maxHeight: 16)
        var first: FrameRingWriter? = try FrameRingWriter(configuration: configuration)
        first?.close()
        first = nil
        let descriptor = open("/dev/shm/" + name, O_RDONLY)
        defer { close(descriptor) }
        #expect(flock(descriptor, LOCK_EX | LOCK_NB) == 0, "flock works on any descriptor")
        #expect(streamrecv_shm_lock_for_writing(descriptor) != 0 && errno == EBADF, "the writer's lock does not")
        #expect(streamrecv_shm_writer_present(descriptor) == 0)
        let second = try FrameRingWriter(configuration: configuration)
        #expect(streamrecv_shm_writer_present(descriptor) == 1)
        #expect(throws: SharedMemoryError.self) { _ = try FrameRingWriter(configuration: configuration) }
        _ = second
    }

    /// A writer started with other settings (slot count) puts a new object under the name instead of shrinking
    /// the one readers have mapped; they follow, and the sequence numbers go on.
    @Test func aRestartWithAnotherGeometryReplacesTheObjectInsteadOfShrinkingIt() throws {
        let name = uniqueShmName("geometry")
        defer { shm_unlink("/" + name) }
        let layout = FrameLayout(format: .gray8, width: 64, height: 64)
        var first: FrameRingWriter? = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "g", slotCount: 8, maxWidth: 64, maxHeight: 64))
        _ = first!.publish(layout: layout, metadata: FrameMetadata()) { pattern($0, sequence: 1); _ = $1 }
        let reader = try FrameRingReader(shmName: name)
        let mappedSize = reader.objectSize
        let before = try #require(inode(of: name))
        first?.close()
        first = nil
        let second = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "g", slotCount: 2, maxWidth: 64, maxHeight: 64))
        #expect(inode(of: name) != before)
        #expect(second.publish(layout: layout, metadata: FrameMetadata()) { pattern($0, sequence: 2); _ = $1 } == .published(sequence: 2))
        var pixels: [UInt8] = []
        guard case .frame(let info) = reader.next(after: 1, into: &pixels, timeoutNanoseconds: 2_000_000_000) else {
            Issue.record("the reader did not follow")
            return
        }
        #expect(info.sequence == 2 && matchesPattern(pixels, sequence: 2))
        #expect(mappedSize > reader.objectSize, "the reader now maps the smaller, new object")
    }

    /// A frame whose pixels could not be written (a failed GPU download) is not published: the slot it was given
    /// holds no frame, and readers never see the stale pixels an older frame left there.
    @Test func aFrameThatCouldNotBeWrittenIsNotPublished() throws {
        let name = uniqueShmName("unfilled")
        defer { shm_unlink("/" + name) }
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "unfilled", slotCount: 2, maxWidth: 64, maxHeight: 64))
        let layout = FrameLayout(format: .gray8, width: 64, height: 64)
        for sequence in 1...2 {
            _ = writer.publish(layout: layout, metadata: FrameMetadata()) { pattern($0, sequence: UInt64(sequence)); _ = $1 }
        }
        #expect(writer.publishChecked(layout: layout, metadata: FrameMetadata()) { _, _ in false } == .unfilled)
        #expect(writer.latestSequence == 2)
        let reader = try FrameRingReader(shmName: name)
        var pixels: [UInt8] = []
        #expect(reader.read(sequence: 1, into: &pixels) == .lapped(oldestAvailable: 2), "the slot given to the unwritten frame holds none")
        #expect(writer.publish(layout: layout, metadata: FrameMetadata()) { pattern($0, sequence: 3); _ = $1 } == .published(sequence: 3))
        guard case .frame(let info) = reader.read(sequence: 3, into: &pixels) else {
            Issue.record("frame 3 not readable")
            return
        }
        #expect(info.sequence == 3 && matchesPattern(pixels, sequence: 3))
    }

    /// Headers anyone could write: each is refused with its reason, none traps or faults.
    @Test(arguments: [
        ("slot_count", 0 as UInt64, "slot count"),
        ("slot_data_stride", UInt64.max / 2, "slot data"),
        ("slot_data_offset", UInt64.max - 10, "slot"),
        ("slot_table_offset", 7, "slot table offset"),
        ("total_size", 1 << 40, "total_size"),
        ("slot_data_capacity", 1 << 30, "capacity"),
    ] as [(String, UInt64, String)])
    func forgedHeadersAreRefused(field: String, value: UInt64, reason: String) throws {
        let name = uniqueShmName("forged")
        defer { shm_unlink("/" + name) }
        var writer: FrameRingWriter? = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "forged", slotCount: 2, maxWidth: 64, maxHeight: 64))
        _ = writer!.publish(layout: FrameLayout(format: .gray8, width: 64, height: 64), metadata: FrameMetadata()) { _, _ in }
        writer?.close()
        writer = nil
        let offsets: [String: Int] = ["slot_count": 20, "slot_table_offset": 24, "slot_data_offset": 32,
                                      "slot_data_stride": 40, "slot_data_capacity": 48, "total_size": 56]
        let descriptor = open("/dev/shm/" + name, O_RDWR)
        defer { close(descriptor) }
        if field == "slot_count" {
            var narrow = UInt32(truncatingIfNeeded: value)
            #expect(pwrite(descriptor, &narrow, 4, off_t(offsets[field]!)) == 4)
        } else {
            var wide = value
            #expect(pwrite(descriptor, &wide, 8, off_t(offsets[field]!)) == 8)
        }
        do {
            _ = try FrameRingReader(shmName: name)
            Issue.record("accepted a header with \(field) = \(value)")
        } catch {
            #expect("\(error)".contains(reason), "\(error)")
        }
    }
}

/// A counter two threads share in a test.
final class ManagedAtomicCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}
