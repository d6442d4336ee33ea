import CFrameRing
import FrameFormats
import Glibc
@testable import SharedFrames
import Testing

/// A ring of `slots` slots with frames 1…`frames` published (each filled with its own pattern), attached as a
/// reader attaches (read-only, header validated), and mapped a second time writable, as another process of the
/// writer's user could write it.
private final class AttachedRing {
    static let layout = FrameLayout(format: .yuv420p, width: 32, height: 32)
    let name: String
    let writer: FrameRingWriter
    let attachment: RingAttachment
    /// The same object, writable: for forging what a reader must cope with.
    let forger: RingPointers
    private let size: Int

    init(_ label: String, slots: Int, frames: Int, configure: (FrameRingWriter) -> Void = { _ in }) throws {
        name = uniqueShmName(label)
        writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: label, slotCount: slots, maxWidth: 32, maxHeight: 32))
        configure(writer)
        for sequence in 0..<frames {
            // The first frame waits for its object, at most 0.5 s a try: a loaded machine may take longer.
            let deadline = MonotonicClock.nanoseconds() + 20_000_000_000
            var outcome = PublishOutcome.awaitingRing
            repeat {
                outcome = writer.publish(layout: Self.layout, metadata: FrameMetadata()) { pattern($0, sequence: UInt64(sequence + 1)); _ = $1 }
            } while outcome == .awaitingRing && MonotonicClock.nanoseconds() < deadline
            try #require(outcome == .published(sequence: UInt64(sequence + 1)))
        }
        // Attached after publishing: the first frame moves the stream to an object with room for it.
        let object = try SharedMemoryObject.openForReading(name: name)
        let geometry = try object.withMapping {
            RingGeometry.validated($0.assumingMemoryBound(to: streamrecv_shm_header.self), mappedSize: object.size)
        }.get()
        attachment = RingAttachment(object: object, geometry: geometry)
        let descriptor = shm_open("/" + name, O_RDWR, 0)
        defer { close(descriptor) }
        size = object.size
        let base = try #require(mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0))
        try #require(base != MAP_FAILED)
        forger = RingPointers(base: base, geometry: geometry)
    }

    deinit {
        munmap(forger.base, size)
        shm_unlink("/" + name)
    }

    /// Frame `sequence` as `withFrame` finds it: its outcome, and whether the slot held an older frame.
    func look(at sequence: UInt64) -> (outcome: String, olderInSlot: Bool, calls: Int) {
        var older = false
        var calls = 0
        let outcome = attachment.withFrame(sequence: sequence, olderInSlot: &older) { info, pixels -> Bool in
            calls += 1
            return info.sequence == sequence && matchesPattern(Array(pixels), sequence: sequence)
        }
        let described: String = switch outcome {
        case .frame(let info, let whole): "frame \(info.sequence) \(whole ? "whole" : "damaged")"
        case .lapped(let oldest): "lapped \(oldest)"
        case .notYetPublished: "not yet"
        case .torn: "torn"
        case .invalid: "invalid"
        }
        return (described, older, calls)
    }
}

@Suite(.serialized) struct RingAttachmentTests {
    // MARK: The header

    @Test func statusDescribesTheRingFromItsHeader() throws {
        let ring = try AttachedRing("status", slots: 3, frames: 2) { writer in
            writer.setCodec("h265")
            writer.setState(.streaming)
            writer.setPTSClockRate(90_000)
            writer.setSourceStatus("rtsp playing h265 over TCP")
            writer.count(\.bytesReceived, 1234)
            writer.count(\.connections)
        }
        let status = ring.attachment.status
        #expect(status.streamName == "status" && status.codec == "h265" && status.state == .streaming)
        #expect(status.writerPID == UInt32(getpid()) && status.writerAlive)
        #expect(status.ptsClockRate == 90_000 && status.sourceStatus == "rtsp playing h265 over TCP")
        #expect(status.latestSequence == 2 && status.counters.framesPublished == 2)
        #expect(status.counters.bytesReceived == 1234 && status.counters.connections == 1)
        #expect(status.slotCount == ring.writer.size.slots && status.slotCapacity == ring.writer.size.slotCapacity)
        #expect(status.objectSize == ring.writer.size.bytes && status.ownerUID == geteuid())
    }

