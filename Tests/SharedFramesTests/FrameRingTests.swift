import CFrameRing
import Foundation
import FrameFormats
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

func uniqueShmName(_ label: String) -> String {
    "streamrecv-test-\(label)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
}

/// Fills a frame so that every byte depends on the sequence number: a torn copy cannot look whole.
func pattern(_ destination: UnsafeMutableRawBufferPointer, sequence: UInt64) {
    let seed = UInt8(truncatingIfNeeded: sequence &* 37)
    for index in 0..<destination.count { destination[index] = seed &+ UInt8(truncatingIfNeeded: index / 64) }
}

/// Reads frames until frame `frames` as fast as they come, each checked against its pattern (a torn copy accepted
/// fails the test); returns how many it accepted.
func readEveryFrame(_ reader: FrameRingReader, upTo frames: UInt64) -> Int {
    var accepted = 0
    var previous: UInt64 = 0
    var pixels: [UInt8] = []
    while previous < frames {
        guard case .frame(let info) = reader.next(after: previous, into: &pixels, timeoutNanoseconds: 5_000_000_000) else {
            Issue.record("reader stalled after \(previous)")
            break
        }
        #expect(matchesPattern(pixels, sequence: info.sequence), "torn frame \(info.sequence) accepted")
        accepted += 1
        previous = info.sequence
    }
    return accepted
}

func matchesPattern(_ pixels: [UInt8], sequence: UInt64) -> Bool {
    let seed = UInt8(truncatingIfNeeded: sequence &* 37)
    for index in pixels.indices where pixels[index] != seed &+ UInt8(truncatingIfNeeded: index / 64) { return false }
    return true
}

/// A two-slot ring with frames 1 to 3 published (frame 3 in slot 0, frame 2 in slot 1), mapped a second time
/// writable, as another process could write it.
private final class ThreeFrameRing {
    let writer: FrameRingWriter
    private let descriptor: Int32
    private let base: UnsafeMutableRawPointer

    init(name: String) throws {
        writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: name, slotCount: 2, maxWidth: 32, maxHeight: 32))
        let layout = FrameLayout(format: .yuv420p, width: 32, height: 32)
        for sequence in 1...3 {
            _ = writer.publish(layout: layout, metadata: FrameMetadata()) { pattern($0, sequence: UInt64(sequence)); _ = $1 }
        }
        descriptor = shm_open("/" + name, O_RDWR, 0)
        guard descriptor >= 0, let mapped = mmap(nil, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0),
              mapped != MAP_FAILED else { throw AttachError.notARing(name: name, reason: "cannot map it again") }
        base = mapped
    }

    deinit {
        munmap(base, 8192)
        close(descriptor)
    }

    func seqlock(ofSlot index: Int) -> UnsafeMutablePointer<UInt64> {
        let header = base.assumingMemoryBound(to: streamrecv_shm_header.self)
        return (base + Int(header.pointee.slot_table_offset) + index * Int(header.pointee.slot_size))
            .assumingMemoryBound(to: UInt64.self)
    }
}

/// A writer (not Sendable) handed to the one thread that writes with it; the test does not touch it meanwhile.
private final class HandedOver: @unchecked Sendable {
    let writer: FrameRingWriter
    init(_ writer: FrameRingWriter) { self.writer = writer }
}

@Suite(.serialized) struct FrameRingTests {
    @Test func pixelFormatsMatchTheCHeader() {
        #expect(PixelFormat.yuv420p.rawValue == STREAMRECV_PIXEL_FORMAT_YUV420P.rawValue)
        #expect(PixelFormat.nv12.rawValue == STREAMRECV_PIXEL_FORMAT_NV12.rawValue)
        #expect(PixelFormat.p010.rawValue == STREAMRECV_PIXEL_FORMAT_P010.rawValue)
        #expect(PixelFormat.gray10.rawValue == STREAMRECV_PIXEL_FORMAT_GRAY10.rawValue)
        #expect(PixelFormat.gbrp10.rawValue == STREAMRECV_PIXEL_FORMAT_GBRP10.rawValue)
        #expect(MemoryLayout<streamrecv_shm_header>.size == Int(STREAMRECV_SHM_HEADER_SIZE))
        #expect(MemoryLayout<streamrecv_shm_slot>.size == Int(STREAMRECV_SHM_SLOT_SIZE))
        #expect(MemoryLayout<streamrecv_shm_slot>.offset(of: \.visible_x) == 192)
    }

