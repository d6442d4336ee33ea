import CFrameRing
import Glibc
@testable import SharedFrames
import Testing

/// A zeroed, page-aligned buffer standing in for a mapping, with a header describing `geometry` written as a
/// writer writes it (magic included unless `magic` is false).
private final class FakeMapping {
    let base: UnsafeMutableRawPointer
    let size: Int

    init(size: Int) {
        self.size = size
        base = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: RingGeometry.pageSize)
        base.initializeMemory(as: UInt8.self, repeating: 0, count: size)
    }

    /// `size`: the bytes actually allocated, when only the header will be read (the check reads nothing else).
    convenience init(_ geometry: RingGeometry, magic: Bool = true, size: Int? = nil) {
        self.init(size: size ?? max(geometry.totalSize, Int(STREAMRECV_SHM_HEADER_SIZE)))
        geometry.write(into: header)
        if magic { header.pointee.magic = STREAMRECV_SHM_MAGIC }
    }

    deinit { base.deallocate() }

    var header: UnsafeMutablePointer<streamrecv_shm_header> { base.assumingMemoryBound(to: streamrecv_shm_header.self) }

    func validated(mappedSize: Int? = nil) -> Result<RingGeometry, RingDefect> {
        RingGeometry.validated(UnsafePointer(header), mappedSize: mappedSize ?? size)
    }

    /// Why validation failed, or nil when it did not.
    func defect(mappedSize: Int? = nil) -> String? {
        if case .failure(let defect) = validated(mappedSize: mappedSize) { defect.reason } else { nil }
    }
}

@Suite struct FrameRingLayoutTests {
    let page = Int(getpagesize())

    // MARK: Values shared with the C header

    @Test func streamStatesAreTheABIsValues() {
        #expect(StreamState.starting.rawValue == STREAMRECV_STATE_STARTING.rawValue)
        #expect(StreamState.waiting.rawValue == STREAMRECV_STATE_WAITING.rawValue)
        #expect(StreamState.streaming.rawValue == STREAMRECV_STATE_STREAMING.rawValue)
        #expect(StreamState.degraded.rawValue == STREAMRECV_STATE_DEGRADED.rawValue)
        #expect(StreamState.stopped.rawValue == STREAMRECV_STATE_STOPPED.rawValue)
        #expect(StreamState.replaced.rawValue == STREAMRECV_STATE_REPLACED.rawValue)
        #expect(StreamState(rawValue: 6) == nil, "a state this ABI version does not know")
    }

    @Test func streamStatesDescribeThemselvesAsStatusPrintsThem() {
        let states: [StreamState] = [.starting, .waiting, .streaming, .degraded, .stopped, .replaced]
        #expect(states.map(\.description) == ["starting", "waiting", "streaming", "degraded", "stopped", "replaced"])
    }

    @Test func frameFlagsAreTheABIsBits() {
        #expect(FrameFlags.keyframe.rawValue == STREAMRECV_FRAME_KEYFRAME)
        #expect(FrameFlags.corrupt.rawValue == STREAMRECV_FRAME_CORRUPT)
        #expect(FrameFlags.discontinuity.rawValue == STREAMRECV_FRAME_DISCONTINUITY)
        #expect(FrameFlags.horizontalFlip.rawValue == STREAMRECV_FRAME_HFLIP)
        #expect(FrameFlags.verticalFlip.rawValue == STREAMRECV_FRAME_VFLIP)
        let all: FrameFlags = [.keyframe, .corrupt, .discontinuity, .horizontalFlip, .verticalFlip]
        #expect(all.rawValue == 0x1F, "five distinct bits")
    }

    // MARK: Geometry a writer lays out

    /// The slot table follows the 4096-byte header; pixel data starts on the next page boundary after the table.
    @Test(arguments: [2, 4, 15, 16, 17, 32, 100])
    func slotDataBeginsOnThePageAfterTheSlotTable(slots: Int) {
        let geometry = RingGeometry(slotCount: slots, slotCapacity: 0)
        let tableEnd = 4096 + slots * 256
        #expect(geometry.slotTableOffset == 4096)
        #expect(geometry.slotDataOffset % page == 0)
        #expect(geometry.slotDataOffset >= tableEnd && geometry.slotDataOffset < tableEnd + page)
    }

    @Test func sixteenSlotsFillTheirPageExactlyAndASeventeenthTakesAnother() {
        #expect(RingGeometry(slotCount: 16, slotCapacity: 0).slotDataOffset == 8192)
        #expect(RingGeometry(slotCount: 17, slotCapacity: 0).slotDataOffset == 8192 + page)
    }

