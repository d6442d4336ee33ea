import Bitstream
import Glibc
import StreamrecvTestSupport
import Testing

/// Collects what the splitter emits, as plain values.
struct SplitResult: Equatable {
    var units: [[UInt8]] = []
    var offsets: [Int64] = []
    var lengths: [Int] = []
    var statistics = AnnexBSplitter.Statistics()
}

func split(_ stream: [UInt8], chunkSizes: (Int) -> Int, maximumNALUnitSize: Int = 1 << 20) -> SplitResult {
    var splitter = AnnexBSplitter(maximumNALUnitSize: maximumNALUnitSize)
    var result = SplitResult()
    let collect: (NALUnit) -> Void = { unit in
        result.units.append(Array(unit.bytes))
        result.offsets.append(unit.startCodeOffset)
        result.lengths.append(unit.startCodeLength)
    }
    var offset = 0
    var call = 0
    while offset < stream.count {
        let end = min(stream.count, offset + max(1, chunkSizes(call)))
        splitter.append(stream[offset..<end], collect)
        offset = end
        call += 1
    }
    splitter.flush(collect)
    result.statistics = splitter.statistics
    return result
}

/// A random Annex B stream exercising every framing case: 3- and 4-byte start codes, leading and trailing
/// zero bytes, payloads full of zeros and emulation-prevention sequences.
func randomStream(seed: UInt64, units: Int) -> (stream: [UInt8], payloads: [[UInt8]]) {
    var generator = SeededGenerator(seed: seed)
    var stream: [UInt8] = Array(repeating: 0, count: Int.random(in: 0...3, using: &generator))
    var payloads: [[UInt8]] = []
    for _ in 0..<units {
        stream += Bool.random(using: &generator) ? [0, 0, 1] : [0, 0, 0, 1]
        var payload: [UInt8] = [UInt8.random(in: 1...0x7F, using: &generator)]
        for _ in 0..<Int.random(in: 0...300, using: &generator) {
            switch Int.random(in: 0..<10, using: &generator) {
            case 0: payload += [0, 0, 3]
            case 1: payload.append(0)
            default: payload.append(UInt8.random(in: 0...255, using: &generator))
            }
        }
        // Payloads never contain 00 00 0x (x ≤ 2) unescaped and never end in zero, as in a real stream.
        payload = escapeRBSP(payload.filter { _ in true })
        while payload.last == 0 { payload.removeLast() }
        if payload.count >= 2 && payload[payload.count - 1] <= 3 && payload[payload.count - 2] == 0 { payload.append(0x80) }
        payloads.append(payload)
        stream += payload
        stream += Array(repeating: 0, count: Int.random(in: 0...2, using: &generator) == 0 ? Int.random(in: 1...4, using: &generator) : 0)
    }
    return (stream, payloads)
}

@Suite struct AnnexBSplitterTests {
    @Test func splitsThreeAndFourByteStartCodes() {
        let stream: [UInt8] = [0, 0, 0, 1, 0x67, 1, 2, 0, 0, 1, 0x68, 3, 0, 0, 0, 0, 0, 1, 0x65, 4, 5]
        let result = split(stream, chunkSizes: { _ in 1000 })
        #expect(result.units == [[0x67, 1, 2], [0x68, 3], [0x65, 4, 5]])
        #expect(result.offsets == [0, 7, 14])
        #expect(result.lengths == [4, 3, 4])
        #expect(result.statistics.nalUnits == 3)
        #expect(result.statistics.discardedBytes == 0)
    }

    @Test func chunkingNeverChangesTheOutput() {
        for seed in UInt64(1)...60 {
            let (stream, payloads) = randomStream(seed: seed, units: 40)
            let oneShot = split(stream, chunkSizes: { _ in stream.count })
            #expect(oneShot.units == payloads, "seed \(seed)")
            let byteAtATime = split(stream, chunkSizes: { _ in 1 })
            #expect(byteAtATime == oneShot, "seed \(seed): byte at a time")
            var generator = SeededGenerator(seed: seed &* 7919)
            var sizes: [Int] = []
            for _ in 0..<stream.count { sizes.append(Int.random(in: 1...64, using: &generator)) }
            let random = split(stream, chunkSizes: { sizes[$0] })
            #expect(random == oneShot, "seed \(seed): random chunks")
        }
    }

    @Test func unitsInsideOneChunkAreNotCopied() {
        let stream: [UInt8] = [0, 0, 0, 1, 0x67, 1, 2, 3, 0, 0, 1, 0x68, 9]
        var splitter = AnnexBSplitter()
        var shared = false
        stream.withUnsafeBufferPointer { original in
            splitter.append(stream[...]) { unit in
                unit.bytes.withUnsafeBufferPointer { view in
                    shared = view.baseAddress == original.baseAddress! + 4
                }
            }
        }
        #expect(shared)
    }

