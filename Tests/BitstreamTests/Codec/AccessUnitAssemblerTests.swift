import Bitstream
import Glibc
import StreamrecvTestSupport
import Testing

/// Feeds whole NAL units to an assembler, as the splitter would.
struct AssemblerHarness {
    var assembler: AccessUnitAssembler
    var units: [AccessUnit] = []
    var events: [ParameterSetEvent] = []
    var problems: [AssemblerProblem] = []
    private var offset: Int64 = 0

    init(codec: VideoCodec? = .h264, maximumAccessUnitSize: Int = 1 << 20) {
        assembler = AccessUnitAssembler(codec: codec, maximumAccessUnitSize: maximumAccessUnitSize)
    }

    mutating func push(_ bytes: [UInt8]) {
        let unit = NALUnit(bytes: bytes[...], startCodeOffset: offset, startCodeLength: 4)
        offset += Int64(bytes.count + 4)
        var collected: [AssemblerEvent] = []
        assembler.push(unit) { collected.append($0) }
        record(collected)
    }

    mutating func end() {
        var collected: [AssemblerEvent] = []
        assembler.endAccessUnit { collected.append($0) }
        record(collected)
    }

    private mutating func record(_ collected: [AssemblerEvent]) {
        for event in collected {
            switch event {
            case .accessUnit(let unit): units.append(unit)
            case .parameterSet(let set): events.append(set)
            case .problem(let problem): problems.append(problem)
            case .codecDetected: break
            }
        }
    }
}

@Suite struct AccessUnitAssemblerTests {
    @Test func accessUnitLeavesAtTheNextPicturesFirstNAL() {
        var h = AssemblerHarness()
        h.push(Build.h264SPS())
        h.push(Build.h264PPS())
        h.push(Build.h264Slice(idr: true, frameNum: 0))
        h.push(Build.h264Slice(idr: true, frameNum: 0, firstMb: 100))
        #expect(h.units.isEmpty)
        h.push(Build.h264Slice(idr: false, frameNum: 1))
        #expect(h.units.count == 1)
        let first = h.units[0]
        #expect(first.nalUnitTypes == [7, 8, 5, 5])
        #expect(first.sliceCount == 2)
        #expect(first.randomAccess == .idr)
        #expect(first.end == .nextAccessUnit)
        #expect(first.ppsId == 0)
        #expect(first.format?.width == 320)
        #expect(first.data.prefix(4) == [0, 0, 0, 1])
    }

    @Test func arbitrarySliceOrderStaysOnePicture() {
        var h = AssemblerHarness()
        h.push(Build.h264SPS())
        h.push(Build.h264PPS())
        h.push(Build.h264Slice(idr: false, frameNum: 1, firstMb: 200))
        h.push(Build.h264Slice(idr: false, frameNum: 1, firstMb: 0))
        h.push(Build.h264Slice(idr: false, frameNum: 2, firstMb: 0))
        h.end()
        #expect(h.units.map(\.sliceCount) == [2, 1])
    }

    @Test func redundantPictureBelongsToItsAccessUnit() {
        var h = AssemblerHarness()
        h.push(Build.h264SPS())
        h.push(Build.h264PPS(redundantPicCnt: true))
        h.push(Build.h264Slice(idr: false, frameNum: 1, redundantPicCnt: 0))
        h.push(Build.h264Slice(idr: false, frameNum: 1, redundantPicCnt: 1))
        h.push(Build.h264Slice(idr: false, frameNum: 2, redundantPicCnt: 0))
        h.end()
        #expect(h.units.map(\.sliceCount) == [2, 1])
    }

    @Test func accessUnitKeepsTheParameterSetsItWasDecodedWith() {
        var h = AssemblerHarness()
        let small = Build.h264SPS(widthInMbs: 20)
        let pps = Build.h264PPS()
        h.push(small)
        h.push(pps)
        h.push(Build.h264Slice(idr: true, frameNum: 0))
        h.push(Build.h264SPS(widthInMbs: 40))  // ends the first access unit, then replaces SPS 0
        #expect(h.units.first?.parameterSets == [0, 0, 0, 1] + small + [0, 0, 0, 1] + pps)
        #expect(h.units.first?.format?.width == 320)
    }

    @Test func explicitEndEmitsWithoutWaitingForTheNextFrame() {
        var h = AssemblerHarness()
        h.push(Build.h264SPS())
        h.push(Build.h264PPS())
        h.push(Build.h264Slice(idr: true, frameNum: 0))
        h.end()
        #expect(h.units.count == 1)
        #expect(h.units[0].end == .explicit)
        h.push(Build.h264Slice(idr: false, frameNum: 1))
        h.end()
        #expect(h.units.count == 2)
        #expect(h.assembler.statistics.prematureEnds == 0)
    }

    @Test func anEndInsideAPictureIsCountedAsPremature() {
        var h = AssemblerHarness()
        h.push(Build.h264SPS())
        h.push(Build.h264PPS())
        h.push(Build.h264Slice(idr: true, frameNum: 0))
        h.end()
        h.push(Build.h264Slice(idr: true, frameNum: 0, firstMb: 150))
        #expect(h.assembler.statistics.prematureEnds == 1)
        #expect(h.problems.map(\.kind) == [.prematureEnd])
    }

