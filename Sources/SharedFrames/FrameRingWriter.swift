import CFrameRing
import FrameFormats
import Glibc

/// How one stream's ring is created.
public struct FrameRingConfiguration: Sendable, Equatable {
    /// Object name under /dev/shm, without the leading slash.
    public var shmName: String
    public var streamName: String
    public var slotCount: Int
    public var maxWidth: Int
    public var maxHeight: Int
    /// Pixel bytes each slot holds; frames needing more are refused.
    public var slotCapacity: Int
    public var mode: mode_t
    public var group: gid_t?

    public init(
        shmName: String, streamName: String, slotCount: Int, maxWidth: Int, maxHeight: Int,
        slotCapacity: Int? = nil, mode: mode_t = 0o640, group: gid_t? = nil
    ) {
        self.shmName = shmName
        self.streamName = streamName
        self.slotCount = slotCount
        self.maxWidth = maxWidth
        self.maxHeight = maxHeight
        self.slotCapacity = slotCapacity ?? FrameLayout.defaultCapacity(maxWidth: maxWidth, maxHeight: maxHeight)
        self.mode = mode
        self.group = group
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
    /// The frame needs more bytes than a slot holds.
    case refused(neededBytes: Int, capacity: Int)
}

/// The writing side of one stream's frame ring. It never waits for a reader.
///
/// Lifecycle: creating a writer opens (or creates) `/dev/shm/<shmName>`. An existing object with the same
/// geometry is taken over — its frames and sequence numbers continue, `writer_epoch` changes — so readers survive
/// a daemon restart without re-attaching; otherwise it is resized and re-initialised. On shutdown the state
/// becomes `stopped` and the object stays, with its last frames readable, until `unlink()` (see docs/shm-abi.md).
/// Confined to one thread at a time (the stream's decode thread).
public final class FrameRingWriter: @unchecked Sendable {
    public let configuration: FrameRingConfiguration
    private let object: SharedMemoryObject
    private let geometry: RingGeometry
    private var sequence: UInt64
    private var lastLayout: FrameLayout?
    /// True when an existing ring with the same geometry was taken over.
    public let tookOver: Bool

    public init(configuration: FrameRingConfiguration) throws(SharedMemoryError) {
        precondition(configuration.slotCount > 0 && configuration.slotCapacity > 0, "ring needs slots")
        self.configuration = configuration
        geometry = RingGeometry(slotCount: configuration.slotCount, slotCapacity: configuration.slotCapacity)
        let (object, existingSize) = try SharedMemoryObject.openForWriting(
            name: configuration.shmName, size: geometry.totalSize, mode: configuration.mode,
            group: configuration.group)
        self.object = object
        let geometry = self.geometry
        let reusable = existingSize == geometry.totalSize && object.withMapping { base in
            let header = RingPointers(base: base).header.pointee
            return header.magic == STREAMRECV_SHM_MAGIC && header.abi_version == STREAMRECV_SHM_ABI_VERSION
                && Int(header.slot_count) == geometry.slotCount
                && Int(header.slot_data_stride) == geometry.slotDataStride
                && Int(header.slot_data_capacity) == geometry.slotDataCapacity
        }
        tookOver = reusable
        sequence = 0
        object.withMapping { base in
            let ring = RingPointers(base: base)
            if reusable {
                sequence = streamrecv_shm_load_u64(ring.headerField(\.latest_sequence, as: UInt64.self))
            } else {
                // Invisible to readers until the magic is stored, last.
                base.initializeMemory(as: UInt8.self, repeating: 0, count: geometry.slotDataOffset)
                let header = ring.header
                header.pointee.abi_version = STREAMRECV_SHM_ABI_VERSION
                header.pointee.header_size = STREAMRECV_SHM_HEADER_SIZE
                header.pointee.slot_size = STREAMRECV_SHM_SLOT_SIZE
                header.pointee.slot_count = UInt32(geometry.slotCount)
                header.pointee.slot_table_offset = UInt64(geometry.slotTableOffset)
                header.pointee.slot_data_offset = UInt64(geometry.slotDataOffset)
                header.pointee.slot_data_stride = UInt64(geometry.slotDataStride)
                header.pointee.slot_data_capacity = UInt64(geometry.slotDataCapacity)
                header.pointee.total_size = UInt64(geometry.totalSize)
            }
            let header = ring.header
            header.pointee.max_width = UInt32(configuration.maxWidth)
            header.pointee.max_height = UInt32(configuration.maxHeight)
            header.pointee.writer_pid = UInt32(getpid())
            CString.write(configuration.streamName, to: ring.headerField(\.stream_name, as: UInt8.self), capacity: 64)
            streamrecv_shm_store_u32(ring.headerField(\.stream_state, as: UInt32.self), StreamState.starting.rawValue)
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            let epoch = UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
            streamrecv_shm_store_u64(ring.headerField(\.writer_epoch, as: UInt64.self), epoch)
            streamrecv_shm_store_u64(ring.headerField(\.magic, as: UInt64.self), STREAMRECV_SHM_MAGIC)
            streamrecv_shm_wake_all(header)
        }
    }

