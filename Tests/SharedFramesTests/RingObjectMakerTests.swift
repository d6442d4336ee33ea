import CFrameRing
import Foundation
import Glibc
@testable import SharedFrames
import Testing

/// Objects of the ring `name` being made (under their temporary names) in /dev/shm.
private func objectsBeingMade(of name: String) -> [String] {
    SharedMemoryDirectory.names().filter { TemporaryObjectName.parse($0, of: name) != nil }
}

private func configuration(_ name: String, mode: mode_t = 0o640) -> FrameRingConfiguration {
    FrameRingConfiguration(shmName: name, streamName: "maker", slotCount: 3, maxWidth: 64, maxHeight: 64, mode: mode)
}

private func waitUntilFinished(_ maker: RingObjectMaker) {
    maker.wait(until: MonotonicClock.nanoseconds() + 20_000_000_000)
}

@Suite(.serialized) struct RingObjectMakerTests {
    /// The header says where everything is, but carries no magic: the writer stores it last, once the object is
    /// its own, so no reader takes a half-made ring for a ring.
    @Test func aNewObjectHasTheGeometryInItsHeaderButNoMagic() throws {
        let name = uniqueShmName("make")
        let (object, geometry) = try RingObjectMaker.makeObject(capacity: 10_000, slots: 3, configuration: configuration(name))
        defer { object.discard() }
        #expect(geometry == RingGeometry(slotCount: 3, slotCapacity: 10_000))
        #expect(object.size == geometry.totalSize)
        try object.withMapping { (base: UnsafeMutableRawPointer) throws in
            let header = base.assumingMemoryBound(to: streamrecv_shm_header.self)
            #expect(header.pointee.abi_version == STREAMRECV_SHM_ABI_VERSION)
            #expect(header.pointee.header_size == STREAMRECV_SHM_HEADER_SIZE && header.pointee.slot_size == STREAMRECV_SHM_SLOT_SIZE)
            #expect(header.pointee.magic == 0)
            guard case .failure(let defect) = RingGeometry.validated(header, mappedSize: object.size) else {
                Issue.record("a header without magic validated")
                return
            }
            #expect(defect.reason.hasPrefix("no magic"))
            header.pointee.magic = STREAMRECV_SHM_MAGIC
            #expect(try RingGeometry.validated(header, mappedSize: object.size).get() == geometry)
        }
    }

    /// Until the writer installs it, the object lives under a temporary name of its ring: the ring's own name
    /// leads nowhere yet.
    @Test func aNewObjectLivesUnderATemporaryNameOfItsRing() throws {
        let name = uniqueShmName("hidden")
        let (object, _) = try RingObjectMaker.makeObject(capacity: 0, slots: 2, configuration: configuration(name))
        #expect(objectsBeingMade(of: name).count == 1)
        #expect(SharedMemoryObject.lookup(name) == .missing)
        object.discard()
        #expect(objectsBeingMade(of: name).isEmpty)
    }

    /// The configured mode is what readers rely on; the umask must not narrow it (0660 loses g+w under 022).
    @Test func aNewObjectHasTheConfiguredModeWhateverTheUmask() throws {
        let name = uniqueShmName("mode")
        let previous = umask(0o022)
        defer { umask(previous) }
        let (object, _) = try RingObjectMaker.makeObject(capacity: 0, slots: 2, configuration: configuration(name, mode: 0o660))
        defer { object.discard() }
        var status = stat()
        #expect(fstat(object.descriptor, &status) == 0)
        #expect(status.st_mode & 0o7777 == 0o660)
    }

    /// The maker holds the writer's lock from the start: no other writer can take the object while it is made.
    @Test func aNewObjectIsWriteLocked() throws {
        let name = uniqueShmName("locked")
        let (object, _) = try RingObjectMaker.makeObject(capacity: 0, slots: 2, configuration: configuration(name))
        defer { object.discard() }
        let file = try #require(objectsBeingMade(of: name).first)
        let descriptor = open("/dev/shm/" + file, O_RDONLY)
        defer { close(descriptor) }
        #expect(streamrecv_shm_writer_present(descriptor) == 1)
    }