    @Test func endOfSequenceClosesTheAccessUnit() {
        var h = AssemblerHarness()
        h.push(Build.h264SPS())
        h.push(Build.h264PPS())
        h.push(Build.h264Slice(idr: true, frameNum: 0))
        h.push([0x0A])
        #expect(h.units.count == 1)
        #expect(h.units[0].end == .endOfSequence)
    }

    @Test func forbiddenBitUnitsAreDroppedAndCounted() {
        var h = AssemblerHarness()
        h.push(Build.h264SPS())
        h.push([0xE5, 1, 2, 3])
        #expect(h.assembler.statistics.forbiddenBitNALUnits == 1)
        #expect(h.problems.first?.kind == .forbiddenBit)
        h.end()
        #expect(h.units.first?.nalUnitTypes == [7])
    }

    @Test func slicesBeforeAnyParameterSet() {
        // Codec known: the slices still form access units, each counted as a slice-header error.
        var known = AssemblerHarness(codec: .h264)
        known.push(Build.h264Slice(idr: false, frameNum: 1))
        known.push(Build.h264Slice(idr: false, frameNum: 2))
        known.end()
        #expect(known.units.count == 2)
        #expect(known.assembler.statistics.sliceHeaderErrors == 2)
        #expect(known.problems.first?.error == .missingParameterSet(kind: .pps, id: 0))
        // Codec to be detected: nothing can be interpreted before the first parameter set.
        var auto = AssemblerHarness(codec: nil)
        auto.push(Build.h264Slice(idr: false, frameNum: 1))
        auto.end()
        #expect(auto.units.isEmpty)
        #expect(auto.assembler.statistics.nalUnitsBeforeCodecDetected == 1)
    }

    @Test func ppsNamingAMissingSPS() {
        var h = AssemblerHarness()
        h.push(Build.h264PPS(id: 0, spsId: 5))
        h.push(Build.h264Slice(idr: true, frameNum: 0))
        h.end()
        #expect(h.problems.first?.error == .missingParameterSet(kind: .sps, id: 5))
        #expect(h.units.count == 1)
        #expect(h.units[0].format == nil)
    }

    @Test func oversizedAccessUnitIsDroppedWhole() {
        var h = AssemblerHarness(maximumAccessUnitSize: 2000)
        h.push(Build.h264SPS())
        h.push(Build.h264PPS())
        h.push(Build.h264Slice(idr: true, frameNum: 0))
        h.push(Build.h264Slice(idr: true, frameNum: 0, firstMb: 1) + [UInt8](repeating: 0x55, count: 3000))
        h.push(Build.h264Slice(idr: false, frameNum: 1))
        h.end()
        #expect(h.assembler.statistics.oversizedAccessUnits == 1)
        #expect(h.units.count == 1)
        #expect(h.units[0].sliceCount == 1)
    }

    @Test func parameterSetStormIsBounded() {
        var h = AssemblerHarness()
        for index in 0..<2000 {
            h.push(Build.h264SPS(widthInMbs: index % 2 == 0 ? 20 : 40))
            h.push(Build.h264PPS())
            h.push(Build.h264Slice(idr: true, frameNum: 0))
        }
        h.end()
        #expect(h.units.count == 2000)
        #expect(h.events.filter { $0.kind == .sps && $0.changes == [.size] }.count == 1999)
    }

    @Test func recoveryPointMakesARandomAccessPoint() {
        var h = AssemblerHarness()
        h.push(Build.h264SPS())
        h.push(Build.h264PPS())
        var recovery = BitWriter()
        recovery.ue(0)
        recovery.flag(true)
        recovery.flag(false)
        recovery.u(2, 0)
        recovery.trailingBits()
        h.push(Build.sei(codec: .h264, type: 6, payload: recovery.bytes))
        h.push(Build.h264Slice(idr: false, frameNum: 3))
        h.push(Build.h264Slice(idr: false, frameNum: 4))
        h.end()
        #expect(h.units.map(\.randomAccess) == [.recoveryPoint, nil])
    }

    // MARK: Hostile byte streams through splitter and assembler

    @Test func randomBytesDoNotCrashOrGrow() {
        for seed in UInt64(1)...8 {
            var generator = SeededGenerator(seed: seed)
            let noise = (0..<(256 << 10)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            for codec in [VideoCodec.h264, .h265, nil] {
                let result = assemble(noise, codec: codec, maximumNALUnitSize: 8192, maximumAccessUnitSize: 65536)
                #expect(result.accessUnits.allSatisfy { $0.data.count <= 65536 })
            }
        }
    }

    @Test func validPrefixWithGarbageTailKeepsTheValidUnits() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: "h264", size: "160x96", frames: 5, in: directory, name: "a.h264")
        var generator = SeededGenerator(seed: 9)
        let clean = readBytes(url.path)
        let garbage = (0..<4096).map { _ in UInt8.random(in: 1...255, using: &generator) }
        let result = assemble(clean + garbage + clean)
        #expect(result.accessUnits.filter { $0.isKeyframe }.count == 2)
        #expect(result.accessUnits.count >= 10)
    }

    @Test func truncatedStreamsAtEveryBoundary() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: "h265", size: "128x72", frames: 2, in: directory, name: "t.h265")
        let stream = readBytes(url.path)
        for length in stride(from: 0, to: min(stream.count, 400), by: 1) {
            let result = assemble(Array(stream.prefix(length)))
            #expect(result.accessUnits.count <= 2)
        }
    }
}

