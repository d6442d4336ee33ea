import Foundation
import FrameFormats
import Glibc
@testable import SharedFrames
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

    /// A ring being made when the stream ends (`close()`), or when its writer is let go without it, is thrown
    /// away once made: nothing is left in /dev/shm.
    @Test(arguments: [true, false])
    func aRingBeingMadeWhenTheWriterGoesLeavesNothing(closing: Bool) throws {
        let name = uniqueShmName(closing ? "closed" : "dropped")
        defer { shm_unlink("/" + name) }
        var writer: FrameRingWriter? = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "gone", slotCount: 4, maxWidth: 1920, maxHeight: 1080))
        writer?.objectMakingDelay = 300_000_000
        #expect(writer?.prepare(for: FrameLayout(format: .nv12, width: 1920, height: 1080)) == true)
        if closing { writer?.close() }
        writer = nil
        let deadline = MonotonicClock.nanoseconds() + 5_000_000_000
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
        #expect(most == 1, "\(most) objects were being made at once (0: none was ever seen being made)")
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
        // Until the other thread is done (an event, not a guess at how long a loaded machine takes).
        let deadline = MonotonicClock.nanoseconds() + 20_000_000_000
        while writer.maker?.isFinished == false && MonotonicClock.nanoseconds() < deadline { usleep(10_000) }
        #expect(writer.maker?.isFinished == true)
        let first = elapsed { writer.publish(layout: large, metadata: FrameMetadata()) { pattern($0, sequence: 1); _ = $1 } }
        #expect(first.0 == .published(sequence: 1) && first.seconds < 0.3, "\(first)")
    }
}

/// Temporary objects a dead writer left are removed by the next writer of the ring, and only those.
@Suite(.serialized) struct LeftoverObjectTests {
    @Test func namesAreReadFromTheRingsOwnNameOnly() {
        let own = TemporaryObjectName.make(for: "cam.99999")
        #expect(TemporaryObjectName.parse(own, of: "cam.99999") == TemporaryObjectName(pid: getpid(), instance: TemporaryObjectName.ownInstance))
        #expect(TemporaryObjectName.parse(own, of: "cam") == nil, "a dotted ring's object is not another ring's")
        // The red team's case: an object of `cam.99999` in the earlier format is not `cam`'s by PID 99999.
        #expect(TemporaryObjectName.parse(".cam.99999.3756.242796195.new", of: "cam") == nil)
        #expect(TemporaryObjectName.parse(".cam.3756.242796195.new", of: "cam") == TemporaryObjectName(pid: 3756, instance: nil))
        #expect(TemporaryObjectName.parse(".cam.12.iZZ.1.new", of: "cam") == nil)
        #expect(TemporaryObjectName.parse(".cam.0.i1.1.new", of: "cam") == nil)
    }

    /// A daemon that is PID 1 in its container, killed while making a ring and started again, has the same PID:
    /// the earlier process's object is its leftover; this process's own object being made is not.
    @Test func anEarlierProcessWithThisPIDLeftItsObjectAndItIsRemoved() throws {
        let name = uniqueShmName("leftover")
        defer { shm_unlink("/" + name) }
        func plant(_ file: String) -> String {
            let path = "/dev/shm/" + file
            close(open(path, O_CREAT | O_WRONLY, 0o600))
            return path
        }
        let earlier = plant(".\(name).\(getpid()).i1.7.new")
        let older = plant(".\(name).\(getpid()).7.new")
        let ours = plant(TemporaryObjectName.make(for: name))
        let dotted = plant(".\(name).9.\(getpid()).i1.7.new")
        defer { for path in [earlier, older, ours, dotted] { unlink(path) } }
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "leftover", slotCount: 2, maxWidth: 64, maxHeight: 64))
        #expect(access(earlier, F_OK) != 0, "an earlier process's object with this PID is removed")
        #expect(access(older, F_OK) != 0, "an object in the earlier format with this PID is not this process's")
        #expect(access(ours, F_OK) == 0, "this process's own object is kept")
        #expect(access(dotted, F_OK) == 0, "the ring \(name).9's object is not this ring's")
        writer.close()
    }
}
