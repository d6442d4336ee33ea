import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

/// One parsed JSON line of `streamrecvctl inspect --json`.
typealias Record = [String: Any]

func inspect(_ arguments: [String], input: Data? = nil) throws -> [Record] {
    let tool = TestEnvironment.productsDirectory.appendingPathComponent("streamrecvctl").path
    let result = try runChecked(tool, ["inspect", "--json"] + arguments, input: input)
    return try result.text.split(separator: "\n").map {
        try JSONSerialization.jsonObject(with: Data($0.utf8)) as! Record
    }
}

/// Access-unit boundaries (offset, size) from `inspect`.
func ourBoundaries(_ path: String, codec: String) throws -> [(Int, Int)] {
    try inspect(["--codec", codec, path]).filter { $0["type"] as? String == "au" }
        .map { ($0["offset"] as! Int, $0["size"] as! Int) }
}

/// Packet boundaries (pos, size) from FFmpeg's parser, as `ffprobe -show_packets` reports them.
func ffprobeBoundaries(_ path: String, format: String) throws -> [(Int, Int)] {
    let result = try runChecked("ffprobe", [
        "-v", "error", "-f", format, "-show_packets", "-show_entries", "packet=pos,size", "-of", "csv=p=0", path,
    ])
    return result.text.split(separator: "\n").map { line in
        let fields = line.split(separator: ",").map { Int($0)! }
        return (fields[1], fields[0])  // ffprobe prints size before pos
    }
}

@Suite struct InspectCommandTests {
    @Test(.enabled(if: TestEnvironment.hasCorpus, "needs ../shared/corpus"))
    func accessUnitsMatchFFmpegOnTheConformanceCorpus() throws {
        let files = TestEnvironment.corpusFiles()
        #expect(files.count >= 50)
        for url in files {
            let ours = try ourBoundaries(url.path, codec: "h264")
            let reference = try ffprobeBoundaries(url.path, format: "h264")
            #expect(ours.map(\.0) == reference.map(\.0), "\(url.lastPathComponent): offsets")
            #expect(ours.map(\.1) == reference.map(\.1), "\(url.lastPathComponent): sizes")
        }
    }