/// `startsAccessUnit` judges a NAL unit from its first bytes by the rules `push` applies to the whole unit:
/// whenever it says yes, pushing the whole unit closes an access unit; on whole units the two always agree.
@Suite struct EarlyAccessUnitStartTests {
    private func check(_ stream: [UInt8], codec: VideoCodec, label: String, exact: Bool = true) {
        var splitter = AnnexBSplitter()
        var nalUnits: [[UInt8]] = []
        splitter.append(stream) { nalUnits.append(Array($0.bytes)) }
        splitter.flush { nalUnits.append(Array($0.bytes)) }
        var assembler = AccessUnitAssembler(codec: codec)
        var early = 0
        for bytes in nalUnits {
            let prefixes = (1...min(bytes.count, 48)).map { assembler.startsAccessUnit(bytes[..<$0]) }
            let whole = assembler.startsAccessUnit(bytes[...])
            var closed = false
            assembler.push(NALUnit(bytes: bytes[...], startCodeOffset: 0, startCodeLength: 4)) {
                if case .accessUnit = $0 { closed = true }
            }
            let type = codec == .h264 ? bytes[0] & 0x1f : (bytes[0] >> 1) & 0x3f
            let endsSequence = codec == .h264 ? (type == 10 || type == 11) : (type == 36 || type == 37)
            if prefixes.contains(true) {
                #expect(closed, "\(label): a prefix said a new access unit starts, the whole unit did not close one")
            }
            if exact && !endsSequence {
                #expect(whole == closed, "\(label): NAL type \(type)")
            }
            if let index = prefixes.firstIndex(of: true), index < 16 { early += 1 }
        }
        #expect(early > 0 || assembler.statistics.accessUnits < 2, "\(label): decided from a few bytes at least once")
    }

    @Test func generatedStreamsWithSeveralSlicesPerPicture() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        for (codec, parameters) in [("h264", "slices=4:bframes=2"), ("h264", "slices=2:bframes=0:interlaced=1"), ("h265", "bframes=2")] {
            let url = try GeneratedStreams.encode(codec: codec, size: "320x240", frames: 12, encoderParameters: parameters,
                                                  in: directory, name: "s.\(codec)")
            check(readBytes(url.path), codec: codec == "h264" ? .h264 : .h265, label: "\(codec) \(parameters)")
        }
    }

    /// Slices as they arrive: a progressive High-profile stream can be decoded picture by picture in parts (and its
    /// bytes so far are the access unit's prefix); an interlaced one (MBAFF, field pictures) cannot; nor can
    /// anything before the first slice, nor H.265.
    @Test func whichPicturesCanBeDecodedSliceBySlice() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        for (codec, parameters, expected) in [("h264", "slices=4:bframes=0", true), ("h264", "slices=2:bframes=0:interlaced=1", false),
                                              ("h265", "slices=2", false)] {
            let url = try GeneratedStreams.encode(codec: codec, size: "320x240", frames: 4, encoderParameters: parameters,
                                                  in: directory, name: "p.\(codec)")
            var splitter = AnnexBSplitter()
            var assembler = AccessUnitAssembler()
            var units: [NALUnit] = []
            splitter.append(readBytes(url.path)) { units.append($0) }
            splitter.flush { units.append($0) }
            var verdicts: [Bool] = []
            var prefix: [UInt8] = []
            for unit in units {
                #expect(!assembler.pictureInProgressDecodesInParts || assembler.slicesInProgress > 0)
                var completed: AccessUnit?
                assembler.push(unit) { if case .accessUnit(let unit) = $0 { completed = unit } }
                if let completed {
                    #expect(completed.data.starts(with: prefix), "\(parameters): the bytes so far were the access unit's beginning")
                }
                if assembler.slicesInProgress > 0 {
                    prefix = Array(assembler.bytesInProgress)
                    verdicts.append(assembler.pictureInProgressDecodesInParts)
                    #expect(assembler.pictureInProgress()?.format != nil)
                }
            }
            #expect(!verdicts.isEmpty && verdicts.allSatisfy { $0 == expected }, "\(codec) \(parameters)")
        }
    }

    @Test(.enabled(if: TestEnvironment.hasCorpus, "needs ../shared/corpus"))
    func conformanceStreams() {
        for url in TestEnvironment.corpusFiles() {
            check(readBytes(url.path), codec: .h264, label: url.lastPathComponent)
        }
    }
}