    @Test func headerCompilesStandaloneAsC11() throws {
        let header = TestEnvironment.repositoryRoot.appendingPathComponent("Sources/CFrameRing/include/streamrecv_shm.h").path
        try runChecked("cc", ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only", "-x", "c", header])
        try runChecked("c++", ["-std=c++17", "-Wall", "-Werror", "-fsyntax-only", "-x", "c++", header])
    }

    @Test func publishedFramesReadBackWithTheirFields() throws {
        let name = uniqueShmName("roundtrip")
        defer { shm_unlink("/" + name) }
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "roundtrip", slotCount: 4, maxWidth: 64, maxHeight: 48))
        writer.setCodec("h264")
        writer.setState(.streaming)
        let reader = try FrameRingReader(shmName: name)
        #expect(reader.status.state == .streaming && reader.status.codec == "h264")
        var metadata = FrameMetadata()
        metadata.flags = [.keyframe, .discontinuity]
        metadata.pts = 42
        metadata.rotation = 16384
        metadata.visible = (2, 0, 60, 48)
        let layout = FrameLayout(format: .nv12, width: 64, height: 48)
        #expect(writer.publish(layout: layout, metadata: metadata) { pattern($0, sequence: 1); _ = $1 } == .published(sequence: 1))
        var pixels: [UInt8] = []
        guard case .frame(let info) = reader.read(sequence: 1, into: &pixels) else {
            Issue.record("frame 1 not readable")
            return
        }
        #expect(info.layout == layout && info.flags == [.keyframe, .discontinuity])
        #expect(info.pts == 42 && info.rotation == 16384 && info.visible == [2, 0, 60, 48])
        #expect(info.timePublished >= info.timeDecoded)
        #expect(matchesPattern(pixels, sequence: 1))
        #expect(reader.read(sequence: 2, into: &pixels) == .notYetPublished)
    }

    @Test func aSlowReaderIsToldItWasLapped() throws {
        let name = uniqueShmName("lapped")
        defer { shm_unlink("/" + name) }
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "lapped", slotCount: 3, maxWidth: 32, maxHeight: 32))
        let layout = FrameLayout(format: .yuv420p, width: 32, height: 32)
        for sequence in 1...10 {
            _ = writer.publish(layout: layout, metadata: FrameMetadata()) { pattern($0, sequence: UInt64(sequence)); _ = $1 }
        }
        let reader = try FrameRingReader(shmName: name)
        var pixels: [UInt8] = []
        #expect(reader.read(sequence: 2, into: &pixels) == .lapped(oldestAvailable: 8))
        guard case .frame(let info) = reader.next(after: 1, into: &pixels, timeoutNanoseconds: 0) else {
            Issue.record("no frame")
            return
        }
        #expect(info.sequence == 8)
        #expect(reader.lappedFrames == 6)
    }

    /// A writer thread rewrites slots as fast as it can while readers copy them: a torn copy would break the
    /// per-sequence pattern. Every accepted frame must be whole.
    @Test func noTornFrameIsEverAccepted() async throws {
        let name = uniqueShmName("torn")
        defer { shm_unlink("/" + name) }
        let handedOver = HandedOver(try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "torn", slotCount: 2, maxWidth: 256, maxHeight: 256)))
        let layout = FrameLayout(format: .yuv420p, width: 256, height: 256)
        let frames: UInt64 = 3000
        let writing = Thread {
            for sequence in 1...frames {
                _ = handedOver.writer.publish(layout: layout, metadata: FrameMetadata()) { pattern($0, sequence: sequence); _ = $1 }
            }
        }
        let reader = try FrameRingReader(shmName: name)
        writing.start()
        let accepted = readEveryFrame(reader, upTo: frames)
        #expect(accepted > 0)
        #expect(UInt64(accepted) + reader.lappedFrames == frames)
    }

    /// A lapped reader is sent to the oldest frame held, whose slot is the one the writer fills next. Found in the
    /// writer's hands, that frame is lost and the next is whole: waiting for it instead chased the writer from slot
    /// to slot for as long as it kept writing (the torn test above stalled so under TSan).
    @Test func aFrameWhoseSlotIsBeingOverwrittenIsSkipped() throws {
        let name = uniqueShmName("overwritten")
        defer { shm_unlink("/" + name) }
        let ring = try ThreeFrameRing(name: name)
        // Frame 2 is in slot 1, where the writer puts frame 4: make its seqlock odd, as while it writes there.
        ring.seqlock(ofSlot: 1).pointee |= 1
        let reader = try FrameRingReader(shmName: name)
        var pixels: [UInt8] = []
        guard case .frame(let info) = reader.next(after: 1, into: &pixels, timeoutNanoseconds: 2_000_000_000) else {
            Issue.record("frame 3 was not read past the slot being written")
            return
        }
        #expect(info.sequence == 3 && matchesPattern(pixels, sequence: 3))
        #expect(reader.lappedFrames == 1)
        #expect(reader.read(sequence: 2, into: &pixels) == .lapped(oldestAvailable: 3))
    }

    @Test func aSecondWriterIsRefused() throws {
        let name = uniqueShmName("exclusive")
        defer { shm_unlink("/" + name) }
        let configuration = FrameRingConfiguration(shmName: name, streamName: "x", slotCount: 2, maxWidth: 16, maxHeight: 16)
        let first = try FrameRingWriter(configuration: configuration)
        #expect(throws: SharedMemoryError.self) { _ = try FrameRingWriter(configuration: configuration) }
        _ = first
    }

    @Test func aNewWriterTakesOverTheRingAndContinuesTheSequence() throws {
        let name = uniqueShmName("takeover")
        defer { shm_unlink("/" + name) }
        let configuration = FrameRingConfiguration(shmName: name, streamName: "t", slotCount: 4, maxWidth: 16, maxHeight: 16)
        let layout = FrameLayout(format: .gray8, width: 16, height: 16)
        var first: FrameRingWriter? = try FrameRingWriter(configuration: configuration)
        _ = first!.publish(layout: layout, metadata: FrameMetadata()) { pattern($0, sequence: 1); _ = $1 }
        let reader = try FrameRingReader(shmName: name)
        let epoch = reader.status.writerEpoch
        first = nil
        var events: [FrameRingEvent] = []
        let second = try FrameRingWriter(configuration: configuration) { events.append($0) }
        #expect(events.contains { if case .tookOver = $0 { true } else { false } }, "\(events)")
        #expect(second.publish(layout: layout, metadata: FrameMetadata()) { pattern($0, sequence: 2); _ = $1 } == .published(sequence: 2))
        var pixels: [UInt8] = []
        guard case .frame(let info) = reader.next(after: 1, into: &pixels, timeoutNanoseconds: 0) else {
            Issue.record("reader did not follow the restarted writer")
            return
        }
        #expect(info.sequence == 2 && matchesPattern(pixels, sequence: 2))
        #expect(reader.status.writerEpoch != epoch)
    }

    @Test func framesNeedingMoreThanTheSizeLimitAreRefused() throws {
        let name = uniqueShmName("refuse")
        defer { shm_unlink("/" + name) }
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "r", slotCount: 2, maxWidth: 64, maxHeight: 64, sizeLimit: 32 << 10))
        let outcome = writer.publish(layout: FrameLayout(format: .yuv444p10, width: 64, height: 64), metadata: FrameMetadata()) { _, _ in
            Issue.record("fill called for a refused frame")
        }
        guard case .refused = outcome else {
            Issue.record("accepted a frame larger than the size limit allows")
            return
        }
        // A frame that fits in two slots under the limit is published.
        #expect(writer.publish(layout: FrameLayout(format: .gray8, width: 64, height: 64), metadata: FrameMetadata()) { _, _ in } == .published(sequence: 1))
    }

    @Test func readersRejectObjectsThatAreNotRings() throws {
        let name = uniqueShmName("foreign")
        defer { shm_unlink("/" + name) }
        let descriptor = shm_open("/" + name, O_RDWR | O_CREAT, 0o600)
        #expect(descriptor >= 0)
        ftruncate(descriptor, 8192)
        close(descriptor)
        #expect(throws: AttachError.self) { _ = try FrameRingReader(shmName: name) }
        #expect(throws: AttachError.self) { _ = try FrameRingReader(shmName: name + "-missing") }
    }

    @Test func aTruncatedRingIsReportedNotFaultedOn() throws {
        let name = uniqueShmName("truncated")
        defer { shm_unlink("/" + name) }
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "t", slotCount: 2, maxWidth: 64, maxHeight: 64))
        let layout = FrameLayout(format: .nv12, width: 64, height: 64)
        _ = writer.publish(layout: layout, metadata: FrameMetadata()) { pattern($0, sequence: 1); _ = $1 }
        let reader = try FrameRingReader(shmName: name)
        let descriptor = shm_open("/" + name, O_RDWR, 0)
        ftruncate(descriptor, 4096)
        close(descriptor)
        var pixels: [UInt8] = []
        #expect(!reader.objectShrank)
        #expect(reader.read(sequence: 1, into: &pixels) == .invalid)
        #expect(reader.objectShrank, "why the frame is invalid: the object shrank, not a forged slot")
        // The writer touches the shrunk object without dying, moves to a new one, and the reader follows.
        #expect(writer.publish(layout: layout, metadata: FrameMetadata()) { pattern($0, sequence: 2); _ = $1 } == .published(sequence: 2))
        guard case .frame(let info) = reader.next(after: 1, into: &pixels, timeoutNanoseconds: 2_000_000_000) else {
            Issue.record("the reader did not follow the re-created ring")
            return
        }
        #expect(info.sequence == 2 && matchesPattern(pixels, sequence: 2))
    }

    /// A writer that died in the middle of writing a slot leaves its seqlock odd for good: a reader waiting for
    /// that frame must not spin forever. With the writer alive it times out; with the writer gone it stops.
    @Test func aSlotLeftHalfWrittenDoesNotHangTheReader() throws {
        let name = uniqueShmName("halfwritten")
        defer { shm_unlink("/" + name) }
        let ring = try ThreeFrameRing(name: name)
        let (writer, seqlock) = (ring.writer, ring.seqlock(ofSlot: 0))
        // Frame 3 is in slot 0; make its seqlock odd, as a writer killed inside write_begin/write_end leaves it.
        seqlock.pointee |= 1
        let reader = try FrameRingReader(shmName: name)
        var pixels: [UInt8] = []
        #expect(reader.next(after: 2, into: &pixels, timeoutNanoseconds: 300_000_000) == .timedOut)
        #expect(reader.tornReads > 100)
        // The writer gone (its lock with it, as when it is killed): the reader gives up with .stopped.
        writer.close()
        seqlock.pointee |= 1
        #expect(reader.next(after: 2, into: &pixels, timeoutNanoseconds: 10_000_000_000) == .stopped)
    }
}

