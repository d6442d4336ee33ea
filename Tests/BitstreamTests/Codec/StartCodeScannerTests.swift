@testable import Bitstream
import StreamrecvTestSupport
import Testing

/// The word-at-a-time search for `00 00 01` (H.264 / H.265 Annex B start code prefix).
@Suite struct StartCodeScannerTests {
    /// The scanner over the first `window` bytes of `bytes`: what lies after the window must stay unseen.
    static func scan(_ bytes: [UInt8], from start: Int = 0, window: Int? = nil) -> Int? {
        bytes.withUnsafeBytes { raw in
            StartCodeScanner.firstStartCode(in: UnsafeRawBufferPointer(rebasing: raw[0..<(window ?? raw.count)]), from: start)
        }
    }

    /// The plain byte loop the scanner must agree with.
    static func reference(_ bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= 3, start <= bytes.count - 3 else { return nil }
        return (start...(bytes.count - 3)).first { bytes[$0] == 0 && bytes[$0 + 1] == 0 && bytes[$0 + 2] == 1 }
    }

    @Test func buffersTooShortForAStartCodeHaveNone() {
        #expect(Self.scan([]) == nil)
        #expect(Self.scan([0, 0]) == nil)
        #expect(Self.scan([0, 0, 1]) == 0)
        // A start beyond the last place a whole start code fits.
        #expect(Self.scan([0, 0, 1], from: 1) == nil)
        #expect(Self.scan([0, 0, 1, 0, 0, 1], from: 4) == nil)
    }

    @Test func theIndexIsThatOfTheFirstZeroOfZeroZeroOne() {
        // A four-byte start code (zero_byte + 00 00 01, Annex B.1.1) is found at its second zero.
        #expect(Self.scan([0, 0, 0, 1, 0x67]) == 1)
        #expect(Self.scan([0x65, 0, 0, 1]) == 1)
        #expect(Self.scan([0, 0, 0, 0, 0, 1]) == 3)
    }

    @Test func twoZerosFollowedByAnythingButOneAreNotAStartCode() {
        // 00 00 02 and 00 00 03 (emulation prevention) are not start codes; nor is 00 01.
        #expect(Self.scan([0, 0, 2, 0, 0, 3, 0, 1, 0xFF]) == nil)
        #expect(Self.scan([UInt8](repeating: 0, count: 100)) == nil)
    }

    @Test func theSearchBeginsAtStartNotBefore() {
        let bytes: [UInt8] = [0, 0, 1, 0x41, 0xAA, 0, 0, 1, 0x41]
        #expect(Self.scan(bytes, from: 0) == 0)
        // From inside the first start code, the next one.
        #expect(Self.scan(bytes, from: 1) == 5)
        #expect(Self.scan(bytes, from: 5) == 5)
        #expect(Self.scan(bytes, from: 6) == nil)
    }

    /// A negative start is the buffer's beginning: the start code just before the buffer (in the same array) is
    /// neither read nor returned.
    @Test(arguments: [-1, -3, -40, Int.min])
    func aNegativeStartReadsNothingBeforeTheBuffer(start: Int) {
        let bytes: [UInt8] = [0, 0, 1] + [UInt8](repeating: 0x41, count: 40) + [0, 0, 1, 0x41]
        let found = bytes.withUnsafeBytes { raw in
            StartCodeScanner.firstStartCode(in: UnsafeRawBufferPointer(rebasing: raw[3...]), from: start)
        }
        #expect(found == 40)
    }

    @Test(arguments: [0, 1, 7, 8, 30, 31, 32, 33, 63, 64, 65, 95, 96, 97])
    func aStartCodeIsFoundAtEveryOffsetAcrossTheWordBlocks(position: Int) {
        // The block loop tests 32 positions at once with 8-byte words: offsets at and around every word and block
        // edge, in a buffer long enough to use it, with non-zero filler so that only one candidate exists.
        var bytes = [UInt8](repeating: 0xA5, count: 140)
        bytes.replaceSubrange(position..<(position + 3), with: [0, 0, 1])
        #expect(Self.scan(bytes) == position)
        #expect(Self.scan(bytes, from: position + 1) == nil)
    }

    @Test(arguments: [3, 20, 33, 34, 35, 66, 100])
    func aStartCodeCutByTheEndOfTheBufferIsNotFound(window: Int) {
        // `00 00` are the buffer's last two bytes and the `01` lies just past it, in memory but not in the buffer.
        var bytes = [UInt8](repeating: 0x7F, count: window + 8)
        bytes[window - 2] = 0
        bytes[window - 1] = 0
        bytes[window] = 1
        #expect(Self.scan(bytes, window: window) == nil)
        #expect(Self.scan(bytes, window: window + 1) == window - 2)
    }

    @Test func aZeroRunAcrossABlockEdgeStillEndsInAStartCode() {
        // Bytes 20…40 are zeros and 41 is one: the pairs of zeros span two blocks; the start code is at 39.
        var bytes = [UInt8](repeating: 0x11, count: 80)
        for index in 20...40 { bytes[index] = 0 }
        bytes[41] = 1
        #expect(Self.scan(bytes) == 39)
    }

    @Test func agreesWithAPlainByteLoopOnRandomZeroHeavyBuffers() {
        // Mostly 0, 1 and 3, the bytes that make start codes and near misses, at every length up to three blocks.
        var generator = SeededGenerator(seed: 0x0000_0001)
        for _ in 0..<4000 {
            let count = Int.random(in: 0...100, using: &generator)
            let bytes = (0..<count).map { _ -> UInt8 in
                switch Int.random(in: 0..<10, using: &generator) {
                case 0..<5: 0
                case 5..<7: 1
                case 7: 3
                default: UInt8.random(in: 0...255, using: &generator)
                }
            }
            let start = Int.random(in: 0...max(0, count), using: &generator)
            #expect(Self.scan(bytes, from: start) == Self.reference(bytes, from: start), "\(bytes) from \(start)")
        }
    }

    @Test func zeroLanesMarksExactlyTheZeroBytes() {
        // 0x80 in each zero lane and nowhere else, including the 0x80 and 0x01 bytes a borrow could confuse.
        #expect(StartCodeScanner.zeroLanes(0) == 0x8080_8080_8080_8080)
        #expect(StartCodeScanner.zeroLanes(0x0100_8000_0001_FF00) == 0x0080_0080_8000_0080)
        #expect(StartCodeScanner.zeroLanes(0xFFFF_FFFF_FFFF_FFFF) == 0)
        #expect(StartCodeScanner.zeroLanes(0x0101_0101_0101_0101) == 0)
    }
}
