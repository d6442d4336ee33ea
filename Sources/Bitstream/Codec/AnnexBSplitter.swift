/// One NAL unit cut out of an Annex B byte stream.
public struct NALUnit: Sendable, Equatable {
    /// Header and payload, still escaped; the start code and any trailing zero bytes are removed.
    /// Ownership: a copy-on-write view of either the caller's input chunk (when the unit lay wholly inside one
    /// chunk) or the splitter's carry buffer. It stays valid as long as it is held; a view of the carry buffer
    /// still held when the splitter next emits from it makes the splitter allocate a new buffer.
    public var bytes: ArraySlice<UInt8>
    /// Stream offset of the start code, counting the `zero_byte` when one precedes `00 00 01`.
    public var startCodeOffset: Int64
    /// 4 when a `zero_byte` precedes `00 00 01`, else 3.
    public var startCodeLength: Int

    public init(bytes: ArraySlice<UInt8>, startCodeOffset: Int64, startCodeLength: Int) {
        self.bytes = bytes
        self.startCodeOffset = startCodeOffset
        self.startCodeLength = startCodeLength
    }
}

/// Splits an Annex B byte stream (H.264/H.265 Annex B) into NAL units, incrementally.
///
/// Input arrives in chunks of any size; the output is the same whatever the chunking. A NAL unit is handed out
/// as soon as the start code after it arrives, or at `flush()`. Units longer than `maximumNALUnitSize` are
/// discarded up to the next start code and counted; bytes before the first start code are discarded and counted.
/// Zero heap allocations per NAL unit in steady state: units inside one chunk are slices of that chunk, units
/// that span chunks are gathered in one reused carry buffer.
public struct AnnexBSplitter {
    public struct Statistics: Sendable, Equatable {
        public var nalUnits = 0
        public var bytesIn: Int64 = 0
        /// Units dropped for exceeding `maximumNALUnitSize`.
        public var oversizedNALUnits = 0
        /// Bytes that were neither in a NAL unit nor in a start code (garbage before a start code, oversized units).
        public var discardedBytes: Int64 = 0
        /// Start codes followed directly by another start code (or only zeros).
        public var emptyNALUnits = 0
        /// Times bytes arrived after `flush()` that continued the flushed unit instead of starting a new one.
        public var continuationsAfterFlush = 0

        public init() {}
    }

    private enum State { case seekingStartCode, inNALUnit, discardingOversized }

    public let maximumNALUnitSize: Int
    public private(set) var statistics = Statistics()
    private var state = State.seekingStartCode
    private var carry: [UInt8] = []
    /// The carry buffer of the unit emitted from it last (see `recycleCarry`).
    private var spareCarry: [UInt8] = []
    private var unitStartCodeOffset: Int64 = 0
    private var unitStartCodeLength = 0
    /// Stream offset of the next chunk's first byte.
    private var streamOffset: Int64 = 0
    /// Zero bytes at the very end of the input so far, saturating at 3: a start code can straddle chunks.
    private var trailingZeros = 0
    private var flushedSinceLastStartCode = false

    /// - Parameter maximumNALUnitSize: the largest unit handed out, in bytes (header included, start code not).
    public init(maximumNALUnitSize: Int = 16 << 20) {
        precondition(maximumNALUnitSize > 0, "maximumNALUnitSize must be positive")
        self.maximumNALUnitSize = maximumNALUnitSize
    }

    /// Feeds the next chunk of the stream; `emit` is called, in stream order, for every unit it completes.
    public mutating func append(_ chunk: ArraySlice<UInt8>, _ emit: (NALUnit) -> Void) {
        chunk.withUnsafeBytes { raw in scan(chunk, raw, emit) }
        streamOffset += Int64(chunk.count)
        statistics.bytesIn += Int64(chunk.count)
    }

    public mutating func append(_ chunk: [UInt8], _ emit: (NALUnit) -> Void) {
        append(chunk[...], emit)
    }

    /// The bytes so far of the unit in progress (header first, still escaped); nil when none is in progress.
    /// A view of the carry buffer: look, then let go before the next `append`.
    public var unitInProgress: ArraySlice<UInt8>? {
        guard state == .inNALUnit, !carry.isEmpty else { return nil }
        return carry[...]
    }

    /// Ends the unit in progress at the end of the input (the connection closed). If bytes come after all and
    /// continue that unit, they are discarded up to the next start code and `continuationsAfterFlush` counts it.
    public mutating func flush(_ emit: (NALUnit) -> Void) {
        if state == .inNALUnit {
            let end = carry.withUnsafeBytes { Self.endOfUnit($0, before: $0.count, from: 0) }
            emitUnit(carry[0..<end], emit)
            recycleCarry()
            flushedSinceLastStartCode = true
        }
        // Zeros before the flush belong to what was flushed: a start code right after it (an MPEG-TS PES packet's
        // first bytes) begins where its own bytes begin, not in the bytes before.
        trailingZeros = 0
        state = .seekingStartCode
    }

    // MARK: - Scanning

