/// Reads the bits of an RBSP straight from the escaped NAL payload (EBSP), dropping each
/// `emulation_prevention_three_byte` as it goes, so parsing allocates nothing.
///
/// Errors are sticky (as in dav1d's getbits): a read past the end returns zero and sets `hasError`; every later
/// read returns zero too. Parsers use the throwing helpers (`bits(_:_:)`, `ue(_:max:)`, …), which check the
/// sticky error and the value's range right after each read, and the non-throwing primitives for bulk skips.
public struct BitReader {
    private let bytes: ArraySlice<UInt8>
    private var nextIndex: Int
    private var zeroRun = 0
    private var current: UInt8 = 0
    private var currentIndex: Int
    private var bitsLeft = 0
    /// Set by the first read past the end of the payload; never cleared.
    public private(set) var hasError = false
    /// Bits consumed so far (RBSP bits: emulation-prevention bytes are not counted).
    public private(set) var bitsRead = 0

    /// - Parameter payload: the NAL unit bytes after its header, still escaped. The reader keeps a reference
    ///   (copy-on-write) and never writes to it.
    public init(_ payload: ArraySlice<UInt8>) {
        bytes = payload
        nextIndex = payload.startIndex
        currentIndex = payload.startIndex
    }

    private mutating func loadByte() -> Bool {
        guard nextIndex < bytes.endIndex else { hasError = true; return false }
        var byte = bytes[nextIndex]
        if zeroRun >= 2 && byte == 3 {
            nextIndex += 1
            zeroRun = 0
            guard nextIndex < bytes.endIndex else { hasError = true; return false }
            byte = bytes[nextIndex]
        }
        zeroRun = byte == 0 ? zeroRun + 1 : 0
        current = byte
        currentIndex = nextIndex
        nextIndex += 1
        bitsLeft = 8
        return true
    }

    /// u(n) for 0 ≤ n ≤ 32. Returns 0 once the sticky error is set.
    public mutating func read(_ count: Int) -> UInt32 {
        precondition((0...32).contains(count), "BitReader.read takes at most 32 bits")
        var remaining = count
        var value: UInt64 = 0
        while remaining > 0 {
            if bitsLeft == 0 && !loadByte() { return 0 }
            let take = min(remaining, bitsLeft)
            let chunk = (UInt64(current) >> UInt64(bitsLeft - take)) & ((1 << UInt64(take)) - 1)
            value = (value << UInt64(take)) | chunk
            bitsLeft -= take
            remaining -= take
        }
        if hasError { return 0 }
        bitsRead += count
        return UInt32(truncatingIfNeeded: value)
    }

    public mutating func readFlag() -> Bool { read(1) != 0 }

    public mutating func skip(_ count: Int) {
        var remaining = count
        while remaining > 0 && !hasError {
            let step = min(remaining, 32)
            _ = read(step)
            remaining -= step
        }
    }

    /// ue(v). More than 31 leading zero bits cannot encode a 32-bit value: that sets the sticky error.
    public mutating func readUE() -> UInt32 {
        var leadingZeros = 0
        while !hasError && read(1) == 0 {
            leadingZeros += 1
            if leadingZeros > 31 { hasError = true; return 0 }
        }
        if hasError { return 0 }
        let suffix = UInt64(read(leadingZeros))
        return hasError ? 0 : UInt32((UInt64(1) << UInt64(leadingZeros)) - 1 + suffix)
    }

    /// se(v), in the range ±(2^31 − 1).
    public mutating func readSE() -> Int64 {
        let codeNum = Int64(readUE())
        return codeNum & 1 == 1 ? (codeNum + 1) / 2 : -(codeNum / 2)
    }

    public var isByteAligned: Bool { bitsLeft == 0 || bitsLeft == 8 }

    public mutating func byteAlign() { bitsLeft = 0 }

    /// Whether RBSP data remains before `rbsp_trailing_bits` (7.2 `more_rbsp_data()`).
    public func moreRBSPData() -> Bool {
        if hasError { return false }
        guard let stop = stopBitPosition() else { return false }
        let here: (index: Int, bit: Int)
        if bitsLeft > 0 {
            here = (currentIndex, 8 - bitsLeft)
        } else {
            var index = nextIndex
            if zeroRun >= 2, index < bytes.endIndex, bytes[index] == 3 { index += 1 }
            here = (index, 0)
        }
        return here.index < stop.index || (here.index == stop.index && here.bit < stop.bit)
    }

    /// Position (escaped byte index, bit from the MSB) of `rbsp_stop_one_bit`: the last set bit of the payload,
    /// not counting a final emulation-prevention byte (which only follows `cabac_zero_word`s).
    private func stopBitPosition() -> (index: Int, bit: Int)? {
        var index = bytes.endIndex - 1
        while index >= bytes.startIndex {
            let byte = bytes[index]
            let isEmulationPrevention = byte == 3 && index - 2 >= bytes.startIndex
                && bytes[index - 1] == 0 && bytes[index - 2] == 0
            if byte != 0 && !isEmulationPrevention {
                return (index, 7 - byte.trailingZeroBitCount)
            }
            index -= 1
        }
        return nil
    }

    // MARK: Throwing helpers: the check right after each read.

    public mutating func bits(_ count: Int, _ element: StaticString) throws(BitstreamError) -> UInt32 {
        let value = read(count)
        if hasError { throw .truncated(element: element) }
        return value
    }

    public mutating func flag(_ element: StaticString) throws(BitstreamError) -> Bool {
        try bits(1, element) != 0
    }

    public mutating func ue(_ element: StaticString, max: UInt32 = UInt32.max - 1) throws(BitstreamError) -> Int {
        let value = readUE()
        if hasError { throw .truncated(element: element) }
        if value > max { throw .outOfRange(element: element, value: Int64(value)) }
        return Int(value)
    }

    public mutating func se(_ element: StaticString, range: ClosedRange<Int64> = -2_147_483_647...2_147_483_647) throws(BitstreamError) -> Int {
        let value = readSE()
        if hasError { throw .truncated(element: element) }
        if !range.contains(value) { throw .outOfRange(element: element, value: value) }
        return Int(value)
    }

    /// Throws if any earlier non-throwing read ran past the end.
    public func check(_ element: StaticString) throws(BitstreamError) {
        if hasError { throw .truncated(element: element) }
    }
}
