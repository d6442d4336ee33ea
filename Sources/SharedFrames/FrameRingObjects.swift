import CFrameRing
import Glibc

/// What happened to a ring's shared-memory object, for the writer's owner to log and count.
public enum FrameRingEvent: Sendable, Equatable {
    /// A new object was put under the name (first start, or the old one could not be kept: `reason`).
    case created(bytes: Int, slots: Int, reason: String)
    /// The object this user left there was taken over: its frames, sequence numbers and counters continue.
    case tookOver(bytes: Int, slots: Int)
    /// The stream moved to an object sized for the frames now published.
    case resized(fromBytes: Int, toBytes: Int, slots: Int)
    /// A format needs more than `limit` bytes for all the slots wanted: the ring has fewer.
    case slotsLimited(wanted: Int, slots: Int, limit: Int)
    /// Another user's object (or something that is not a plain object) was under the name: it was not adopted
    /// and, where this process may, was replaced by a new one.
    case foreignObject(owner: UInt32, mode: UInt32, replaced: Bool)
    /// Someone else truncated, removed or replaced the object: the stream moved to a new one.
    case recreated(RingDamage)
    /// No object could be made (the stream publishes nothing until one can): the error says why.
    case failed(String)
}

public enum RingDamage: String, Sendable, Equatable {
    case truncated = "was truncated by another process"
    case unlinked = "was removed by another process"
    case replaced = "was replaced by another process"
    case unavailable = "could not be created earlier"
}

/// The header fields the writer owns, kept in its own memory: the object may be damaged at any moment.
struct RingShadow {
    var counters = RingCounters()
    var latestSequence: UInt64 = 0
    var generation: UInt64 = 0
    var state = StreamState.starting
    var codec = ""
    var ptsClockRate: UInt32 = 0
    var sourceStatus = ""
    var epoch: UInt64 = {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
    }()

    /// What an existing ring of this user's says, to continue from.
    init(continuing ring: RingPointers) {
        counters = ring.loadCounters()
        latestSequence = streamrecv_shm_load_u64(ring.headerField(\.latest_sequence, as: UInt64.self))
        generation = streamrecv_shm_load_u64(ring.headerField(\.generation, as: UInt64.self))
        codec = CString.read(ring.header.pointee.codec)
        ptsClockRate = ring.header.pointee.pts_clock_rate
    }

    init() {}
}

extension FrameRingWriter {
    /// At start: take over this user's object if it suits the configuration, otherwise put a new one in its place.
    func openRing() throws(SharedMemoryError) {
        let name = configuration.shmName
        SharedMemoryObject.removeLeftovers(of: name)
        var reason = "none was there"
        var capacity = 0
        var superseded: SharedMemoryObject?
        switch try SharedMemoryObject.openExisting(name: name) {
        case .none:
            break
        case .oursEmpty:
            reason = "the one there was empty"
        case .foreign(let owner, let mode, _):
            reason = "another user's object was there"
            let replacement = try makeObject(capacity: 0)
            initialize(replacement.object, replacement.geometry)
            do {
                try replacement.object.install(as: name)
            } catch {
                onEvent(.foreignObject(owner: owner, mode: UInt32(mode), replaced: false))
                throw SharedMemoryError(
                    operation: error.operation, name: name, errno: error.errno,
                    detail: "it belongs to uid \(owner) (mode \(String(mode, radix: 8))), not to this daemon's user: not adopted; remove it as root, or set another shm_name")
            }
            onEvent(.foreignObject(owner: owner, mode: UInt32(mode), replaced: true))
            (object, geometry) = replacement
            onEvent(.created(bytes: geometry.totalSize, slots: geometry.slotCount, reason: reason))
            return
        case .ours(let existing):
            let found = existing.withMapping { base -> (geometry: RingGeometry, shadow: RingShadow)? in
                guard case .success(let found) = RingGeometry.validated(base.assumingMemoryBound(to: streamrecv_shm_header.self), mappedSize: existing.size) else {
                    return nil
                }
                return (found, RingShadow(continuing: RingPointers(base: base, geometry: found)))
            }
            guard let found, !existing.faulted else {
                reason = "the one there was not a valid ring"
                break
            }
            shadow = found.shadow
            shadow.state = .starting
            let foundCapacity = found.geometry.slotDataCapacity
            if configuration.slots(forCapacity: foundCapacity) == found.geometry.slotCount
                && found.geometry == RingGeometry(slotCount: found.geometry.slotCount, slotCapacity: foundCapacity) {
                initialize(existing, found.geometry)
                (object, geometry) = (existing, found.geometry)
                onEvent(.tookOver(bytes: geometry.totalSize, slots: geometry.slotCount))
                return
            }
            // Counters and sequence numbers continue in the new object; readers of the old one follow it.
            reason = "the one there had another slot count, size limit or layout"
            capacity = configuration.slots(forCapacity: foundCapacity) == nil ? 0 : foundCapacity
            superseded = existing
            geometry = found.geometry
        }
        let fresh = try makeObject(capacity: capacity)
        initialize(fresh.object, fresh.geometry)
        if let superseded { copyFrames(from: superseded, geometry: geometry, to: fresh.object, fresh.geometry) }
        try fresh.object.install(as: name)
        if let superseded { markReplaced(superseded) }
        (object, geometry) = fresh
        onEvent(.created(bytes: geometry.totalSize, slots: geometry.slotCount, reason: reason))
    }

