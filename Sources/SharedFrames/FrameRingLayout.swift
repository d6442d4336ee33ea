import CFrameRing
import Glibc

/// Stream state as the ABI's `enum streamrecv_stream_state`.
public enum StreamState: UInt32, Sendable, CustomStringConvertible {
    case starting = 0, waiting = 1, streaming = 2, degraded = 3, stopped = 4
    /// The writer moved the stream to a new object under the same name: readers open the name again.
    case replaced = 5

    public var description: String {
        switch self {
        case .starting: return "starting"
        case .waiting: return "waiting"
        case .streaming: return "streaming"
        case .degraded: return "degraded"
        case .stopped: return "stopped"
        case .replaced: return "replaced"
        }
    }
}

/// Frame flags as the ABI's `STREAMRECV_FRAME_*`.
public struct FrameFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let keyframe = Self(rawValue: 1 << 0)
    public static let corrupt = Self(rawValue: 1 << 1)
    public static let discontinuity = Self(rawValue: 1 << 2)
    public static let horizontalFlip = Self(rawValue: 1 << 3)
    public static let verticalFlip = Self(rawValue: 1 << 4)
}

/// Sizes and offsets of one ring object (see streamrecv_shm.h). The writer derives them from the slot count and the
/// capacity the current format needs; a reader takes them from a header validated against its mapping
/// (`streamrecv_shm_check_header`) and never reads the header's geometry again.
struct RingGeometry: Equatable {
    static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    let slotCount: Int
    let slotTableOffset: Int
    let slotDataOffset: Int
    let slotDataStride: Int
    let slotDataCapacity: Int
    let totalSize: Int

    init(slotCount: Int, slotCapacity: Int) {
        self.slotCount = slotCount
        slotTableOffset = Int(STREAMRECV_SHM_HEADER_SIZE)
        slotDataOffset = Self.roundUp(slotTableOffset + slotCount * Int(STREAMRECV_SHM_SLOT_SIZE))
        slotDataStride = Self.roundUp(slotCapacity)
        slotDataCapacity = slotDataStride
        totalSize = slotDataOffset + slotCount * slotDataStride
    }

    /// The geometry of a mapped header, or why it is not a ring that fits in `mappedSize` bytes.
    static func validated(_ header: UnsafePointer<streamrecv_shm_header>, mappedSize: Int) -> Result<RingGeometry, RingDefect> {
        var checked = streamrecv_shm_geometry()
        if let reason = streamrecv_shm_check_header(header, UInt64(mappedSize), &checked) {
            return .failure(RingDefect(reason: String(cString: reason)))
        }
        // Every value is now at most mappedSize, so it fits in an Int.
        return .success(RingGeometry(
            slotCount: Int(checked.slot_count), slotTableOffset: Int(checked.slot_table_offset),
            slotDataOffset: Int(checked.slot_data_offset), slotDataStride: Int(checked.slot_data_stride),
            slotDataCapacity: Int(checked.slot_data_capacity), totalSize: Int(checked.total_size)))
    }

    private init(slotCount: Int, slotTableOffset: Int, slotDataOffset: Int, slotDataStride: Int, slotDataCapacity: Int, totalSize: Int) {
        self.slotCount = slotCount
        self.slotTableOffset = slotTableOffset
        self.slotDataOffset = slotDataOffset
        self.slotDataStride = slotDataStride
        self.slotDataCapacity = slotDataCapacity
        self.totalSize = totalSize
    }

    /// The C view, for `streamrecv_shm_check_slot`.
    var checked: streamrecv_shm_geometry {
        streamrecv_shm_geometry(
            slot_count: UInt32(slotCount), reserved: 0, slot_table_offset: UInt64(slotTableOffset),
            slot_data_offset: UInt64(slotDataOffset), slot_data_stride: UInt64(slotDataStride),
            slot_data_capacity: UInt64(slotDataCapacity), total_size: UInt64(totalSize))
    }

    static func roundUp(_ value: Int) -> Int { (value + pageSize - 1) / pageSize * pageSize }

    /// Writes this geometry and the ABI's sizes into a zeroed header: everything but the magic, which the writer
    /// stores last.
    func write(into header: UnsafeMutablePointer<streamrecv_shm_header>) {
        header.pointee.abi_version = STREAMRECV_SHM_ABI_VERSION
        header.pointee.header_size = STREAMRECV_SHM_HEADER_SIZE
        header.pointee.slot_size = STREAMRECV_SHM_SLOT_SIZE
        header.pointee.slot_count = UInt32(slotCount)
        header.pointee.slot_table_offset = UInt64(slotTableOffset)
        header.pointee.slot_data_offset = UInt64(slotDataOffset)
        header.pointee.slot_data_stride = UInt64(slotDataStride)
        header.pointee.slot_data_capacity = UInt64(slotDataCapacity)
        header.pointee.total_size = UInt64(totalSize)
    }
}