    /// FFmpeg 5.1's HEVC parser cuts a packet after the `zero_byte` of a 4-byte start code, so its packet starts one
    /// byte later than the start code does (later FFmpeg releases include that byte). We follow the H.264 parser's
    /// and the Annex B convention — an access unit begins at its first start code, `zero_byte` included — so where
    /// the access unit begins with `00 00 00 01`, ffprobe's position is ours plus one. Everything else must match.
    @Test(arguments: [
        ("bframes", "320x240", "yuv420p", "bframes=3:keyint=10"),
        ("slices", "640x360", "yuv420p", "slices=4:bframes=2"),
        ("wpp", "640x360", "yuv420p", "wpp=1:bframes=0"),
        ("main10", "320x240", "yuv420p10le", "bframes=2"),
    ])
    func h265AccessUnitsMatchFFmpeg(name: String, size: String, pixelFormat: String, parameters: String) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(
            codec: "h265", size: size, frames: 30, pixelFormat: pixelFormat, encoderParameters: parameters,
            in: directory, name: "\(name).h265")
        try expectH265Boundaries(url)
    }

    @Test func h265ResolutionChangeByConcatenation() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let small = try GeneratedStreams.encode(codec: "h265", size: "320x240", frames: 12, in: directory, name: "s.h265")
        let large = try GeneratedStreams.encode(codec: "h265", size: "640x480", frames: 12, in: directory, name: "l.h265")
        let joined = directory.appendingPathComponent("joined.h265")
        try (Data(contentsOf: small) + Data(contentsOf: large)).write(to: joined)
        try expectH265Boundaries(joined)
        let sizes = try inspect([joined.path]).filter { $0["kind"] as? String == "sps" }
            .map { "\($0["width"]!)x\($0["height"]!)" }
        #expect(sizes == ["320x240", "640x480"])
    }

    func expectH265Boundaries(_ url: URL) throws {
        let bytes = [UInt8](try Data(contentsOf: url))
        let ours = try ourBoundaries(url.path, codec: "h265")
        let reference = try ffprobeBoundaries(url.path, format: "hevc")
        #expect(ours.count == reference.count, "\(url.lastPathComponent): access unit count")
        for (index, (mine, theirs)) in zip(ours, reference).enumerated() {
            let fourByteStart = mine.0 > 0 && bytes[mine.0..<(mine.0 + 4)].elementsEqual([0, 0, 0, 1])
            #expect(theirs.0 == mine.0 + (fourByteStart ? 1 : 0), "\(url.lastPathComponent) AU \(index)")
        }
        // The access units tile the file.
        #expect(ours.first?.0 == 0)
        #expect(ours.last.map { $0.0 + $0.1 } == bytes.count)
    }

    @Test(.enabled(if: TestEnvironment.hasCorpus, "needs ../shared/corpus"))
    func reportsTheFormatOfTheCorpusHighlights() throws {
        let corpus = TestEnvironment.h264Corpus!
        let vid = try inspect([corpus.appendingPathComponent("VID_1920x1080_cabac_temporal_direct.264").path])
        let sps = try #require(vid.first { $0["kind"] as? String == "sps" })
        #expect(sps["width"] as? Int == 1920 && sps["height"] as? Int == 1080)
        #expect(sps["coded_height"] as? Int == 1088)
        #expect(sps["fps"] as? Double == 25)
        #expect(sps["reorder"] as? Int == 2)
        #expect(sps["codec"] as? String == "h264" && sps["changed"] as? Bool == false)

        let cropped = try inspect([corpus.appendingPathComponent("CVFC1_Sony_C.jsv").path])
        let croppedSPS = try #require(cropped.first { $0["kind"] as? String == "sps" })
        #expect(croppedSPS["width"] as? Int == 300 && croppedSPS["height"] as? Int == 168)

        let repeats = try inspect([corpus.appendingPathComponent("BA1_Sony_D.jsv").path])
        #expect(repeats.filter { $0["type"] as? String == "parameter_set" }.count == 2)
        #expect(!repeats.contains { $0["changed"] as? Bool == true })

        let sliced = try inspect([corpus.appendingPathComponent("jm_1080p_allslice.264").path])
        let units = sliced.filter { $0["type"] as? String == "au" }
        #expect(units.count == 1 && units[0]["slices"] as? Int == 8160)

        let summary = try #require(sliced.last)
        #expect(summary["type"] as? String == "summary")
        #expect(summary["access_units"] as? Int == 1)
    }

    @Test func readsStandardInput() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: "h264", size: "160x96", frames: 7, in: directory, name: "a.h264")
        let fromFile = try inspect([url.path])
        let fromPipe = try inspect(["-"], input: try Data(contentsOf: url))
        #expect(fromFile.count == fromPipe.count)
        #expect(fromPipe.filter { $0["type"] as? String == "au" }.count == 7)
        #expect(fromPipe.first { $0["type"] as? String == "au" }?["keyframe"] as? Bool == true)
    }

    @Test func tableOutputIsReadable() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: "h265", size: "160x96", frames: 3, in: directory, name: "a.h265")
        let tool = TestEnvironment.productsDirectory.appendingPathComponent("streamrecvctl").path
        let text = try runChecked(tool, ["inspect", url.path]).text
        #expect(text.contains("SPS 0 (h265) at "))
        #expect(text.contains("160x96"))
        #expect(text.contains("h265: "))
        #expect(text.contains("3 access units"))
    }

    @Test func refusesBadArguments() throws {
        let tool = TestEnvironment.productsDirectory.appendingPathComponent("streamrecvctl").path
        #expect(try runProcess(tool, ["inspect", "--codec", "vp9", "-"]).status != 0)
        let missing = try runProcess(tool, ["inspect", "/nonexistent/stream.h264"])
        #expect(missing.status != 0)
        #expect(missing.standardError.contains("cannot open"))
    }

    @Test func garbageInputEndsWithASummary() throws {
        var generator = SeededGenerator(seed: 5)
        let noise = Data((0..<100_000).map { _ in UInt8.random(in: 0...255, using: &generator) })
        let records = try inspect(["-"], input: noise)
        let summary = try #require(records.last)
        #expect(summary["type"] as? String == "summary")
        #expect(summary["bytes"] as? Int == 100_000)
    }
}
