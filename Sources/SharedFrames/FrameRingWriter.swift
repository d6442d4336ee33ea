import CFrameRing
import FrameFormats
import Glibc

/// How one stream's ring is created.
public struct FrameRingConfiguration: Sendable, Equatable {
    /// Object name under /dev/shm, without the leading slash.
    public var shmName: String
    public var streamName: String
    /// Slots wanted; fewer (at least 2) when a format needs more than `sizeLimit` for this many.
    public var slotCount: Int
    public var maxWidth: Int
    public var maxHeight: Int
    /// The most bytes the object may take, header included.
    public var sizeLimit: Int
    public var mode: mode_t
    public var group: gid_t?

    public init(
        shmName: String, streamName: String, slotCount: Int, maxWidth: Int, maxHeight: Int,
        sizeLimit: Int? = nil, mode: mode_t = 0o640, group: gid_t? = nil
    ) {
        self.shmName = shmName
        self.streamName = streamName
        self.slotCount = slotCount
        self.maxWidth = maxWidth
        self.maxHeight = maxHeight
        self.sizeLimit = sizeLimit ?? Self.defaultSizeLimit(slotCount: slotCount, maxWidth: maxWidth, maxHeight: maxHeight)
        self.mode = mode
        self.group = group
    }

    /// Room for `slotCount` frames of `maxWidth` × `maxHeight` in any 4:2:0 layout up to 16-bit samples: 4:2:2
    /// and 4:4:4 of that size at more than 8 bits get fewer slots.
    public static func defaultSizeLimit(slotCount: Int, maxWidth: Int, maxHeight: Int) -> Int {
        RingGeometry(slotCount: slotCount, slotCapacity: FrameLayout.defaultCapacity(maxWidth: maxWidth, maxHeight: maxHeight)).totalSize
    }

    /// The object's size for frames needing `frameBytes` (header, slot table, slots), and the slots it has.
    public func ringSize(frameBytes: Int) -> (bytes: Int, slots: Int)? {
        slots(forCapacity: frameBytes).map { (RingGeometry(slotCount: $0, slotCapacity: frameBytes).totalSize, $0) }
    }

    /// As many slots as wanted, or as fit in `sizeLimit` (at least 2); nil when not even 2 fit.
    func slots(forCapacity capacity: Int) -> Int? {
        var slots = slotCount
        while slots > 2 && RingGeometry(slotCount: slots, slotCapacity: capacity).totalSize > sizeLimit { slots -= 1 }
        return RingGeometry(slotCount: slots, slotCapacity: capacity).totalSize <= sizeLimit ? slots : nil
    }
}

/// Per-frame fields of a slot besides the pixels.
public struct FrameMetadata: Sendable, Equatable {
    public var flags: FrameFlags = []
    public var pts: Int64 = 0
    public var timeFirstByte: UInt64 = 0
    public var timeAccessUnitComplete: UInt64 = 0
    public var timeDecoded: UInt64 = 0
    public var sampleAspectRatio: (numerator: UInt32, denominator: UInt32) = (0, 0)
    public var colorRange: UInt8 = 0
    public var colorPrimaries: UInt8 = 2
    public var colorTransfer: UInt8 = 2
    public var colorMatrix: UInt8 = 2
    /// Anticlockwise, in 1/65536 of a full turn.
    public var rotation: Int32 = 0
    /// The rectangle to display (x, y, width, height); nil: the whole frame.
    public var visible: (x: UInt32, y: UInt32, width: UInt32, height: UInt32)?

    public init() {}

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.flags == rhs.flags && lhs.pts == rhs.pts && lhs.timeFirstByte == rhs.timeFirstByte
            && lhs.timeAccessUnitComplete == rhs.timeAccessUnitComplete && lhs.timeDecoded == rhs.timeDecoded
            && lhs.sampleAspectRatio == rhs.sampleAspectRatio && lhs.colorRange == rhs.colorRange
            && lhs.colorPrimaries == rhs.colorPrimaries && lhs.colorTransfer == rhs.colorTransfer
            && lhs.colorMatrix == rhs.colorMatrix && lhs.rotation == rhs.rotation
            && lhs.visible.map { [$0.x, $0.y, $0.width, $0.height] } == rhs.visible.map { [$0.x, $0.y, $0.width, $0.height] }
    }
}