/// Why a shared-memory object is not a usable ring.
struct RingDefect: Error, Sendable {
    var reason: String
}

/// Pointers into a mapped ring: header fields from the C struct layout, slots from a geometry the caller trusts
/// (its own, or one validated against the mapping).
struct RingPointers {
    let base: UnsafeMutableRawPointer
    let geometry: RingGeometry

    var header: UnsafeMutablePointer<streamrecv_shm_header> {
        base.assumingMemoryBound(to: streamrecv_shm_header.self)
    }

    func headerField<T>(_ field: PartialKeyPath<streamrecv_shm_header>, as type: T.Type) -> UnsafeMutablePointer<T> {
        (base + MemoryLayout<streamrecv_shm_header>.offset(of: field)!).assumingMemoryBound(to: T.self)
    }

    func slot(_ index: Int) -> UnsafeMutablePointer<streamrecv_shm_slot> {
        (base + geometry.slotTableOffset + index * Int(STREAMRECV_SHM_SLOT_SIZE)).assumingMemoryBound(to: streamrecv_shm_slot.self)
    }

    func slotField<T>(_ index: Int, _ field: KeyPath<streamrecv_shm_slot, T>) -> UnsafeMutablePointer<T> {
        (UnsafeMutableRawPointer(slot(index)) + MemoryLayout<streamrecv_shm_slot>.offset(of: field)!).assumingMemoryBound(to: T.self)
    }

    func slotData(_ index: Int) -> UnsafeMutableRawPointer {
        base + geometry.slotDataOffset + index * geometry.slotDataStride
    }
}

/// The ring's counters, as published in the header.
public struct RingCounters: Sendable, Equatable {
    public var bytesReceived: UInt64 = 0
    public var accessUnits: UInt64 = 0
    public var framesDecoded: UInt64 = 0
    public var framesPublished: UInt64 = 0
    public var framesDropped: UInt64 = 0
    public var decodeErrors: UInt64 = 0
    public var decoderRecreations: UInt64 = 0
    public var connections: UInt64 = 0
    public init() {}
}

extension RingPointers {
    nonisolated(unsafe) static let counterFields: [WritableKeyPath<RingCounters, UInt64>: PartialKeyPath<streamrecv_shm_header>] = [
        \.bytesReceived: \streamrecv_shm_header.bytes_received,
        \.accessUnits: \streamrecv_shm_header.access_units,
        \.framesDecoded: \streamrecv_shm_header.frames_decoded,
        \.framesPublished: \streamrecv_shm_header.frames_published,
        \.framesDropped: \streamrecv_shm_header.frames_dropped,
        \.decodeErrors: \streamrecv_shm_header.decode_errors,
        \.decoderRecreations: \streamrecv_shm_header.decoder_recreations,
        \.connections: \streamrecv_shm_header.connections,
    ]

    func loadCounters() -> RingCounters {
        var counters = RingCounters()
        for (key, field) in Self.counterFields {
            counters[keyPath: key] = streamrecv_shm_load_u64(headerField(field, as: UInt64.self))
        }
        return counters
    }
}

/// Fixed-size C char arrays (imported as tuples) to and from Swift strings.
enum CString {
    static func read<T>(_ tuple: T) -> String {
        withUnsafeBytes(of: tuple) { raw in
            let bytes = raw.prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    /// At most `capacity - 1` bytes and a NUL, cut before a character that does not fit whole (a reader would
    /// otherwise show half of it as U+FFFD: an RTSP server's reason phrase can run past the field).
    static func write(_ string: String, to pointer: UnsafeMutableRawPointer, capacity: Int) {
        let all = Array(string.utf8)
        var end = min(all.count, capacity - 1)
        // The first byte left out continues a character (10xxxxxx): leave out the rest of it, back to its lead byte.
        while end > 0, end < all.count, all[end] & 0xC0 == 0x80 { end -= 1 }
        let bytes = all[..<end]
        pointer.initializeMemory(as: UInt8.self, repeating: 0, count: capacity)
        if !bytes.isEmpty { bytes.withUnsafeBytes { pointer.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) } }
    }
}