    /// The newest frame's publication time comes from its slot, read under the seqlock.
    @Test func statusGivesTheNewestFramesPublicationTime() throws {
        let ring = try AttachedRing("published", slots: 3, frames: 2)
        var published: UInt64 = 0
        _ = ring.attachment.withFrame(sequence: 2) { info, _ in published = info.timePublished }
        #expect(published > 0)
        #expect(ring.attachment.status.latestPublishedNanoseconds == published)
    }

    /// A writer inside the newest frame's slot: its time is not to be trusted, so it is reported as none (0).
    @Test func statusGivesNoPublicationTimeWhileTheNewestSlotIsBeingWritten() throws {
        let ring = try AttachedRing("writing", slots: 3, frames: 2)
        ring.forger.slotField(1, \.seqlock).pointee |= 1
        let status = ring.attachment.status
        #expect(status.latestSequence == 2)
        #expect(status.latestPublishedNanoseconds == 0)
    }

    /// A state this ABI version does not know reads as stopped, never as streaming.
    @Test func anUnknownStateReadsAsStopped() throws {
        let ring = try AttachedRing("state", slots: 2, frames: 1) { $0.setState(.streaming) }
        #expect(ring.attachment.state == .streaming)
        ring.forger.headerField(\.stream_state, as: UInt32.self).pointee = 99
        #expect(ring.attachment.state == .stopped)
        #expect(ring.attachment.status.state == .stopped)
    }

    /// Alive is the writer's lock, not the header: after close the header still names this (living) process.
    @Test func theWriterIsAliveWhileItHoldsTheRing() throws {
        let ring = try AttachedRing("alive", slots: 2, frames: 1)
        #expect(ring.attachment.writerIsAlive)
        ring.writer.close()
        #expect(!ring.attachment.writerIsAlive)
        #expect(ring.attachment.status.writerPID == UInt32(getpid()), "the pid alone would say it lives")
        #expect(ring.attachment.state == .stopped)
    }

    // MARK: Waiting

    @Test func waitingOnTheCurrentWakeWordTimesOut() throws {
        let ring = try AttachedRing("timeout", slots: 2, frames: 1)
        #expect(!ring.attachment.wait(seen: ring.attachment.wakeWord, timeoutNanoseconds: 20_000_000))
    }

    /// A word that moved on since it was read is a wake-up at once: a publish between reading and waiting is not lost.
    @Test func waitingOnAnOlderWakeWordReturnsAtOnce() throws {
        let ring = try AttachedRing("moved", slots: 2, frames: 1)
        let seen = ring.attachment.wakeWord
        _ = ring.writer.publish(layout: AttachedRing.layout, metadata: FrameMetadata()) { pattern($0, sequence: 2); _ = $1 }
        #expect(ring.attachment.wakeWord != seen)
        #expect(ring.attachment.latestSequence == 2)
        let start = MonotonicClock.nanoseconds()
        #expect(ring.attachment.wait(seen: seen, timeoutNanoseconds: 10_000_000_000))
        #expect(MonotonicClock.nanoseconds() - start < 5_000_000_000, "it waited for the timeout")
    }

    // MARK: Frames

    @Test func aPublishedFrameIsHandedToTheBodyWhole() throws {
        let ring = try AttachedRing("frame", slots: 3, frames: 2)
        var size = 0
        let outcome = ring.attachment.withFrame(sequence: 1) { info, pixels in
            size = pixels.count
            return info.layout
        }
        guard case .frame(let info, let layout) = outcome else {
            Issue.record("frame 1 was not read")
            return
        }
        #expect(info.sequence == 1 && layout == AttachedRing.layout)
        #expect(size == AttachedRing.layout.byteCount, "exactly the frame's bytes, not the slot's capacity")
        #expect(ring.look(at: 2).outcome == "frame 2 whole")
    }

    @Test func framesNotYetPublishedAndFrameZeroAreNotThere() throws {
        let ring = try AttachedRing("future", slots: 3, frames: 2)
        for sequence: UInt64 in [0, 3, .max] {
            let look = ring.look(at: sequence)
            #expect(look.outcome == "not yet" && look.calls == 0, "frame \(sequence): \(look)")
        }
    }

