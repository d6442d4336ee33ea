import ArgumentParser
import FrameFormats
import Glibc
import SharedFrames
@testable import streamrecvctl
import Testing

private func uniqueName(_ label: String) -> String {
    "streamrecvctl-test-\(label)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
}

/// A plain object of `size` bytes under /dev/shm: there, but not a ring.
private func plantPlainObject(_ name: String, size: Int) throws {
    let descriptor = shm_open("/" + name, O_RDWR | O_CREAT | O_EXCL, 0o600)
    try #require(descriptor >= 0)
    defer { close(descriptor) }
    try #require(ftruncate(descriptor, off_t(size)) == 0)
}

@Suite struct StreamLocationTests {
    // MARK: Naming

    @Test func aStreamNameMeansItsStreamrecvObject() throws {
        #expect(try StreamLocation.parse(["cam1"]).shmName == "streamrecv-cam1")
    }

    @Test func shmNamesTheObjectAsIs() throws {
        #expect(try StreamLocation.parse(["--shm", "my-ring"]).shmName == "my-ring")
    }

    /// `--shm` is for objects that are not streamrecv-NAME: given both, it is the one used.
    @Test func shmWinsOverAStreamName() throws {
        #expect(try StreamLocation.parse(["cam1", "--shm", "elsewhere"]).shmName == "elsewhere")
    }

    @Test func neitherANameNorShmIsAUsageError() {
        #expect(throws: (any Error).self) { try StreamLocation.parse([]) }
        do {
            _ = try StreamLocation.parse([])
        } catch {
            #expect(StreamLocation.message(for: error).contains("name a stream, or give --shm SHMNAME"))
            #expect(StreamLocation.exitCode(for: error) == .validationFailure)
        }
    }

    /// A name is one under /dev/shm, never a path: a '/' could pass through a directory link another user planted
    /// there (O_NOFOLLOW guards the last part only), and '..' out of it.
    @Test(arguments: [["a/b"], ["../etc"], ["--shm", "streamrecv-x/streamrecv-y"], ["--shm", ".."], ["--shm", "."], ["--shm", ""]])
    func aNameThatIsAPathIsAUsageError(arguments: [String]) {
        do {
            _ = try StreamLocation.parse(arguments)
            Issue.record("\(arguments) accepted")
        } catch {
            #expect(StreamLocation.exitCode(for: error) == .validationFailure, "\(arguments)")
            #expect(StreamLocation.message(for: error).contains("plain name under /dev/shm"), "\(StreamLocation.message(for: error))")
        }
    }

    /// The library refuses such a name too, whoever calls it: here a link another user could plant, a directory
    /// under /dev/shm leading back to it, in front of a real ring.
    @Test func theReaderRefusesANameThatIsAPath() throws {
        let name = uniqueName("behind")
        defer { shm_unlink("/" + name) }
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "behind", slotCount: 2, maxWidth: 16, maxHeight: 16))
        defer { writer.close() }
        let link = uniqueName("link")
        try #require(symlink("/dev/shm", "/dev/shm/" + link) == 0)
        defer { unlink("/dev/shm/" + link) }
        do {
            _ = try FrameRingReader(shmName: link + "/" + name)
            Issue.record("the ring was opened through the link")
        } catch {
            #expect("\(error)".contains("not a plain name under /dev/shm"), "\(error)")
        }
    }

    // MARK: Attaching (real objects under /dev/shm)

    @Test func attachingAnExistingRingReadsIt() throws {
        let name = uniqueName("ring")
        defer { shm_unlink("/" + name) }
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "located", slotCount: 2, maxWidth: 16, maxHeight: 16))
        defer { writer.close() }
        let reader = try StreamLocation.parse(["--shm", name]).attach()
        #expect(reader.shmName == name)
        #expect(reader.status.streamName == "located")
    }

    /// A missing stream is not a usage mistake: exit status 1, not ArgumentParser's 64.
    @Test func attachingAMissingObjectExitsWithStatusOne() throws {
        let location = try StreamLocation.parse([uniqueName("missing")])
        #expect(throws: ExitCode(1)) { _ = try location.attach() }
    }

    @Test func attachingAnObjectThatIsNotARingExitsWithStatusOne() throws {
        let name = uniqueName("plain")
        defer { shm_unlink("/" + name) }
        try plantPlainObject(name, size: 8192)
        let location = try StreamLocation.parse(["--shm", name])
        #expect(throws: ExitCode(1)) { _ = try location.attach() }
        // Waiting would not make it a ring: refused at once, with the same status.
        #expect(throws: ExitCode(1)) { _ = try location.attach(waitingUpTo: 30) }
    }

    /// Exit status 2 tells "it did not appear in time" from "it is not a ring" (1).
    @Test func aRingThatDoesNotAppearInTimeExitsWithStatusTwo() throws {
        let location = try StreamLocation.parse(["--shm", uniqueName("late")])
        let start = MonotonicClock.nanoseconds()
        #expect(throws: ExitCode(2)) { _ = try location.attach(waitingUpTo: 0.1) }
        let waited = Double(MonotonicClock.nanoseconds() - start) / 1e9
        #expect(waited >= 0.1, "gave up after \(waited) s, before its timeout")
    }

    @Test func waitingForARingThatIsThereReturnsIt() throws {
        let name = uniqueName("present")
        defer { shm_unlink("/" + name) }
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "present", slotCount: 2, maxWidth: 16, maxHeight: 16))
        defer { writer.close() }
        // The first frame waits for its object, at most 0.5 s a try: a loaded machine may take longer.
        let deadline = MonotonicClock.nanoseconds() + 20_000_000_000
        while writer.publish(layout: FrameLayout(format: .gray8, width: 16, height: 16), metadata: FrameMetadata(), fill: { _, _ in })
            == .awaitingRing, MonotonicClock.nanoseconds() < deadline {}
        // No timeout at all: it must not wait when there is nothing to wait for.
        let reader = try StreamLocation.parse(["--shm", name]).attach(waitingUpTo: nil)
        #expect(reader.latestSequence == 1)
    }
}