    /// Each slot's data is a whole number of pages, so every slot's pixels start page aligned too.
    @Test(arguments: [(1, 1), (4096, 1), (4097, 2), (8192, 2), (1920 * 1080 * 3 / 2, 760)])
    func aSlotsCapacityIsRoundedUpToWholePages(capacity: Int, pages: Int) {
        let geometry = RingGeometry(slotCount: 4, slotCapacity: capacity)
        #expect(geometry.slotDataStride == pages * page)
        #expect(geometry.slotDataCapacity == geometry.slotDataStride, "the rounding is usable, not padding")
        #expect(geometry.totalSize == geometry.slotDataOffset + 4 * pages * page)
    }

    /// A stream starts with slots of capacity 0 (docs/shm-abi.md): header and table only.
    @Test func aRingWithNoFormatYetIsOnlyHeaderAndTable() {
        let geometry = RingGeometry(slotCount: 8, slotCapacity: 0)
        #expect(geometry.slotDataStride == 0 && geometry.slotDataCapacity == 0)
        #expect(geometry.totalSize == geometry.slotDataOffset)
        #expect(geometry.totalSize == 8192)
    }

    @Test func roundingUpLeavesPageMultiplesAlone() {
        #expect(RingGeometry.roundUp(0) == 0)
        #expect(RingGeometry.roundUp(1) == page)
        #expect(RingGeometry.roundUp(page) == page)
        #expect(RingGeometry.roundUp(page + 1) == 2 * page)
    }

    // MARK: Geometry a reader validates

    /// What a writer lays out, the C check accepts unchanged, and the C view carries the same values.
    @Test(arguments: [(2, 0), (4, 4096), (17, 100_000), (64, 1)])
    func aWritersGeometryValidatesAsItself(slots: Int, capacity: Int) throws {
        let geometry = RingGeometry(slotCount: slots, slotCapacity: capacity)
        let validated = try FakeMapping(geometry).validated().get()
        #expect(validated == geometry)
        let checked = geometry.checked
        #expect(Int(checked.slot_count) == slots && Int(checked.slot_table_offset) == geometry.slotTableOffset)
        #expect(Int(checked.slot_data_offset) == geometry.slotDataOffset && Int(checked.slot_data_stride) == geometry.slotDataStride)
        #expect(Int(checked.slot_data_capacity) == geometry.slotDataCapacity && Int(checked.total_size) == geometry.totalSize)
    }

    /// Another writer may leave room past the capacity: a reader keeps the header's values, not its own layout.
    @Test func aReaderKeepsTheHeadersValuesEvenWhereItsOwnLayoutDiffers() throws {
        let mapping = FakeMapping(RingGeometry(slotCount: 2, slotCapacity: 8192))
        mapping.header.pointee.slot_data_capacity = 5000
        let validated = try mapping.validated().get()
        #expect(validated.slotDataCapacity == 5000 && validated.slotDataStride == 8192)
    }

    /// The writer stores the magic last: a header without it is not a ring yet, whatever else it says.
    @Test func aHeaderWithoutItsMagicIsNotARingYet() {
        let mapping = FakeMapping(RingGeometry(slotCount: 2, slotCapacity: 0), magic: false)
        #expect(mapping.defect()?.hasPrefix("no magic") == true)
    }

    @Test func aMappingSmallerThanAHeaderIsRefusedBeforeItIsRead() {
        let mapping = FakeMapping(RingGeometry(slotCount: 2, slotCapacity: 0))
        #expect(mapping.defect(mappedSize: 4095) == "smaller than a header")
    }

