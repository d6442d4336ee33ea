/// Finds `00 00 01` in a byte buffer. This is the hot loop of the receiver. A plain Swift byte loop is not
/// vectorised, so it tests 32 positions per step with word-wide arithmetic (SWAR): a start code needs two
/// adjacent zero bytes, which coded slice data almost never holds, so nearly every block is rejected by a few
/// word operations and only the rare candidates are examined byte by byte.
public enum StartCodeScanner {
    /// 0x80 in each byte lane of `word` that is zero, exactly (no false positives from borrows).
    @inlinable @inline(__always)
    static func zeroLanes(_ word: UInt64) -> UInt64 {
        let low7: UInt64 = 0x7F7F_7F7F_7F7F_7F7F
        return ~(((word & low7) &+ low7) | word | low7)
    }

    /// Lanes `i` of the 8-byte word at `offset` where bytes `i` and `i + 1` are both zero.
    @inlinable @inline(__always)
    static func zeroPairs(_ base: UnsafeRawPointer, _ offset: Int) -> UInt64 {
        zeroLanes(base.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            & zeroLanes(base.loadUnaligned(fromByteOffset: offset + 1, as: UInt64.self))
    }

    /// Index of the first `00` of the first `00 00 01` that starts at or after `start` (a negative `start` is the
    /// buffer's beginning: nothing before it is ever read) and lies wholly inside `buffer`, or nil.
    @inlinable
    public static func firstStartCode(in buffer: UnsafeRawBufferPointer, from start: Int) -> Int? {
        let count = buffer.count
        guard let base = buffer.baseAddress, count >= 3, start <= count - 3 else { return nil }
        var index = max(start, 0)
        while index + 34 <= count {
            let pairs = zeroPairs(base, index) | zeroPairs(base, index + 8)
                | zeroPairs(base, index + 16) | zeroPairs(base, index + 24)
            if pairs != 0 {
                for position in index..<(index + 32)
                where buffer[position] == 0 && buffer[position + 1] == 0 && buffer[position + 2] == 1 {
                    return position
                }
            }
            index += 32
        }
        while index <= count - 3 {
            if buffer[index] == 0 && buffer[index + 1] == 0 && buffer[index + 2] == 1 { return index }
            index += 1
        }
        return nil
    }
}