public enum PublishOutcome: Sendable, Equatable {
    case published(sequence: UInt64)
    /// Even two slots for this frame would exceed the ring's size limit.
    case refused(neededBytes: Int, limit: Int)
    /// No ring could be made for it (the event said why).
    case unavailable
    /// `fill` could not write the pixels: nothing was published.
    case unfilled
    /// The larger object this frame needs is still being made (`FrameRingWriter.longestWaitForRing`): the frame
    /// is not published (yet: the caller may hold it and try again).
    case awaitingRing
}

/// The writing side of one stream's frame ring. It never waits for a reader, and nothing another process does to
/// the object (truncating, unlinking, replacing it) can make it crash: it notices and moves the stream to a new
/// object (`FrameRingEvent`).
///
/// Lifecycle: a writer takes over the object this user left under the name (same inode: frames, sequence numbers
/// and counters continue) when its geometry still suits the configuration; otherwise it puts a new object there.
/// Slots are sized to the frames actually published: a larger format moves the stream to a new, larger object
/// (readers follow the inode change), and a ring that stays four times too large for a while is shrunk the same
/// way. Objects another user created are never adopted. `close()` marks the ring stopped; it stays, with its
/// last frames readable, unless the stream is removed. Not Sendable: it stays on the thread that has it (the
/// daemon makes it, then sends it to the stream's decode thread, which closes it).
public final class FrameRingWriter {
    public let configuration: FrameRingConfiguration
    var object: SharedMemoryObject? { didSet { if openSlot != nil { objectChanged() } } }
    /// The slot opened ahead of its frame (FrameRingWriter+EarlySlot.swift), and how many were opened.
    var openSlot: OpenSlot?
    var earlySerial: UInt64 = 0
    var geometry: RingGeometry
    /// The header as this writer means it to be; an object made to replace a damaged one starts from it.
    var shadow: RingShadow
    let onEvent: (FrameRingEvent) -> Void
    private(set) var lastLayout: FrameLayout?
    /// Consecutive frames needing under a quarter of the slot capacity.
    private var oversizedFrames = 0
    private var lastNameCheck: UInt64 = 0
    /// The last frame size no object could be made for, and when.
    var failedResize: (bytes: Int, time: UInt64)?
    /// The next object, while another thread makes it.
    var maker: RingObjectMaker?
    /// A larger size asked for while `maker` was at work: made once it is done.
    var nextCapacity: Int?
    /// Tests only: each new object is made this many nanoseconds late, as on a loaded machine a large one is.
    public var objectMakingDelay: UInt64 = 0
    /// Frames in a row this small shrink the ring.
    public static let shrinkAfterFrames = 300

    /// - Parameter onEvent: told what happened to the object (called on the writer's thread).
    public init(configuration: FrameRingConfiguration, onEvent: @escaping (FrameRingEvent) -> Void = { _ in }) throws(SharedMemoryError) {
        precondition(configuration.slotCount >= 2, "a ring needs at least two slots")
        self.configuration = configuration
        self.onEvent = onEvent
        shadow = RingShadow()
        geometry = RingGeometry(slotCount: configuration.slotCount, slotCapacity: 0)
        try openRing()
    }

    /// A writer let go without `close()`: an object still being made is not left behind in /dev/shm.
    deinit { abandonMaking() }

    /// The sequence number of the newest published frame (0 before the first).
    public var latestSequence: UInt64 { shadow.latestSequence }

    /// The object's size in bytes now, and its slots.
    public var size: (bytes: Int, slots: Int, slotCapacity: Int) { (geometry.totalSize, geometry.slotCount, geometry.slotDataCapacity) }

