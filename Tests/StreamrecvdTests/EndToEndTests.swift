import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// Sends `stream` to a fresh daemon over TCP and reads it back with `streamrecvctl cat` in another process;
/// the frames must be FFmpeg's, md5 for md5, in order.
func expectBitExact(
    _ stream: [UInt8], label: String, output: String = "native", transport: String = "tcp",
    settings extra: [String: String] = [:], sender: ((DaemonProcess, [UInt8]) throws -> Void)? = nil
) throws {
    let directory = try TestEnvironment.temporaryDirectory()
    let facts = StreamFacts(stream)
    let reference = try referenceMD5s(stream, facts: facts, directory: directory)
    // Room for every frame when it fits in 512 MiB; otherwise the sender is paced to 40 frames a second so that
    // this test's own reader (a debug build) stays ahead of the writer.
    let frameBytes = (facts.maxWidth + 64) * 3 * (facts.maxHeight + 65)
    let slots = max(8, min(reference.count + 8, (512 << 20) / frameBytes))
    let pause: UInt32 = slots < reference.count + 8 ? 25_000 : 300
    let daemon = try DaemonProcess(label: label, settings: [
        "max_width": String(facts.maxWidth + 64), "max_height": String(facts.maxHeight + 64),
        "slots": String(slots), "output": "\"\(output)\"",
    ].merging(extra) { $1 }, transport: transport)
    guard !reference.isEmpty else {
        try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: pause)
        #expect(daemon.waitUntilPublished(0))
        #expect(daemon.isRunning, "\(label): the daemon must survive a stream FFmpeg cannot decode")
        return
    }
    let cat = try CatProcess(stream: daemon.name, frames: reference.count, segmented: true, directory: directory)
    if let sender { try sender(daemon, stream) } else { try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: pause) }
    let (status, errors) = cat.finish()
    #expect(status == 0, "\(label): cat exited \(status): \(errors)\n\(daemon.log.suffix(3000))")
    #expect(!errors.contains("lapped"), "\(label): \(errors)")
    let ours = try catMD5s(cat)
    let difference = firstDifference(ours, reference)
    #expect(difference == nil, "\(label): \(difference ?? "")")
    #expect(daemon.isRunning)
}

@Suite(.serialized) struct EndToEndTests {
    static let corpus = TestEnvironment.corpusFiles()

    @Test(.enabled(if: TestEnvironment.hasCorpus, "needs ../shared/corpus"), arguments: corpus)
    func conformanceStreamThroughTCPAndSharedMemory(_ url: URL) throws {
        try expectBitExact([UInt8](try Data(contentsOf: url)), label: String(url.lastPathComponent.prefix(12)))
    }