    private mutating func scan(_ chunk: ArraySlice<UInt8>, _ raw: UnsafeRawBufferPointer, _ emit: (NALUnit) -> Void) {
        let count = raw.count
        guard count > 0 else { return }
        var position = 0  // first byte of this chunk not yet given to a unit or discarded
        // Start codes whose zeros lie (partly) in earlier chunks.
        if trailingZeros >= 2 && raw[0] == 1 {
            startCode(oneAt: 0, zerosBefore: trailingZeros, chunk, raw, &position, emit)
        } else if trailingZeros >= 1 && count >= 2 && raw[0] == 0 && raw[1] == 1 {
            startCode(oneAt: 1, zerosBefore: trailingZeros + 1, chunk, raw, &position, emit)
        }
        var searchFrom = position
        while let first = StartCodeScanner.firstStartCode(in: raw, from: searchFrom) {
            var zeros = 2
            var index = first - 1
            while index >= position && raw[index] == 0 { zeros += 1; index -= 1 }
            if index < 0 { zeros += trailingZeros }
            startCode(oneAt: first + 2, zerosBefore: zeros, chunk, raw, &position, emit)
            searchFrom = position
        }
        // The rest of the chunk belongs to the unit in progress, if any.
        let tail = count - position
        switch state {
        case .inNALUnit:
            if carry.count + tail > maximumNALUnitSize {
                state = .discardingOversized
                statistics.oversizedNALUnits += 1
                statistics.discardedBytes += Int64(carry.count + tail)
                carry.removeAll(keepingCapacity: true)
            } else {
                carry.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[position..<count]))
            }
        case .discardingOversized:
            statistics.discardedBytes += Int64(tail)
        case .seekingStartCode:
            noteDiscarded(raw, position..<count)
        }
        var zeroRun = 0
        while zeroRun < 3 && zeroRun < count && raw[count - 1 - zeroRun] == 0 { zeroRun += 1 }
        trailingZeros = zeroRun == count ? min(3, trailingZeros + count) : zeroRun
    }

    /// A start code whose `01` byte is at `one`, preceded by `zeros` zero bytes (possibly reaching into earlier
    /// chunks): finishes the unit in progress and starts the next.
    private mutating func startCode(
        oneAt one: Int, zerosBefore zeros: Int,
        _ chunk: ArraySlice<UInt8>, _ raw: UnsafeRawBufferPointer,
        _ position: inout Int, _ emit: (NALUnit) -> Void
    ) {
        let endInChunk = max(position, one - zeros)
        switch state {
        case .inNALUnit:
            if carry.isEmpty {
                let base = chunk.startIndex
                emitUnit(chunk[(base + position)..<(base + endInChunk)], emit)
            } else {
                carry.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[position..<endInChunk]))
                let end = carry.withUnsafeBytes { Self.endOfUnit($0, before: $0.count, from: 0) }
                emitUnit(carry[0..<end], emit)
                recycleCarry()
            }
        case .discardingOversized:
            statistics.discardedBytes += Int64(endInChunk - position)
        case .seekingStartCode:
            noteDiscarded(raw, position..<endInChunk)
        }
        let length = zeros >= 3 ? 4 : 3
        state = .inNALUnit
        unitStartCodeOffset = streamOffset + Int64(one + 1 - length)
        unitStartCodeLength = length
        flushedSinceLastStartCode = false
        position = one + 1
    }

    /// After a unit was emitted from the carry buffer: continue in the buffer emitted the time before, which
    /// its consumer has let go of by now (so no allocation), and keep this one aside for next time.
    private mutating func recycleCarry() {
        swap(&carry, &spareCarry)
        carry.removeAll(keepingCapacity: true)
    }

    private mutating func emitUnit(_ bytes: ArraySlice<UInt8>, _ emit: (NALUnit) -> Void) {
        guard !bytes.isEmpty else {
            statistics.emptyNALUnits += 1
            return
        }
        guard bytes.count <= maximumNALUnitSize else {
            statistics.oversizedNALUnits += 1
            statistics.discardedBytes += Int64(bytes.count)
            return
        }
        statistics.nalUnits += 1
        emit(NALUnit(bytes: bytes, startCodeOffset: unitStartCodeOffset, startCodeLength: unitStartCodeLength))
    }

    private mutating func noteDiscarded(_ raw: UnsafeRawBufferPointer, _ range: Range<Int>) {
        guard !range.isEmpty else { return }
        // Zero bytes before a start code are legal padding (leading_zero_8bits / trailing_zero_8bits).
        var garbage = 0
        for index in range where raw[index] != 0 { garbage += 1 }
        guard garbage > 0 else { return }
        statistics.discardedBytes += Int64(garbage)
        if flushedSinceLastStartCode {
            statistics.continuationsAfterFlush += 1
            flushedSinceLastStartCode = false
        }
    }

    /// End of a unit's bytes in `raw[from..<before]` with trailing zero bytes removed (a NAL unit never ends in
    /// a zero byte: its last byte holds `rbsp_stop_one_bit` or the `03` after a `cabac_zero_word`).
    private static func endOfUnit(_ raw: UnsafeRawBufferPointer, before: Int, from: Int) -> Int {
        var end = before
        while end > from && raw[end - 1] == 0 { end -= 1 }
        return end
    }
}