    /// Someone else damaged the object, or none could be made earlier: put a new one (same size) under the name.
    func recover(_ damage: RingDamage) {
        if replaceObject(capacity: geometry.slotDataCapacity, reason: damage) { onEvent(.recreated(damage)) }
    }

    /// Makes a new object from the shadow header and puts it under the name; the old one, if still ours, is told
    /// it was replaced so that its readers re-open the name.
    private func replaceObject(capacity: Int, reason: RingDamage?) -> Bool {
        if reason != nil, anotherWriterHoldsTheName() {
            // Another writer holds what is there now (two daemons configured with one shm_name): do not fight it,
            // not even with an object made earlier for a larger format.
            object = nil
            abandonMaking()
            onEvent(.failed("another streamrecvd now writes /dev/shm/\(configuration.shmName); this stream publishes nothing until restarted"))
            return false
        }
        let made: (object: SharedMemoryObject, geometry: RingGeometry)
        do {
            made = try makeObject(capacity: capacity)
        } catch {
            onEvent(.failed("\(error)"))
            // A shrunk object is useless; one that is merely unnamed still serves the readers that have it.
            if object?.faulted == true { object = nil }
            return false
        }
        return install(made)
    }

    /// Whether the name leads to an object that is not ours and that another writer holds.
    func anotherWriterHoldsTheName() -> Bool {
        guard case .object(let identity) = SharedMemoryObject.lookup(configuration.shmName), identity != object?.identity,
              let present = try? SharedMemoryObject.openForReading(name: configuration.shmName) else { return false }
        return present.writerPresent == true
    }

    /// Puts a new object (made here or on another thread) under the name in place of the current one: the header
    /// from the shadow, the frames readers may still want, then the name; readers of the old one are told.
    func install(_ made: (object: SharedMemoryObject, geometry: RingGeometry)) -> Bool {
        if object == nil, anotherWriterHoldsTheName() {
            made.object.discard()
            return false
        }
        do {
            // Whole before it has the name: header, magic and the frames readers may still want.
            initialize(made.object, made.geometry)
            if let old = object, !old.faulted, !old.isShrunk { copyFrames(from: old, geometry: geometry, to: made.object, made.geometry) }
            try made.object.install(as: configuration.shmName)
        } catch {
            onEvent(.failed("\(error)"))
            if object?.faulted == true { object = nil }
            return false
        }
        if let old = object { markReplaced(old) }
        (object, geometry) = made
        return true
    }