    @Test func x264WithBFramesPublishedAsNV12() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: "h264", size: "320x240", frames: 40,
                                              encoderParameters: "bframes=3:b-pyramid=normal:keyint=15", in: directory, name: "b.h264")
        try expectBitExact([UInt8](try Data(contentsOf: url)), label: "x264b", output: "auto")
    }

    @Test func x265WithBFrames() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: "h265", size: "320x240", frames: 30,
                                              encoderParameters: "bframes=4:keyint=12", in: directory, name: "b.h265")
        try expectBitExact([UInt8](try Data(contentsOf: url)), label: "x265b", output: "auto")
    }

    @Test func x265Main10PublishedAsP010() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: "h265", size: "256x144", frames: 20, pixelFormat: "yuv420p10le",
                                              encoderParameters: "bframes=2", in: directory, name: "m10.h265")
        try expectBitExact([UInt8](try Data(contentsOf: url)), label: "main10", output: "auto")
    }

    @Test func x264High422AndMonochromeNative() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let high422 = try GeneratedStreams.encode(codec: "h264", size: "160x96", frames: 8, pixelFormat: "yuv422p",
                                                  in: directory, name: "422.h264")
        try expectBitExact([UInt8](try Data(contentsOf: high422)), label: "422", output: "auto")
        let gray = try GeneratedStreams.encode(codec: "h265", size: "160x96", frames: 8, pixelFormat: "gray",
                                               in: directory, name: "gray.h265")
        try expectBitExact([UInt8](try Data(contentsOf: gray)), label: "gray", output: "auto")
    }

    /// 720p then 1080p inside one connection: the decoder is recreated once, `cat --output seg%d.y4m` starts a
    /// second file, and each segment matches FFmpeg's decode of it.
    @Test func resolutionChangeInsideOneConnection() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let small = try GeneratedStreams.encode(codec: "h264", size: "1280x720", frames: 8, in: directory, name: "720.h264")
        let large = try GeneratedStreams.encode(codec: "h264", size: "1920x1080", frames: 8, in: directory, name: "1080.h264")
        let stream = [UInt8](try Data(contentsOf: small)) + [UInt8](try Data(contentsOf: large))
        let facts = StreamFacts(stream)
        #expect(facts.segmentStarts.count == 2)
        let reference = try referenceMD5s(stream, facts: facts, directory: directory)
        let daemon = try DaemonProcess(label: "resize", settings: ["max_width": "1920", "max_height": "1088", "slots": "20"])
        let cat = try CatProcess(stream: daemon.name, frames: 16, segmented: true, directory: directory)
        try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: 2000)
        let (status, errors) = cat.finish()
        #expect(status == 0, "\(errors)")
        #expect(cat.segments().count == 2)
        #expect(firstDifference(try catMD5s(cat), reference) == nil)
        #expect(daemon.waitUntilPublished(16))
        #expect(daemon.status?.counters.decoderRecreations == 1)
    }

    /// `codec = "auto"`: an H.264 sender, then an H.265 sender on the next connection, no restart.
    @Test func h264ThenH265OnSuccessiveConnections() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let first = [UInt8](try Data(contentsOf: try GeneratedStreams.encode(codec: "h264", size: "320x240", frames: 10, in: directory, name: "a.h264")))
        let second = [UInt8](try Data(contentsOf: try GeneratedStreams.encode(codec: "h265", size: "320x240", frames: 10, in: directory, name: "b.h265")))
        let reference = try referenceMD5s(first, facts: StreamFacts(first), directory: directory)
            + referenceMD5s(second, facts: StreamFacts(second), directory: directory)
        let daemon = try DaemonProcess(label: "codecs", settings: ["max_width": "320", "max_height": "240", "slots": "32", "codec": "\"auto\""])
        let cat = try CatProcess(stream: daemon.name, frames: 20, segmented: true, directory: directory)
        let h264 = try Sender(port: daemon.port)
        try h264.sendPaced(first, pauseMicroseconds: 500)
        h264.close()
        #expect(daemon.waitUntilPublished(10))
        try Sender(port: daemon.port).sendPaced(second, pauseMicroseconds: 500)
        let (status, errors) = cat.finish()
        #expect(status == 0, "\(errors)")
        #expect(firstDifference(try catMD5s(cat), reference) == nil)
        #expect(daemon.status?.codec == "h265")
        #expect(daemon.status?.counters.connections == 2)
        #expect(daemon.log.contains("codec detected: h265"))
    }

    /// FFmpeg itself as the sender: `ffmpeg -re -i FILE -c copy -f h264 tcp://…`.
    @Test func ffmpegAsTheSender() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: "h264", size: "320x240", frames: 25,
                                              encoderParameters: "bframes=2", in: directory, name: "f.h264")
        try expectBitExact([UInt8](try Data(contentsOf: url)), label: "ffsend", output: "auto") { daemon, _ in
            try runChecked("ffmpeg", ["-v", "error", "-re", "-i", url.path, "-c", "copy", "-f", "h264",
                                      "tcp://127.0.0.1:\(daemon.port)"])
        }
    }

    /// Raw Annex B in UDP datagrams, as `ffmpeg -f h264 udp://` sends it (split anywhere, 1316-byte packets);
    /// the stream ends when the sender goes quiet for idle_timeout.
    @Test func rawUDPFromFFmpeg() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: "h264", size: "320x240", frames: 25,
                                              encoderParameters: "bframes=2", in: directory, name: "u.h264")
        try expectBitExact([UInt8](try Data(contentsOf: url)), label: "udp", output: "auto", transport: "udp",
                           settings: ["idle_timeout": "3"]) { daemon, _ in
            try runChecked("ffmpeg", ["-v", "error", "-re", "-i", url.path, "-c", "copy", "-f", "h264",
                                      "udp://127.0.0.1:\(daemon.port)?pkt_size=1316"])
        }
    }

    /// RTP from FFmpeg's packetizer: FU-A/FU fragments and aggregates depacketized, the marker bit ending each
    /// access unit.
    @Test(arguments: ["h264", "h265"])
    func rtpFromFFmpeg(codec: String) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: codec, size: "640x360", frames: 25,
                                              encoderParameters: "bframes=2", in: directory, name: "r.\(codec)")
        try expectBitExact([UInt8](try Data(contentsOf: url)), label: "rtp\(codec)", output: "auto", transport: "rtp",
                           settings: ["idle_timeout": "3", "codec": "\"\(codec)\""]) { daemon, _ in
            try runChecked("ffmpeg", ["-v", "error", "-re", "-i", url.path, "-c", "copy", "-f", "rtp",
                                      "rtp://127.0.0.1:\(daemon.port)?pkt_size=1200"])
        }
    }
}
