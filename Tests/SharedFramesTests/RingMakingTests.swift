import Foundation
import FrameFormats
import Glibc
import SharedFrames
import Testing

/// Temporary objects of the ring `name` in /dev/shm (made, not yet installed or thrown away).
private func temporaryObjects(of name: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: "/dev/shm")) ?? []).filter { $0.hasPrefix(".\(name).") }
}

private func elapsed(_ body: () -> PublishOutcome) -> (PublishOutcome, seconds: Double) {
    let start = MonotonicClock.nanoseconds()
    let outcome = body()
    return (outcome, Double(MonotonicClock.nanoseconds() - start) / 1e9)
}

/// A larger ring is made on another thread: however long that takes, the writer's thread waits half a second for
/// it at most, frames that fit the current object go on, and the first larger frame after it is made is published.
@Suite(.serialized) struct RingMakingTests {
    @Test func aSlowRingNeverStallsTheWriterAndIsTakenOnceMade() throws {
        let name = uniqueShmName("slow")
        defer { shm_unlink("/" + name) }
        var events: [FrameRingEvent] = []
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "slow", slotCount: 4, maxWidth: 1920, maxHeight: 1080)) { events.append($0) }
        let reader = try FrameRingReader(shmName: name)
        let small = FrameLayout(format: .nv12, width: 320, height: 180)
        let large = FrameLayout(format: .nv12, width: 1280, height: 720)
        #expect(writer.publish(layout: small, metadata: FrameMetadata()) { pattern($0, sequence: 1); _ = $1 } == .published(sequence: 1))

        writer.objectMakingDelay = 2_000_000_000
        let first = elapsed { writer.publish(layout: large, metadata: FrameMetadata()) { pattern($0, sequence: 2); _ = $1 } }
        #expect(first.0 == .awaitingRing)
        let limit = Double(FrameRingWriter.longestWaitForRing) / 1e9
        #expect(first.seconds >= limit * 0.9 && first.seconds < limit + 0.5, "the first larger frame waited \(first.seconds) s")
        let again = elapsed { writer.publish(layout: large, metadata: FrameMetadata()) { pattern($0, sequence: 2); _ = $1 } }
        #expect(again.0 == .awaitingRing)
        #expect(again.seconds < 0.3, "a second frame waited again: \(again.seconds) s")
        let fitting = elapsed { writer.publish(layout: small, metadata: FrameMetadata()) { pattern($0, sequence: 2); _ = $1 } }
        #expect(fitting.0 == .published(sequence: 2) && fitting.seconds < 0.3, "a frame that fits: \(fitting)")

        var outcome = PublishOutcome.awaitingRing
        let deadline = MonotonicClock.nanoseconds() + 10_000_000_000
        while outcome == .awaitingRing && MonotonicClock.nanoseconds() < deadline {
            usleep(20_000)
            outcome = writer.publish(layout: large, metadata: FrameMetadata()) { pattern($0, sequence: 3); _ = $1 }
        }
        #expect(outcome == .published(sequence: 3))
        #expect(writer.size.slotCapacity >= large.byteCount)
        #expect(events.contains { if case .resized = $0 { true } else { false } }, "\(events)")
        var pixels: [UInt8] = []
        guard case .frame(let info) = reader.next(after: 2, into: &pixels, timeoutNanoseconds: 2_000_000_000) else {
            Issue.record("the reader did not follow the ring to its new object")
            return
        }
        #expect(info.sequence == 3 && info.layout.width == 1280 && matchesPattern(pixels, sequence: 3))
        #expect(temporaryObjects(of: name).isEmpty)
    }

    /// A ring being made when the stream ends is thrown away once made: nothing is left in /dev/shm.
    @Test func aRingMadeAfterTheWriterClosedIsRemoved() throws {
        let name = uniqueShmName("closed")
        defer { shm_unlink("/" + name) }
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "closed", slotCount: 4, maxWidth: 1920, maxHeight: 1080))
        writer.objectMakingDelay = 300_000_000
        #expect(writer.prepare(for: FrameLayout(format: .nv12, width: 1920, height: 1080)))
        writer.close()
        let deadline = MonotonicClock.nanoseconds() + 3_000_000_000
        usleep(400_000)
        while !temporaryObjects(of: name).isEmpty && MonotonicClock.nanoseconds() < deadline { usleep(20_000) }
        #expect(temporaryObjects(of: name).isEmpty, "\(temporaryObjects(of: name))")
    }

    /// A sender whose SPS grows the frames every few milliseconds: one object is made at a time (never a pile of
    /// them in /dev/shm), and the largest asked for is made next and taken by its frame.
    @Test func oneRingIsMadeAtATime() throws {
        let name = uniqueShmName("churn")
        defer { shm_unlink("/" + name) }
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "churn", slotCount: 4, maxWidth: 1920, maxHeight: 1088))
        writer.objectMakingDelay = 300_000_000
        var most = 0
        for step in 1...30 {
            #expect(writer.prepare(for: FrameLayout(format: .nv12, width: 64 * step, height: 36 * step)))
            most = max(most, temporaryObjects(of: name).count)
            usleep(20_000)
        }
        let largest = FrameLayout(format: .nv12, width: 64 * 30, height: 36 * 30)
        var outcome = PublishOutcome.awaitingRing
        let deadline = MonotonicClock.nanoseconds() + 10_000_000_000
        while outcome == .awaitingRing && MonotonicClock.nanoseconds() < deadline {
            most = max(most, temporaryObjects(of: name).count)
            outcome = writer.publish(layout: largest, metadata: FrameMetadata()) { pattern($0, sequence: 1); _ = $1 }
        }
        #expect(outcome == .published(sequence: 1))
        #expect(most <= 1, "\(most) objects were being made at once")
        writer.close()
        usleep(500_000)
        #expect(temporaryObjects(of: name).isEmpty)
    }

    /// An SPS announcing a larger format starts the ring early: its first frame, published after the ring is made,
    /// does not wait.
    @Test func aPreparedRingIsReadyForTheFirstFrame() throws {
        let name = uniqueShmName("prepared")
        defer { shm_unlink("/" + name) }
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "prepared", slotCount: 4, maxWidth: 1920, maxHeight: 1080))
        let large = FrameLayout(format: .nv12, width: 1920, height: 1080)
        writer.objectMakingDelay = 200_000_000
        #expect(writer.prepare(for: large))
        usleep(600_000)
        let first = elapsed { writer.publish(layout: large, metadata: FrameMetadata()) { pattern($0, sequence: 1); _ = $1 } }
        #expect(first.0 == .published(sequence: 1) && first.seconds < 0.15, "\(first)")
    }
}