/// A hostile local user's ring, read by a consumer (the red team's findings): a reader must neither trap, nor
/// spin past its deadline, nor stall for good.
@Suite(.serialized) struct ForgedRingReaderTests {
    /// A ring of `slots` slots with `frames` frames published, and its object mapped writable for forging.
    struct Forged {
        let name: String
        let writer: FrameRingWriter
        let base: UnsafeMutableRawPointer
        let size: Int
        var header: UnsafeMutablePointer<streamrecv_shm_header> { base.assumingMemoryBound(to: streamrecv_shm_header.self) }
        func slotSequence(_ index: Int) -> UnsafeMutablePointer<UInt64> {
            (base + Int(header.pointee.slot_table_offset) + index * Int(STREAMRECV_SHM_SLOT_SIZE) + 8).assumingMemoryBound(to: UInt64.self)
        }
        var latest: UnsafeMutablePointer<UInt64> {
            (base + MemoryLayout<streamrecv_shm_header>.offset(of: \.latest_sequence)!).assumingMemoryBound(to: UInt64.self)
        }

        init(_ label: String, slots: Int, frames: Int) throws {
            name = uniqueShmName(label)
            writer = try FrameRingWriter(configuration: FrameRingConfiguration(
                shmName: name, streamName: label, slotCount: slots, maxWidth: 32, maxHeight: 32))
            let layout = FrameLayout(format: .yuv420p, width: 32, height: 32)
            for sequence in 1...frames {
                _ = writer.publish(layout: layout, metadata: FrameMetadata()) { pattern($0, sequence: UInt64(sequence)); _ = $1 }
            }
            let descriptor = shm_open("/" + name, O_RDWR, 0)
            defer { close(descriptor) }
            var status = stat()
            fstat(descriptor, &status)
            size = Int(status.st_size)
            base = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0)!
        }