    @Test func aMadeObjectIsHandedOutOnce() throws {
        let name = uniqueShmName("once")
        let maker = RingObjectMaker(capacity: 5000, slots: 2, configuration: configuration(name))
        waitUntilFinished(maker)
        #expect(maker.isFinished)
        let made = try #require(maker.take()).get()
        defer { made.object.discard() }
        #expect(made.geometry == RingGeometry(slotCount: 2, slotCapacity: 5000))
        #expect(made.object.size == made.geometry.totalSize)
        #expect(maker.take() == nil, "a second take gets nothing")
        #expect(maker.capacity == 5000)
    }

    /// While the other thread works (here: still in its delay), there is nothing to take, and a bounded wait
    /// returns without it.
    @Test func nothingIsHandedOutWhileTheObjectIsBeingMade() throws {
        let name = uniqueShmName("busy")
        let maker = RingObjectMaker(capacity: 5000, slots: 2, configuration: configuration(name), delay: 1_000_000_000)
        #expect(maker.take() == nil)
        maker.wait(until: MonotonicClock.nanoseconds() + 20_000_000)
        #expect(!maker.isFinished)
        #expect(maker.take() == nil)
        maker.abandon()
        waitUntilFinished(maker)
        #expect(maker.isFinished)
    }

    /// A maker told to stop while it works throws its object away once made: nothing is left in /dev/shm, and
    /// there is nothing to take.
    @Test func anObjectAbandonedWhileBeingMadeIsRemovedOnceMade() throws {
        let name = uniqueShmName("abandoned")
        let maker = RingObjectMaker(capacity: 5000, slots: 2, configuration: configuration(name), delay: 300_000_000)
        maker.abandon()
        waitUntilFinished(maker)
        #expect(maker.isFinished)
        #expect(maker.take() == nil)
        #expect(objectsBeingMade(of: name).isEmpty, "\(objectsBeingMade(of: name))")
    }

    @Test func anObjectAbandonedOnceMadeIsRemovedAtOnce() throws {
        let name = uniqueShmName("dropped")
        let maker = RingObjectMaker(capacity: 5000, slots: 2, configuration: configuration(name))
        waitUntilFinished(maker)
        #expect(objectsBeingMade(of: name).count == 1)
        maker.abandon()
        #expect(objectsBeingMade(of: name).isEmpty)
        #expect(maker.take() == nil)
    }

    /// No object can be made (here: the name leads into a directory that does not exist): the error is handed
    /// out instead, once, and nothing is left behind.
    @Test func aFailureIsHandedOutAsItsError() throws {
        let name = "no-such-directory-\(getpid())/ring"
        let maker = RingObjectMaker(capacity: 5000, slots: 2, configuration: configuration(name))
        waitUntilFinished(maker)
        guard case .failure(let error) = try #require(maker.take()) else {
            Issue.record("an object was made under \(name)")
            return
        }
        #expect(error.operation == "create" && error.errno == ENOENT, "\(error)")
        #expect(maker.take() == nil)
    }

    /// A writer let go without taking what its maker made: the object goes with the maker. The maker's thread may
    /// hold the last reference a moment after it signals, so its removal is awaited (by looking, with a deadline).
    @Test func aMadeObjectNobodyTookGoesWithItsMaker() throws {
        let name = uniqueShmName("untaken")
        var maker: RingObjectMaker? = RingObjectMaker(capacity: 5000, slots: 2, configuration: configuration(name))
        waitUntilFinished(maker!)
        #expect(objectsBeingMade(of: name).count == 1)
        maker = nil
        let deadline = MonotonicClock.nanoseconds() + 5_000_000_000
        while !objectsBeingMade(of: name).isEmpty && MonotonicClock.nanoseconds() < deadline { usleep(5_000) }
        #expect(objectsBeingMade(of: name).isEmpty, "\(objectsBeingMade(of: name))")
    }

    /// Once the maker is finished its thread holds nothing: a writer that takes the object and lets it go at once
    /// leaves the lock free for the next writer.
    @Test func aTakenObjectReleasesItsLockWhenLetGo() throws {
        let name = uniqueShmName("release")
        let maker = RingObjectMaker(capacity: 0, slots: 2, configuration: configuration(name))
        waitUntilFinished(maker)
        let file = try #require(objectsBeingMade(of: name).first)
        let descriptor = open("/dev/shm/" + file, O_RDONLY)
        defer { close(descriptor) }
        #expect(streamrecv_shm_writer_present(descriptor) == 1)
        func takeAndLetGo() throws {
            let made = try #require(maker.take()).get()
            made.object.discard()
        }
        try takeAndLetGo()
        #expect(streamrecv_shm_writer_present(descriptor) == 0)
    }
}