    /// Starts making slots large enough for frames of `layout` ahead of the first one (e.g. when a new SPS
    /// arrives), on another thread, so that the frame itself waits less or not at all. False when the size limit
    /// does not allow it.
    @discardableResult
    public func prepare(for layout: FrameLayout) -> Bool {
        layout.byteCount <= geometry.slotDataCapacity || requestObject(capacity: layout.byteCount)
    }

    /// Publishes one frame whose pixels `fill` always writes in full.
    public func publish(
        layout: FrameLayout, metadata: FrameMetadata, fill: (UnsafeMutableRawBufferPointer, FrameLayout) -> Void
    ) -> PublishOutcome {
        publishChecked(layout: layout, metadata: metadata) { fill($0, $1); return true }
    }

    /// Publishes one frame: `fill` writes the pixels into the slot's data (laid out as `layout`) and returns
    /// whether it could (a GPU download can fail); readers see the frame only once this returns, and never one
    /// whose pixels were not written (`.unfilled`: the slot then holds no frame). Never blocks on a reader. `fill`
    /// runs again if the object was damaged while it wrote, into the object that replaces it.
    public func publishChecked(
        layout: FrameLayout, metadata: FrameMetadata, fill: (UnsafeMutableRawBufferPointer, FrameLayout) -> Bool
    ) -> PublishOutcome {
        publishChecked(layout: layout, metadata: metadata, continuing: nil) { destination, layout, _ in fill(destination, layout) }
    }

    /// As `publishChecked(layout:metadata:fill:)`, for a frame whose rows may already be in its early slot
    /// (`beginFrame`): `fill` is told whether they are (then it writes the rest), or must write the whole frame.
    public func publishChecked(
        layout: FrameLayout, metadata: FrameMetadata, continuing early: EarlySlot?,
        fill: (UnsafeMutableRawBufferPointer, FrameLayout, _ continued: Bool) -> Bool
    ) -> PublishOutcome {
        let now = MonotonicClock.nanoseconds()
        installMadeObject(forFrameBytes: layout.byteCount)
        checkName(now: now)
        if layout.byteCount > geometry.slotDataCapacity {
            // Waiting is worth it only for an object that will hold this frame (a smaller one may be finishing first).
            if requestObject(capacity: layout.byteCount), let maker, maker.capacity >= layout.byteCount {
                installMadeObject(forFrameBytes: layout.byteCount, waitingUntil: maker.started &+ Self.longestWaitForRing)
            }
            guard layout.byteCount <= geometry.slotDataCapacity else {
                if isMakingObject(for: layout.byteCount) { return .awaitingRing }
                return object == nil || configuration.slots(forCapacity: layout.byteCount) != nil
                    ? .unavailable : .refused(neededBytes: layout.byteCount, limit: configuration.sizeLimit)
            }
        } else if RingGeometry.roundUp(layout.byteCount) * 4 <= geometry.slotDataCapacity {
            oversizedFrames += 1
            if oversizedFrames >= Self.shrinkAfterFrames {
                oversizedFrames = 0
                requestObject(capacity: layout.byteCount)
            }
        } else {
            oversizedFrames = 0
        }
        if layout != lastLayout {
            shadow.generation += 1
            lastLayout = layout
        }
        let next = shadow.latestSequence + 1
        var filled = false
        for _ in 0..<2 {
            guard let object else { return .unavailable }
            filled = object.withMapping { base in
                write(RingPointers(base: base, geometry: geometry), sequence: next, layout: layout, metadata: metadata,
                      continuing: early, fill: fill)
            }
            if !object.faulted { break }
            recover(.truncated)
        }
        guard object != nil else { return .unavailable }
        guard filled else { return .unfilled }
        shadow.latestSequence = next
        shadow.counters.framesPublished += 1
        withHeader { ring in
            streamrecv_shm_store_u64(ring.headerField(\.latest_sequence, as: UInt64.self), next)
            streamrecv_shm_store_u64(ring.headerField(\.frames_published, as: UInt64.self), shadow.counters.framesPublished)
            streamrecv_shm_wake_all(ring.header)
        }
        return .published(sequence: next)
    }