    /// Forged headers (anyone may create an object under /dev/shm): each is refused with its reason.
    @Test(arguments: [
        ("abi", "another ABI version"),
        ("header size", "unexpected header or slot size"),
        ("slot size", "unexpected header or slot size"),
        ("no slots", "slot count out of range"),
        ("too many slots", "slot count out of range"),
        ("table inside header", "slot table offset out of range"),
        ("misaligned table", "slot table offset out of range"),
        ("capacity over stride", "slot capacity larger than its stride"),
        ("table over data", "slot table overlaps the data"),
        ("data past end", "slot data beyond total_size"),
        ("larger than mapped", "total_size larger than the object"),
    ])
    func aForgedHeaderIsRefusedWithItsReason(forgery: String, reason: String) {
        let mapping = FakeMapping(RingGeometry(slotCount: 4, slotCapacity: 4096))
        let header = mapping.header
        switch forgery {
        case "abi": header.pointee.abi_version = 2
        case "header size": header.pointee.header_size = 2048
        case "slot size": header.pointee.slot_size = 128
        case "no slots": header.pointee.slot_count = 0
        case "too many slots": header.pointee.slot_count = (1 << 20) + 1
        case "table inside header": header.pointee.slot_table_offset = 64
        case "misaligned table": header.pointee.slot_table_offset = 4096 + 8
        case "capacity over stride": header.pointee.slot_data_capacity = header.pointee.slot_data_stride + 1
        case "table over data": header.pointee.slot_data_offset = 4096 + 3 * 256
        case "data past end": header.pointee.total_size -= 1
        default: header.pointee.total_size = UInt64(mapping.size) + 1
        }
        #expect(mapping.defect() == reason)
    }

    /// Sizes chosen so that the C check's multiplications and additions wrap in 64 bits: refused, never
    /// accepted with a wrapped-around end.
    @Test func sizesThatWouldOverflowAreRefused() {
        let mapping = FakeMapping(RingGeometry(slotCount: 4, slotCapacity: 4096))
        let header = mapping.header
        // 4 × 2^62 wraps to 0: the data would "end" at its own offset.
        header.pointee.slot_data_stride = 1 << 62
        header.pointee.slot_data_capacity = 0
        #expect(mapping.defect() == "slot data beyond total_size")
        // offset + 4 × 4096 wraps past 2^64.
        header.pointee.slot_data_stride = 4096
        header.pointee.slot_data_offset = UInt64.max - 4096
        #expect(mapping.defect() == "slot data beyond total_size")
        // The table's end wraps.
        header.pointee.slot_data_offset = 8192
        header.pointee.slot_table_offset = UInt64.max - 63
        #expect(mapping.defect() == "slot table overlaps the data")
    }

    @Test func theLargestSlotCountIsAccepted() throws {
        let geometry = RingGeometry(slotCount: 1 << 20, slotCapacity: 0)
        // 256 MiB of slot table: a header is all the check reads, so only a header is allocated.
        let validated = try FakeMapping(geometry, size: 4096).validated(mappedSize: geometry.totalSize).get()
        #expect(validated.slotCount == 1 << 20)
    }

    // MARK: Pointers into a mapping

    /// Slots and their data where the C helpers find them, from the same validated geometry.
    @Test func slotAndDataAddressesAgreeWithTheCHelpers() throws {
        let mapping = FakeMapping(RingGeometry(slotCount: 5, slotCapacity: 5000))
        let geometry = try mapping.validated().get()
        let ring = RingPointers(base: mapping.base, geometry: geometry)
        var checked = geometry.checked
        for index in 0..<5 {
            #expect(UnsafeRawPointer(ring.slot(index)) == UnsafeRawPointer(streamrecv_shm_slot_in(mapping.base, &checked, UInt32(index))))
            #expect(UnsafeRawPointer(ring.slotData(index)) == UnsafeRawPointer(streamrecv_shm_data_in(mapping.base, &checked, UInt32(index))))
        }
        #expect(ring.slotData(0).distance(to: ring.slotData(1)) == 2 * page)
        #expect(UnsafeRawPointer(ring.slotField(2, \.sequence)) == UnsafeRawPointer(ring.slot(2)) + 8)
    }

    /// The header fields the reader loads atomically, at the offsets streamrecv_shm.h asserts.
    @Test func headerFieldsAreAtTheABIsOffsets() {
        let mapping = FakeMapping(size: 4096)
        let ring = RingPointers(base: mapping.base, geometry: RingGeometry(slotCount: 2, slotCapacity: 0))
        func offset<T>(_ pointer: UnsafeMutablePointer<T>) -> Int { mapping.base.distance(to: UnsafeMutableRawPointer(pointer)) }
        #expect(offset(ring.headerField(\.stream_state, as: UInt32.self)) == 76)
        #expect(offset(ring.headerField(\.writer_epoch, as: UInt64.self)) == 80)
        #expect(offset(ring.headerField(\.generation, as: UInt64.self)) == 88)
        #expect(offset(ring.headerField(\.latest_sequence, as: UInt64.self)) == 96)
        #expect(offset(ring.headerField(\.wake_word, as: UInt32.self)) == 104)
        #expect(offset(ring.headerField(\.bytes_received, as: UInt64.self)) == 192)
        #expect(offset(ring.headerField(\.source_status, as: UInt8.self)) == 256)
    }