    @Test func garbageBeforeTheFirstStartCodeIsCounted() {
        let stream: [UInt8] = [0xAB, 0xCD, 0, 0, 0, 1, 0x67, 1]
        let result = split(stream, chunkSizes: { _ in 3 })
        #expect(result.units == [[0x67, 1]])
        #expect(result.statistics.discardedBytes == 2)
    }

    @Test func oversizedUnitIsDiscardedToTheNextStartCode() {
        let big = [UInt8](repeating: 0x55, count: 5000)
        let stream = annexB([[0x67, 1], [0x65] + big, [0x68, 2]])
        for chunk in [1, 7, 100, 10_000] {
            let result = split(stream, chunkSizes: { _ in chunk }, maximumNALUnitSize: 1000)
            #expect(result.units == [[0x67, 1], [0x68, 2]], "chunk \(chunk)")
            #expect(result.statistics.oversizedNALUnits == 1, "chunk \(chunk)")
            #expect(result.statistics.discardedBytes >= 5000, "chunk \(chunk)")
        }
    }

    @Test func megabytesOfZerosYieldNothingAndHoldNoMemory() {
        var splitter = AnnexBSplitter(maximumNALUnitSize: 4096)
        let zeros = [UInt8](repeating: 0, count: 1 << 20)
        var units = 0
        for _ in 0..<8 { splitter.append(zeros) { _ in units += 1 } }
        splitter.flush { _ in units += 1 }
        #expect(units == 0)
        #expect(splitter.statistics.bytesIn == 8 << 20)
    }

    @Test func startCodeFloodYieldsOnlyEmptyUnits() {
        var stream: [UInt8] = []
        for _ in 0..<100_000 { stream += [0, 0, 1] }
        let result = split(stream, chunkSizes: { _ in 4096 })
        #expect(result.units.isEmpty)
        #expect(result.statistics.emptyNALUnits == 100_000)
    }

    @Test func randomBytesAreBoundedByTheLimit() {
        var generator = SeededGenerator(seed: 42)
        let noise = (0..<(2 << 20)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let result = split(noise, chunkSizes: { _ in 65536 }, maximumNALUnitSize: 16 << 10)
        #expect(result.units.allSatisfy { $0.count <= 16 << 10 })
        #expect(result.statistics.bytesIn == Int64(noise.count))
    }

    @Test func flushEmitsTheLastUnitAndDetectsAPrematureFlush() {
        var splitter = AnnexBSplitter()
        var units: [[UInt8]] = []
        splitter.append([0, 0, 0, 1, 0x65, 1, 2]) { units.append(Array($0.bytes)) }
        #expect(units.isEmpty)
        splitter.flush { units.append(Array($0.bytes)) }
        #expect(units == [[0x65, 1, 2]])
        // The transport went quiet mid-unit: its continuation arrives after the flush.
        splitter.append([3, 4, 0, 0, 1, 0x41, 9]) { units.append(Array($0.bytes)) }
        #expect(splitter.statistics.continuationsAfterFlush == 1)
        splitter.flush { units.append(Array($0.bytes)) }
        #expect(units == [[0x65, 1, 2], [0x41, 9]])
    }

    @Test func startCodeSplitAcrossChunksAfterAFlushIsNotAContinuation() {
        var splitter = AnnexBSplitter()
        var units: [[UInt8]] = []
        splitter.append([0, 0, 1, 0x65, 1]) { units.append(Array($0.bytes)) }
        splitter.flush { units.append(Array($0.bytes)) }
        splitter.append([0, 0]) { units.append(Array($0.bytes)) }
        splitter.append([1, 0x41, 7]) { units.append(Array($0.bytes)) }
        splitter.flush { units.append(Array($0.bytes)) }
        #expect(units == [[0x65, 1], [0x41, 7]])
        #expect(splitter.statistics.continuationsAfterFlush == 0)
    }

    @Test func corpusStreamsSplitIdenticallyWhateverTheChunking() throws {
        for name in ["CVFC1_Sony_C.jsv", "MR1_BT_A.h264", "jm_1080p_allslice.264"] {
            guard let url = TestEnvironment.corpusFile(name), let file = fopen(url.path, "rb") else { continue }
            var stream: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while case let count = fread(&buffer, 1, buffer.count, file), count > 0 { stream += buffer[0..<count] }
            fclose(file)
            let oneShot = split(stream, chunkSizes: { _ in stream.count })
            #expect(oneShot.units.count > 0)
            #expect(split(stream, chunkSizes: { $0 % 3 == 0 ? 1 : 1337 }) == oneShot, "\(name)")
            #expect(split(stream, chunkSizes: { _ in 1500 }) == oneShot, "\(name)")
        }
    }
}