    /// The sequence number of the newest published frame (0 before the first).
    public var latestSequence: UInt64 { sequence }

    /// Publishes one frame: `fill` writes the pixels into the slot's data (laid out as `layout`) and returns
    /// normally; readers see the frame only once this returns. Never blocks.
    public func publish(
        layout: FrameLayout, metadata: FrameMetadata, fill: (UnsafeMutableRawBufferPointer, FrameLayout) -> Void
    ) -> PublishOutcome {
        guard layout.byteCount <= geometry.slotDataCapacity else {
            return .refused(neededBytes: layout.byteCount, capacity: geometry.slotDataCapacity)
        }
        let next = sequence + 1
        let index = Int((next - 1) % UInt64(geometry.slotCount))
        object.withMapping { base in
            let ring = RingPointers(base: base)
            if layout != lastLayout {
                let generation = ring.headerField(\.generation, as: UInt64.self)
                streamrecv_shm_store_u64(generation, streamrecv_shm_load_u64(generation) + 1)
                lastLayout = layout
            }
            let slot = ring.slot(index)
            streamrecv_shm_write_begin(slot)
            fill(UnsafeMutableRawBufferPointer(start: ring.slotData(index), count: layout.byteCount), layout)
            slot.pointee.sequence = next
            slot.pointee.generation = streamrecv_shm_load_u64(ring.headerField(\.generation, as: UInt64.self))
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
            streamrecv_shm_store_u64(ring.headerField(\.latest_sequence, as: UInt64.self), next)
            streamrecv_shm_add_u64(ring.headerField(\.frames_published, as: UInt64.self), 1)
            streamrecv_shm_wake_all(ring.header)
        }
        sequence = next
        return .published(sequence: next)
    }

    public func setState(_ state: StreamState) {
        object.withMapping { base in
            let ring = RingPointers(base: base)
            streamrecv_shm_store_u32(ring.headerField(\.stream_state, as: UInt32.self), state.rawValue)
            streamrecv_shm_wake_all(ring.header)
        }
    }

    /// Ticks per second of the slots' pts (0: pts is the access-unit index).
    public func setPTSClockRate(_ rate: UInt32) {
        object.withMapping { base in
            RingPointers(base: base).headerField(\.pts_clock_rate, as: UInt32.self).pointee = rate
        }
    }

    public func setCodec(_ codec: String) {
        object.withMapping { base in
            CString.write(codec, to: RingPointers(base: base).headerField(\.codec, as: UInt8.self), capacity: 16)
        }
    }

    /// Adds to the header's counters.
    public func count(_ counter: WritableKeyPath<RingCounters, UInt64>, _ amount: UInt64 = 1) {
        guard let field = RingPointers.counterFields[counter] else { return }
        object.withMapping { base in
            streamrecv_shm_add_u64(RingPointers(base: base).headerField(field, as: UInt64.self), amount)
        }
    }

    public var counters: RingCounters {
        object.withMapping { RingPointers(base: $0).loadCounters() }
    }

    /// Whether the object still has the size we mapped (someone may have truncated it: touching the missing
    /// pages would kill the daemon with SIGBUS, so the pipeline checks before publishing).
    public var isIntact: Bool { object.currentSize >= geometry.totalSize }

    /// False when the name under /dev/shm no longer leads to this object (someone unlinked or replaced it): new
    /// readers cannot find the ring. One shm_open and fstat: call it now and then, not per frame.
    public var isStillNamed: Bool { SharedMemoryObject.currentInode(name: configuration.shmName) == object.inode }

    /// Removes the name; readers that have it mapped keep reading what is there.
    public func unlink() {
        SharedMemoryObject.unlink(name: configuration.shmName)
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