    /// Each counter is read from its own field: a swapped pair in the key-path table would show here.
    @Test func countersAreLoadedFromTheirOwnFields() {
        let mapping = FakeMapping(size: 4096)
        let header = mapping.header
        header.pointee.bytes_received = 101
        header.pointee.access_units = 102
        header.pointee.frames_decoded = 103
        header.pointee.frames_published = 104
        header.pointee.frames_dropped = 105
        header.pointee.decode_errors = 106
        header.pointee.decoder_recreations = 107
        header.pointee.connections = 108
        let counters = RingPointers(base: mapping.base, geometry: RingGeometry(slotCount: 2, slotCapacity: 0)).loadCounters()
        var expected = RingCounters()
        (expected.bytesReceived, expected.accessUnits, expected.framesDecoded, expected.framesPublished) = (101, 102, 103, 104)
        (expected.framesDropped, expected.decodeErrors, expected.decoderRecreations, expected.connections) = (105, 106, 107, 108)
        #expect(counters == expected)
        #expect(RingPointers.counterFields.count == 8)
    }

    // MARK: Fixed-size strings

    @Test func aStringReadsUpToItsTerminator() {
        var codec: (CChar, CChar, CChar, CChar, CChar, CChar) = (0x68, 0x32, 0x36, 0x34, 0, 0x41)
        #expect(CString.read(codec) == "h264", "bytes after the NUL are not part of it")
        codec.0 = 0
        #expect(CString.read(codec) == "")
    }

    /// A forged header may leave no terminator: the read stops at the array's end, not past it.
    @Test func aStringFillingItsWholeArrayIsReadToTheArraysEnd() {
        let mapping = FakeMapping(size: 4096)
        (mapping.base + 176).initializeMemory(as: UInt8.self, repeating: 0x7A, count: 16)  // codec[16]
        (mapping.base + 192).initializeMemory(as: UInt8.self, repeating: 0x41, count: 8)   // the field after it
        #expect(CString.read(mapping.header.pointee.codec) == String(repeating: "z", count: 16))
    }

    @Test func writingTruncatesTerminatesAndClearsTheRest() {
        let mapping = FakeMapping(size: 4096)
        let field = mapping.base + 112  // stream_name[64]
        field.initializeMemory(as: UInt8.self, repeating: 0xEE, count: 64)
        CString.write("cam", to: field, capacity: 64)
        #expect(CString.read(mapping.header.pointee.stream_name) == "cam")
        #expect(UnsafeRawBufferPointer(start: field + 3, count: 61).allSatisfy { $0 == 0 }, "no old byte is left behind")
        CString.write(String(repeating: "x", count: 100), to: field, capacity: 64)
        #expect(CString.read(mapping.header.pointee.stream_name) == String(repeating: "x", count: 63))
        #expect(field.load(fromByteOffset: 63, as: UInt8.self) == 0, "the last byte is always the terminator")
        #expect(mapping.base.load(fromByteOffset: 176, as: UInt8.self) == 0, "nothing is written past the capacity")
    }

    @Test func nonASCIIRoundTrips() {
        let mapping = FakeMapping(size: 4096)
        CString.write("rtsp playing h264 — caméra", to: mapping.base + 256, capacity: 128)
        #expect(CString.read(mapping.header.pointee.source_status) == "rtsp playing h264 — caméra")
    }

    /// A status cut at the field's size keeps whole characters: cut inside one, readers would show U+FFFD where the
    /// text ended (the RTSP client's status may carry a server's reason phrase).
    @Test func truncationKeepsWholeCharacters() {
        let mapping = FakeMapping(size: 4096)
        // é is 2 bytes: bytes 126 and 127 of a 128-byte field that holds 127 and a NUL.
        CString.write(String(repeating: "a", count: 126) + "é", to: mapping.base + 256, capacity: 128)
        #expect(CString.read(mapping.header.pointee.source_status) == String(repeating: "a", count: 126))
        // A 4-byte character cut after its second byte, and one that ends exactly at the limit (kept).
        CString.write(String(repeating: "b", count: 125) + "🎥", to: mapping.base + 256, capacity: 128)
        #expect(CString.read(mapping.header.pointee.source_status) == String(repeating: "b", count: 125))
        CString.write(String(repeating: "c", count: 125) + "é" + "z", to: mapping.base + 256, capacity: 128)
        #expect(CString.read(mapping.header.pointee.source_status) == String(repeating: "c", count: 125) + "é")
    }
}