        func remove() {
            munmap(base, size)
            shm_unlink("/" + name)
        }
    }

    /// A slot forged to hold a frame that cannot be in it (sequence 96 in the slot of 93, 101, … with 8 slots): the
    /// reader was sent back and forth between 89 and 93 for ever (lapped to the slot's frame minus the slot count).
    /// It is an invalid frame now, and `next` gives up at its deadline.
    @Test func aSlotHoldingAFrameThatCannotBeThereIsInvalid() throws {
        let forged = try Forged("forgedslot", slots: 8, frames: 100)
        defer { forged.remove() }
        // Frame 93 is in slot (93 - 1) % 8 = 4; its seqlock stays even.
        #expect(forged.slotSequence(4).pointee == 93)
        forged.slotSequence(4).pointee = 96
        let reader = try FrameRingReader(shmName: forged.name)
        var pixels: [UInt8] = []
        #expect(reader.read(sequence: 93, into: &pixels) == .invalid)
        #expect(reader.next(after: 88, into: &pixels, timeoutNanoseconds: 200_000_000) == .invalidFrame(sequence: 93))
        #expect(reader.next(after: 93, into: &pixels, timeoutNanoseconds: 200_000_000).frameSequence == 94, "the frames after it are read")
    }

    /// latest_sequence flipped between a small value and 2^64 - 2 while a reader reads: its lapped count wraps
    /// (it trapped on the second jump: "arithmetic overflow").
    @Test func aLatestSequenceFlippingToTheTopDoesNotTrap() throws {
        let forged = try Forged("flip", slots: 8, frames: 20)
        defer { forged.remove() }
        let reader = try FrameRingReader(shmName: forged.name)
        let latest = forged.latest
        var pixels: [UInt8] = []
        for round in 0..<40 {
            latest.pointee = round % 2 == 0 ? UInt64.max - 1 : 20
            _ = reader.next(after: round % 2 == 0 ? 10 : UInt64.max - 20, into: &pixels, timeoutNanoseconds: 5_000_000)
        }
        latest.pointee = 20
        #expect(reader.lappedFrames > 0, "the jumps were counted, wrapping")
    }

    /// Every slot holding the frame before its own: each read found an older frame and the reader was walked
    /// forward a frame at a time, scanning every slot at each step (quadratic; hours for a large ring).
    @Test func slotsThatEachHoldTheFrameBeforeStopTheReader() throws {
        let forged = try Forged("walk", slots: 128, frames: 128)
        defer { forged.remove() }
        for index in 0..<128 { forged.slotSequence(index).pointee -= 1 }
        let reader = try FrameRingReader(shmName: forged.name)
        var pixels: [UInt8] = []
        #expect(reader.next(after: 0, into: &pixels, timeoutNanoseconds: 10_000_000_000).isInvalidFrame,
                "given up as forged, not walked to the end (nor for the whole timeout)")
    }

    /// Every slot "being written" while latest_sequence keeps moving on: each read finds the wanted frame's slot in
    /// the writer's hands and laps the reader on by one, for as long as the forger goes on. The reader keeps its
    /// deadline: it returns while the forger is still at it (which stops by itself after 60 s, so that a reader
    /// that does not cannot hang the suite).
    @Test func slotsForeverBeingWrittenDoNotHoldTheReaderPastItsDeadline() throws {
        let forged = try Forged("forever", slots: 8, frames: 8)
        defer { forged.remove() }
        for index in 0..<8 {
            (forged.base + Int(forged.header.pointee.slot_table_offset) + index * Int(STREAMRECV_SHM_SLOT_SIZE))
                .assumingMemoryBound(to: UInt64.self).pointee |= 1
        }
        let latestAddress = Int(bitPattern: forged.latest)
        let readerDone = ManagedAtomicCounter()
        let forgerGaveUp = ManagedAtomicCounter()
        let forgerEnded = ManagedAtomicCounter()
        let forger = Thread {
            defer { forgerEnded.increment() }
            let latest = UnsafeMutablePointer<UInt64>(bitPattern: latestAddress)!
            let start = MonotonicClock.nanoseconds()
            var value: UInt64 = 8
            while readerDone.value == 0 {
                value += 1
                streamrecv_shm_store_u64(latest, value)
                if MonotonicClock.nanoseconds() - start > 60_000_000_000 { return forgerGaveUp.increment() }
            }
        }
        forger.start()
        let reader = try FrameRingReader(shmName: forged.name)
        var pixels: [UInt8] = []
        let outcome = reader.next(after: 0, into: &pixels, timeoutNanoseconds: 300_000_000)
        readerDone.increment()
        while forgerEnded.value == 0 { usleep(1000) }  // before the mapping goes
        #expect(outcome == .timedOut, "\(outcome)")
        #expect(forgerGaveUp.value == 0, "the reader returned only once the forger stopped")
        #expect(reader.lappedFrames > 64)
    }

    /// A ring planted with latest_sequence = 2^64 - 1: a reader that started there looked for frame 0, which no
    /// ring has, and did not recover when a real ring took the name.
    @Test func aReaderThatStartedAtTheTopRecovers() throws {
        let forged = try Forged("top", slots: 8, frames: 3)
        defer { forged.remove() }
        let reader = try FrameRingReader(shmName: forged.name)
        forged.latest.pointee = UInt64.max
        let previous = reader.latestSequence
        #expect(previous == UInt64.max)
        forged.latest.pointee = 3
        _ = forged.writer.publish(layout: FrameLayout(format: .yuv420p, width: 32, height: 32), metadata: FrameMetadata()) {
            pattern($0, sequence: 4); _ = $1
        }
        var pixels: [UInt8] = []
        let outcome = reader.next(after: previous, into: &pixels, timeoutNanoseconds: 1_000_000_000)
        #expect(outcome.frameSequence != nil, "\(outcome)")
    }
}

extension FrameRingReader.NextOutcome {
    var frameSequence: UInt64? { if case .frame(let info) = self { info.sequence } else { nil } }
    var isInvalidFrame: Bool { if case .invalidFrame = self { true } else { false } }
}