    /// Writes one slot; false (the slot then holds no frame) when `fill` could not write the pixels.
    private func write(
        _ ring: RingPointers, sequence: UInt64, layout: FrameLayout, metadata: FrameMetadata, continuing early: EarlySlot?,
        fill: (UnsafeMutableRawBufferPointer, FrameLayout, Bool) -> Bool
    ) -> Bool {
        streamrecv_shm_store_u64(ring.headerField(\.generation, as: UInt64.self), shadow.generation)
        let index = Int((sequence - 1) % UInt64(geometry.slotCount))
        let slot = ring.slot(index)
        // A slot opened early is the writer's already (odd: begin leaves it so); this frame takes it over.
        let continued = takeOpenSlot(index: index, sequence: sequence, layout: layout, continuing: early)
        streamrecv_shm_write_begin(slot)
        guard fill(UnsafeMutableRawBufferPointer(start: ring.slotData(index), count: layout.byteCount), layout, continued) else {
            slot.pointee.sequence = 0
            streamrecv_shm_write_end(slot)
            return false
        }
        slot.pointee.sequence = sequence
        slot.pointee.generation = shadow.generation
        slot.pointee.pixel_format = layout.format.rawValue
        slot.pointee.plane_count = UInt32(layout.planes.count)
        slot.pointee.width = UInt32(layout.width)
        slot.pointee.height = UInt32(layout.height)
        slot.pointee.bits_per_sample = UInt32(layout.format.bitDepth)
        slot.pointee.flags = metadata.flags.rawValue
        withUnsafeMutableBytes(of: &slot.pointee.plane_offset) { offsets in
            withUnsafeMutableBytes(of: &slot.pointee.plane_stride) { strides in
                withUnsafeMutableBytes(of: &slot.pointee.plane_width) { widths in
                    withUnsafeMutableBytes(of: &slot.pointee.plane_height) { heights in
                        for plane in 0..<4 {
                            let described = plane < layout.planes.count ? layout.planes[plane] : nil
                            offsets.storeBytes(of: UInt64(described?.offset ?? 0), toByteOffset: plane * 8, as: UInt64.self)
                            strides.storeBytes(of: UInt32(described?.stride ?? 0), toByteOffset: plane * 4, as: UInt32.self)
                            widths.storeBytes(of: UInt32(described?.rowBytes ?? 0), toByteOffset: plane * 4, as: UInt32.self)
                            heights.storeBytes(of: UInt32(described?.rows ?? 0), toByteOffset: plane * 4, as: UInt32.self)
                        }
                    }
                }
            }
        }
        slot.pointee.data_size = UInt64(layout.byteCount)
        slot.pointee.pts = metadata.pts
        slot.pointee.time_first_byte_ns = metadata.timeFirstByte
        slot.pointee.time_au_complete_ns = metadata.timeAccessUnitComplete
        slot.pointee.time_decoded_ns = metadata.timeDecoded
        slot.pointee.time_published_ns = MonotonicClock.nanoseconds()
        slot.pointee.sample_aspect_num = metadata.sampleAspectRatio.numerator
        slot.pointee.sample_aspect_den = metadata.sampleAspectRatio.denominator
        slot.pointee.color_range = metadata.colorRange
        slot.pointee.color_primaries = metadata.colorPrimaries
        slot.pointee.color_transfer = metadata.colorTransfer
        slot.pointee.color_matrix = metadata.colorMatrix
        slot.pointee.rotation = metadata.rotation
        let visible = metadata.visible ?? (0, 0, UInt32(layout.width), UInt32(layout.height))
        slot.pointee.visible_x = visible.x
        slot.pointee.visible_y = visible.y
        slot.pointee.visible_width = visible.width
        slot.pointee.visible_height = visible.height
        streamrecv_shm_write_end(slot)
        return true
    }