    /// Overwritten frames send the reader to the oldest one held; the slot held a newer frame, not an older one.
    @Test func anOverwrittenFrameIsLappedToTheOldestHeld() throws {
        let ring = try AttachedRing("lapped", slots: 3, frames: 10)
        let look = ring.look(at: 4)
        #expect(look.outcome == "lapped 8" && look.calls == 0)
        #expect(!look.olderInSlot)
        #expect(ring.look(at: 8).outcome == "frame 8 whole")
    }

    /// latest_sequence says frame 2 exists but its slot was never written (a writer that moved to a new object
    /// began it after frame 2): lapped, flagged as an older slot, to the first frame after it this object holds.
    @Test func aNeverWrittenSlotIsAnOlderSlot() throws {
        let ring = try AttachedRing("unwritten", slots: 4, frames: 1)
        ring.forger.headerField(\.latest_sequence, as: UInt64.self).pointee = 3
        let look = ring.look(at: 2)
        #expect(look.outcome == "lapped 4", "none after it is held: latest + 1")
        #expect(look.olderInSlot && look.calls == 0)
    }

    @Test func aSlotHoldingAnEarlierFrameIsAnOlderSlot() throws {
        // Frame 1 in slot 0; latest forged to 3, whose slot is slot 0 too (2 slots).
        let ring = try AttachedRing("earlier", slots: 2, frames: 1)
        ring.forger.headerField(\.latest_sequence, as: UInt64.self).pointee = 3
        let look = ring.look(at: 3)
        #expect(look.outcome == "lapped 4" && look.olderInSlot && look.calls == 0)
    }

    /// A slot whose fields do not describe its layout (a damaged or forged ring) is never handed to the body.
    @Test func aSlotThatDoesNotMatchItsLayoutIsInvalid() throws {
        let ring = try AttachedRing("mismatch", slots: 3, frames: 2)
        ring.forger.slotField(1, \.data_size).pointee -= 1
        #expect(ring.look(at: 2) == ("invalid", false, 0))
        ring.forger.slotField(1, \.data_size).pointee += 1
        ring.forger.slotField(1, \.pixel_format).pointee = 200
        #expect(ring.look(at: 2) == ("invalid", false, 0))
        #expect(ring.look(at: 1).outcome == "frame 1 whole", "the other slot is unaffected")
    }

    /// The pixels are read by the layout the format and size make: a slot describing them otherwise (planes moved,
    /// another sample size, a plane more or less) was not written whole by a writer, and is refused (a local
    /// user's forgery once had `streamrecvctl cat` write such slots out as frames).
    @Test(arguments: ["bits per sample", "plane moved", "stride", "plane rows", "plane count"])
    func aSlotThatDescribesItsPlanesOtherwiseIsInvalid(forgery: String) throws {
        let ring = try AttachedRing("planes", slots: 3, frames: 2)
        #expect(ring.look(at: 2).outcome == "frame 2 whole")
        switch forgery {
        case "bits per sample": ring.forger.slotField(1, \.bits_per_sample).pointee = 16
        case "plane moved": ring.forger.slotField(1, \.plane_offset).pointee.1 = 0
        case "stride": ring.forger.slotField(1, \.plane_stride).pointee.0 += 64
        case "plane rows": ring.forger.slotField(1, \.plane_height).pointee.2 -= 1
        default: ring.forger.slotField(1, \.plane_count).pointee = 2
        }
        #expect(ring.look(at: 2) == ("invalid", false, 0))
        #expect(ring.look(at: 1).outcome == "frame 1 whole", "the other slot is unaffected")
    }

    /// A writer in the slot of the frame before the newest: that frame is being overwritten, so the reader goes
    /// on to the next; in the newest frame's own slot, the read is torn and to be tried again.
    @Test func aSlotBeingWrittenIsLappedOrTornByWhichFrameItHolds() throws {
        let ring = try AttachedRing("inwriter", slots: 3, frames: 3)
        ring.forger.slotField(1, \.seqlock).pointee |= 1  // frame 2
        #expect(ring.look(at: 2).outcome == "lapped 3")
        ring.forger.slotField(2, \.seqlock).pointee |= 1  // frame 3, the newest
        #expect(ring.look(at: 3).outcome == "torn")
    }
}
