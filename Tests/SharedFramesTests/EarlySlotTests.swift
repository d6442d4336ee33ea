import CFrameRing
import Foundation
import FrameFormats
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// The writer's thread, handed to a test thread that is the only one using it.
private final class WriterOnItsThread: @unchecked Sendable {
    let writer: FrameRingWriter
    init(_ writer: FrameRingWriter) { self.writer = writer }
}

/// A slot opened ahead of its frame (`FrameRingWriter.beginFrame`): rows written while the picture is decoded, the
/// rest at publication; readers never take it for a frame before then, and a slot let go holds no frame.
@Suite(.serialized) struct EarlySlotTests {
    private let layout = FrameLayout(format: .yuv420p, width: 64, height: 64)

    private func ring(_ label: String, slots: Int = 3, maxSize: Int = 64) throws -> (FrameRingWriter, String) {
        let name = uniqueShmName(label)
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: label, slotCount: slots, maxWidth: maxSize, maxHeight: maxSize))
        return (writer, name)
    }

    private func publish(_ writer: FrameRingWriter, _ sequence: UInt64) {
        #expect(writer.publish(layout: layout, metadata: FrameMetadata()) { pattern($0, sequence: sequence); _ = $1 }
                == .published(sequence: sequence))
    }

    /// Half the frame written early, the other half at publication: the reader gets the whole frame, and not before.
    @Test func rowsWrittenEarlyArePublishedWithTheRest() throws {
        let (writer, name) = try ring("early")
        defer { shm_unlink("/" + name) }
        for sequence in UInt64(1)...3 { publish(writer, sequence) }
        let reader = try FrameRingReader(shmName: name)
        let half = layout.byteCount / 2
        guard let early = writer.beginFrame(layout: layout) else {
            Issue.record("no early slot")
            return
        }
        #expect(early.sequence == 4)
        #expect(writer.writeEarly(early) { destination in
            pattern(destination, sequence: 4)
            // What a decoder has not finished yet: garbage until publication writes it.
            for index in half..<destination.count { destination[index] = 0xAB }
        })
        var pixels: [UInt8] = []
        #expect(reader.read(sequence: 4, into: &pixels) == .notYetPublished)
        // Frame 1 was in the slot opened for frame 4: gone, never read torn.
        if case .frame = reader.read(sequence: 1, into: &pixels) { Issue.record("frame 1 read from a slot being rewritten") }
        #expect(reader.read(sequence: 2, into: &pixels) != .notYetPublished)
        var continued = false
        let outcome = writer.publishChecked(layout: layout, metadata: FrameMetadata(), continuing: early) { destination, _, rowsThere in
            continued = rowsThere
            var whole = [UInt8](repeating: 0, count: destination.count)
            whole.withUnsafeMutableBytes { pattern($0, sequence: 4) }
            for index in half..<destination.count { destination[index] = whole[index] }
            return true
        }
        #expect(outcome == .published(sequence: 4) && continued)
        guard case .frame(let info) = reader.read(sequence: 4, into: &pixels) else {
            Issue.record("frame 4 not readable")
            return
        }
        #expect(info.sequence == 4 && matchesPattern(pixels, sequence: 4))
    }

    /// A frame that never comes out: its slot is closed holding no frame, and the next frame is published as ever.
    @Test func anEarlySlotLetGoHoldsNoFrame() throws {
        let (writer, name) = try ring("abandoned")
        defer { shm_unlink("/" + name) }
        for sequence in UInt64(1)...3 { publish(writer, sequence) }
        let reader = try FrameRingReader(shmName: name)
        guard let early = writer.beginFrame(layout: layout) else {
            Issue.record("no early slot")
            return
        }
        #expect(writer.writeEarly(early) { pattern($0, sequence: 99) })
        writer.abandonFrame()
        #expect(!writer.writeEarly(early) { _ in Issue.record("a closed slot was written") })
        var pixels: [UInt8] = []
        if case .frame = reader.read(sequence: 1, into: &pixels) { Issue.record("the slot let go still gave frame 1") }
        guard case .frame(let info) = reader.next(after: 0, into: &pixels, timeoutNanoseconds: 0) else {
            Issue.record("frames 2 and 3 are still held")
            return
        }
        #expect(info.sequence == 2)
        publish(writer, 4)
        guard case .frame(let fourth) = reader.read(sequence: 4, into: &pixels) else {
            Issue.record("frame 4 not readable")
            return
        }
        #expect(fourth.sequence == 4 && matchesPattern(pixels, sequence: 4))
    }

    /// Another frame published first (one held back, another picture) takes the open slot and writes it whole: rows
    /// written for a frame never count for another.
    @Test func anotherFramePublishedFirstIsWrittenWhole() throws {
        let (writer, name) = try ring("other")
        defer { shm_unlink("/" + name) }
        publish(writer, 1)
        guard let early = writer.beginFrame(layout: layout) else {
            Issue.record("no early slot")
            return
        }
        writer.writeEarly(early) { pattern($0, sequence: 77) }
        var told: Bool?
        _ = writer.publishChecked(layout: layout, metadata: FrameMetadata(), continuing: nil) { destination, _, rowsThere in
            told = rowsThere
            pattern(destination, sequence: 2)
            return true
        }
        #expect(told == false)
        #expect(!writer.writeEarly(early) { _ in Issue.record("the slot was published meanwhile") })
        // An early slot for another layout is not the frame's either.
        let other = FrameLayout(format: .yuv420p, width: 32, height: 32)
        guard let small = writer.beginFrame(layout: other) else {
            Issue.record("no early slot")
            return
        }
        _ = writer.publishChecked(layout: layout, metadata: FrameMetadata(), continuing: small) { destination, _, rowsThere in
            told = rowsThere
            pattern(destination, sequence: 3)
            return true
        }
        #expect(told == false)
        let reader = try FrameRingReader(shmName: name)
        var pixels: [UInt8] = []
        guard case .frame = reader.read(sequence: 3, into: &pixels) else {
            Issue.record("frame 3 not readable")
            return
        }
        #expect(matchesPattern(pixels, sequence: 3))
    }

    /// A frame that needs a larger object moves the stream: the slot open in the old object is closed there, and
    /// its rows do not count in the new one.
    @Test func aRingMovedMeanwhileLetsTheEarlySlotGo() throws {
        let (writer, name) = try ring("moved", maxSize: 256)
        defer { shm_unlink("/" + name) }
        publish(writer, 1)
        let oldReader = try FrameRingReader(shmName: name)
        // The old object as mapped before the move: its slot table (slot 1 is frame 2's).
        let descriptor = shm_open("/" + name, O_RDONLY, 0)
        #expect(descriptor >= 0)
        defer { close(descriptor) }
        guard let oldObject = mmap(nil, 8192, PROT_READ, MAP_SHARED, descriptor, 0), oldObject != MAP_FAILED else {
            Issue.record("cannot map the ring")
            return
        }
        defer { munmap(oldObject, 8192) }
        guard let early = writer.beginFrame(layout: layout) else {
            Issue.record("no early slot")
            return
        }
        writer.writeEarly(early) { pattern($0, sequence: 2) }
        let large = FrameLayout(format: .yuv420p, width: 256, height: 256)
        var told: Bool?
        let outcome = writer.publishChecked(layout: large, metadata: FrameMetadata(), continuing: early) { destination, _, rowsThere in
            told = rowsThere
            pattern(destination, sequence: 2)
            return true
        }
        #expect(outcome == .published(sequence: 2) && told == false)
        #expect(!writer.writeEarly(early) { _ in Issue.record("a slot of the old object was written") })
        // The old object: its slot closed holding no frame (even seqlock, sequence 0), told the stream moved.
        let slot = oldObject + Int(STREAMRECV_SHM_HEADER_SIZE) + Int(STREAMRECV_SHM_SLOT_SIZE)
        #expect(slot.load(as: UInt64.self) & 1 == 0 && slot.load(fromByteOffset: 8, as: UInt64.self) == 0)
        #expect(oldReader.status.state == .replaced)
        // A reader follows to the new object, where frame 2 was written whole.
        var pixels: [UInt8] = []
        guard case .frame(let info) = oldReader.read(sequence: 2, into: &pixels) else {
            Issue.record("frame 2 not readable")
            return
        }
        #expect(info.layout == large && matchesPattern(pixels, sequence: 2))
    }

    /// A writer that opens each frame's slot early, writes half, then publishes the rest, as fast as it can, against
    /// readers copying: no torn frame is ever accepted.
    @Test func noTornFrameIsAcceptedFromEarlySlots() async throws {
        let (writer, name) = try ring("earlytorn", slots: 2, maxSize: 256)
        defer { shm_unlink("/" + name) }
        let layout = FrameLayout(format: .yuv420p, width: 256, height: 256)
        let frames: UInt64 = 2000
        let handedOver = WriterOnItsThread(writer)
        let writing = Thread {
            let writer = handedOver.writer
            var whole = [UInt8](repeating: 0, count: layout.byteCount)
            for sequence in 1...frames {
                whole.withUnsafeMutableBytes { pattern($0, sequence: sequence) }
                let half = layout.byteCount / 2
                let early = writer.beginFrame(layout: layout)
                if let early {
                    _ = whole.withUnsafeBytes { source in
                        writer.writeEarly(early) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[..<half])) }
                    }
                }
                _ = writer.publishChecked(layout: layout, metadata: FrameMetadata(), continuing: early) { destination, _, rowsThere in
                    whole.withUnsafeBytes { source in
                        let from = rowsThere ? half : 0
                        UnsafeMutableRawBufferPointer(rebasing: destination[from..<layout.byteCount])
                            .copyMemory(from: UnsafeRawBufferPointer(rebasing: source[from..<layout.byteCount]))
                    }
                    return true
                }
            }
        }
        let reader = try FrameRingReader(shmName: name)
        writing.start()
        let accepted = readEveryFrame(reader, upTo: frames)
        #expect(accepted > 0 && UInt64(accepted) + reader.lappedFrames == frames)
    }
}