    public func setState(_ state: StreamState) {
        shadow.state = state
        withHeader { ring in
            streamrecv_shm_store_u32(ring.headerField(\.stream_state, as: UInt32.self), state.rawValue)
            streamrecv_shm_wake_all(ring.header)
        }
    }

    /// Ticks per second of the slots' pts (0: pts is the access-unit index).
    public func setPTSClockRate(_ rate: UInt32) {
        shadow.ptsClockRate = rate
        withHeader { streamrecv_shm_store_u32($0.headerField(\.pts_clock_rate, as: UInt32.self), rate) }
    }

    /// Where a pulled stream's source stands (rtsp://), for `streamrecvctl status`; "" for none.
    public func setSourceStatus(_ text: String) {
        shadow.sourceStatus = text
        withHeader { CString.write(text, to: $0.headerField(\.source_status, as: UInt8.self), capacity: 128) }
    }

    public func setCodec(_ codec: String) {
        shadow.codec = codec
        withHeader { CString.write(codec, to: $0.headerField(\.codec, as: UInt8.self), capacity: 16) }
    }

    /// Adds to the header's counters.
    public func count(_ counter: WritableKeyPath<RingCounters, UInt64>, _ amount: UInt64 = 1) {
        shadow.counters[keyPath: counter] &+= amount
        guard let field = RingPointers.counterFields[counter] else { return }
        let value = shadow.counters[keyPath: counter]
        withHeader { streamrecv_shm_store_u64($0.headerField(field, as: UInt64.self), value) }
    }

    public var counters: RingCounters { shadow.counters }

    /// Checks that the name still leads to this object, at most once a second; call it now and then while no
    /// frames flow (publishing checks by itself).
    public func checkName(now: UInt64) {
        guard now >= lastNameCheck &+ 1_000_000_000 else { return }
        lastNameCheck = now
        // While no frames flow, an object made meanwhile is installed here.
        installMadeObject(forFrameBytes: lastLayout?.byteCount ?? 0)
        if let object {
            if object.faulted || object.isShrunk { return recover(.truncated) }
            switch SharedMemoryObject.lookup(configuration.shmName) {
            case .missing: recover(.unlinked)
            case .object(let identity) where identity != object.identity: recover(.replaced)
            case .object, .unknown: break
            }
        } else {
            recover(.unavailable)
        }
    }

    /// Marks the ring stopped and lets go of it (lock, mapping, descriptor) at once, so that a new writer can take
    /// it. With `removingName` the object is also removed from /dev/shm (readers keep what they mapped).
    public func close(removingName: Bool = false) {
        // An object still being made is waited for a moment, so that it is removed before the process may exit:
        // a made object no one takes would otherwise stay in /dev/shm until the stream's name is opened again.
        maker?.wait(until: MonotonicClock.nanoseconds() &+ 2_000_000_000)
        abandonMaking()
        guard let object else { return }
        // Not through setState: a shrunk object is not worth re-creating on the way out.
        if !object.faulted && !object.isShrunk {
            object.withMapping { base in
                let ring = RingPointers(base: base, geometry: geometry)
                streamrecv_shm_store_u32(ring.headerField(\.stream_state, as: UInt32.self), StreamState.stopped.rawValue)
                streamrecv_shm_wake_all(ring.header)
            }
        }
        if removingName { SharedMemoryObject.unlink(name: configuration.shmName, ifStill: object.identity) }
        self.object = nil
    }

    /// Runs `body` on the header, then replaces the object if the access found it shrunk.
    func withHeader(_ body: (RingPointers) -> Void) {
        guard let object else { return }
        object.withMapping { body(RingPointers(base: $0, geometry: geometry)) }
        if object.faulted { recover(.truncated) }
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of every timestamp in a slot.
public enum MonotonicClock {
    public static func nanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
    }
}