    /// Copies the newest frames of the old object that fit into the new one's slots, so that a reader that comes
    /// to the new object late (the writer may move twice before it looks) still finds them. The writer is the
    /// only one writing the old object: no seqlock is needed to read it.
    private func copyFrames(from old: SharedMemoryObject, geometry oldGeometry: RingGeometry,
                            to new: SharedMemoryObject, _ newGeometry: RingGeometry) {
        let latest = shadow.latestSequence
        guard latest > 0 else { return }
        let first = latest > UInt64(newGeometry.slotCount) ? latest - UInt64(newGeometry.slotCount) + 1 : 1
        old.withMapping { oldBase in
            new.withMapping { newBase in
                let source = RingPointers(base: oldBase, geometry: oldGeometry)
                let destination = RingPointers(base: newBase, geometry: newGeometry)
                for sequence in first...latest {
                    let from = Int((sequence - 1) % UInt64(oldGeometry.slotCount))
                    let to = Int((sequence - 1) % UInt64(newGeometry.slotCount))
                    let slot = source.slot(from).pointee
                    // Odd: a writer died inside it (a restart after SIGKILL); its pixels are not its frame's.
                    guard slot.seqlock & 1 == 0, slot.sequence == sequence, slot.data_size <= UInt64(newGeometry.slotDataCapacity),
                          slot.data_size <= UInt64(oldGeometry.slotDataCapacity) else { continue }
                    destination.slotData(to).copyMemory(from: source.slotData(from), byteCount: Int(slot.data_size))
                    var copy = slot
                    copy.seqlock = 2
                    destination.slot(to).pointee = copy
                }
            }
        }
    }

    /// Tells the readers of an object of ours that the stream moved on to a new one.
    private func markReplaced(_ old: SharedMemoryObject) {
        guard !old.faulted else { return }
        old.withMapping { base in
            let ring = RingPointers(base: base, geometry: geometry)
            streamrecv_shm_store_u32(ring.headerField(\.stream_state, as: UInt32.self), StreamState.replaced.rawValue)
            streamrecv_shm_wake_all(ring.header)
        }
    }

    /// Writes the shadow header into `object` (magic last).
    private func initialize(_ object: SharedMemoryObject, _ geometry: RingGeometry) {
        object.withMapping { initializeHeader(RingPointers(base: $0, geometry: geometry)) }
    }

    /// A new object for frames of `capacity` bytes under a temporary name, made on this thread.
    private func makeObject(capacity: Int) throws(SharedMemoryError) -> (object: SharedMemoryObject, geometry: RingGeometry) {
        try RingObjectMaker.makeObject(capacity: capacity, slots: configuration.slots(forCapacity: capacity) ?? 2, configuration: configuration)
    }

    /// Writes what this writer owns in the header (everything but the geometry), magic last.
    private func initializeHeader(_ ring: RingPointers) {
        let header = ring.header
        header.pointee.max_width = UInt32(configuration.maxWidth)
        header.pointee.max_height = UInt32(configuration.maxHeight)
        header.pointee.writer_pid = UInt32(getpid())
        CString.write(configuration.streamName, to: ring.headerField(\.stream_name, as: UInt8.self), capacity: 64)
        CString.write(shadow.codec, to: ring.headerField(\.codec, as: UInt8.self), capacity: 16)
        header.pointee.pts_clock_rate = shadow.ptsClockRate
        CString.write(shadow.sourceStatus, to: ring.headerField(\.source_status, as: UInt8.self), capacity: 128)
        for (key, field) in RingPointers.counterFields {
            streamrecv_shm_store_u64(ring.headerField(field, as: UInt64.self), shadow.counters[keyPath: key])
        }
        streamrecv_shm_store_u64(ring.headerField(\.generation, as: UInt64.self), shadow.generation)
        streamrecv_shm_store_u64(ring.headerField(\.latest_sequence, as: UInt64.self), shadow.latestSequence)
        streamrecv_shm_store_u32(ring.headerField(\.stream_state, as: UInt32.self), shadow.state.rawValue)
        streamrecv_shm_store_u64(ring.headerField(\.writer_epoch, as: UInt64.self), shadow.epoch)
        streamrecv_shm_store_u64(ring.headerField(\.magic, as: UInt64.self), STREAMRECV_SHM_MAGIC)
        streamrecv_shm_wake_all(header)
    }
}
