import Bitstream
import Glibc
import StreamrecvTestSupport
import Testing

@Suite struct ParameterSetTests {
    @Test func rejectsOutOfRangeIds() {
        #expect(throws: BitstreamError.outOfRange(element: "seq_parameter_set_id", value: 32)) {
            try H264SequenceParameterSet(payload: Build.h264SPS(id: 32).dropFirst())
        }
        #expect(throws: BitstreamError.outOfRange(element: "pic_parameter_set_id", value: 256)) {
            try H264PictureParameterSet(payload: Build.h264PPS(id: 256).dropFirst())
        }
    }

    // MARK: Conformance streams

    @Test(.enabled(if: TestEnvironment.hasCorpus, "needs ../shared/corpus"))
    func identicalPPSEveryPictureIsNoEvent() {
        let result = assemble(readBytes(TestEnvironment.corpusFile("BA1_Sony_D.jsv")!.path))
        #expect(result.parameterSets.count == 2)
        #expect(result.parameterSets.allSatisfy { !$0.isChange })
        #expect(result.statistics.parameterSetRepeats > 0)
    }

    @Test(.enabled(if: TestEnvironment.hasCorpus, "needs ../shared/corpus"))
    func twoPictureParameterSets() {
        let result = assemble(readBytes(TestEnvironment.corpusFile("MPS_MW_A.264")!.path))
        let ids = Set(result.parameterSets.filter { $0.kind == .pps }.map(\.id))
        #expect(ids.count == 2)
        #expect(Set(result.accessUnits.compactMap(\.ppsId)) == ids)
    }

    @Test(.enabled(if: TestEnvironment.hasCorpus, "needs ../shared/corpus"))
    func threeSequenceParameterSetsAndResolutionChanges() {
        let result = assemble(readBytes(TestEnvironment.corpusFile("Error_I_P.264")!.path))
        let sps = result.parameterSets.filter { $0.kind == .sps }
        #expect(Set(sps.map(\.id)).count == 3)
        let sizes = result.accessUnits.compactMap { $0.format.map { "\($0.width)x\($0.height)" } }
        var transitions: [String] = []
        for size in sizes where transitions.last != size { transitions.append(size) }
        #expect(transitions == ["352x288", "640x480", "352x288"])
    }

    @Test(.enabled(if: TestEnvironment.hasCorpus, "needs ../shared/corpus"))
    func croppedSize() {
        let result = assemble(readBytes(TestEnvironment.corpusFile("CVFC1_Sony_C.jsv")!.path))
        let format = result.parameterSets.first { $0.kind == .sps }?.format
        #expect(format?.width == 300 && format?.height == 168)
        #expect(format?.codedWidth == 352 && format?.codedHeight == 288)
    }

    @Test(.enabled(if: TestEnvironment.hasCorpus, "needs ../shared/corpus"))
    func highProfile1080pWithReordering() {
        let result = assemble(readBytes(TestEnvironment.corpusFile("VID_1920x1080_cabac_temporal_direct.264")!.path))
        let format = result.parameterSets.first { $0.kind == .sps }?.format
        #expect(format?.width == 1920 && format?.height == 1080 && format?.codedHeight == 1088)
        #expect(format?.frameRate?.framesPerSecond == 25)
        #expect(format?.reorderDepth == 2)
        #expect(format?.profile == 100)
    }

    @Test(.enabled(if: TestEnvironment.hasCorpus, "needs ../shared/corpus"))
    func eightThousandSlicesMakeOneAccessUnit() {
        let result = assemble(readBytes(TestEnvironment.corpusFile("jm_1080p_allslice.264")!.path))
        #expect(result.accessUnits.count == 1)
        #expect(result.accessUnits.first?.sliceCount == 8160)
    }

    @Test(.enabled(if: TestEnvironment.hasCorpus, "needs ../shared/corpus"))
    func everyCorpusStreamParsesWithoutRejects() {
        for url in TestEnvironment.corpusFiles() {
            let result = assemble(readBytes(url.path))
            #expect(result.codec == .h264, "\(url.lastPathComponent)")
            #expect(result.statistics.rejectedParameterSets == 0, "\(url.lastPathComponent)")
            #expect(result.accessUnits.count > 0, "\(url.lastPathComponent)")
        }
    }

    // MARK: Generated H.265

    @Test func h265Main10WithBFramesAndCropping() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(
            codec: "h265", size: "320x180", frames: 10, pixelFormat: "yuv420p10le",
            encoderParameters: "bframes=3", in: directory, name: "main10.h265")
        let result = assemble(readBytes(url.path))
        #expect(result.codec == .h265)
        let format = try #require(result.parameterSets.first { $0.kind == .sps }?.format)
        #expect(format.width == 320 && format.height == 180)
        #expect(format.codedHeight == 184)  // x265 codes in 8-sample units and crops with the conformance window
        #expect(format.bitDepthLuma == 10 && format.profile == 2)
        #expect(format.frameRate?.framesPerSecond == 25)
        #expect(format.reorderDepth! > 0)
        #expect(result.accessUnits.count == 10)
        #expect(result.accessUnits.first?.randomAccess == .idr)
    }

    @Test func h265VPSChangeInvalidatesItsSPSAndPPS() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let small = try GeneratedStreams.encode(codec: "h265", size: "320x240", frames: 3, in: directory, name: "a.h265")
        let large = try GeneratedStreams.encode(codec: "h265", size: "640x480", frames: 3, in: directory, name: "b.h265")
        let result = assemble(readBytes(small.path) + readBytes(large.path))
        // x265 signals a different level in the VPS, so the VPS changes first and takes SPS 0 and PPS 0 with it.
        let vps = try #require(result.parameterSets.first { $0.kind == .vps && $0.isChange })
        #expect(vps.invalidated == [ParameterSetReference(kind: .sps, id: 0), ParameterSetReference(kind: .pps, id: 0)])
        let change = try #require(result.parameterSets.first { $0.kind == .sps && $0.isChange })
        #expect(change.changes?.contains(.size) == true)
        #expect(result.accessUnits.count == 6)
        #expect(result.accessUnits.last?.format?.width == 640)
    }
}
