import Bitstream
import CFFmpeg
@testable import Decoding
import Foundation
import FrameFormats
import StreamrecvTestSupport
import Testing

/// One libavcodec decoder driven directly: what `send`/`receive` answer, end of stream and reset, garbage, and
/// frames bit-exact against `ffmpeg -f framemd5` on clips generated at test time.
@Suite struct VideoDecoderTests {
    static func decoder(for input: DecoderInput, configuration: DecoderConfiguration = DecoderConfiguration(hardware: .none),
                        hardware: HardwareDevice? = nil) throws -> VideoDecoder {
        try VideoDecoder(codec: input.codec, configuration: configuration, parameterSets: input.parameterSets,
                         reorderDepth: input.reorderDepth, lowDelay: input.reorderDepthIsSignalled,
                         assumedReorderDepth: input.decodedPictureBufferFrames, hardware: hardware)
    }

    /// A decoded frame as FFmpeg's rawvideo muxer packs it (planar, no padding), with its pts.
    struct Picture: Equatable {
        var pts: Int64
        var bytes: [UInt8]
    }

    static func picture(_ frame: DecodedFrame) -> Picture {
        let layout = FrameLayout(format: frame.outputFormat(.native)!, width: frame.width, height: frame.height)
        var buffer = [UInt8](repeating: 0, count: layout.byteCount)
        buffer.withUnsafeMutableBytes { try! frame.write(into: $0, layout: layout) }
        return Picture(pts: frame.pts, bytes: PlanarConversion.planar(buffer, layout: layout))
    }

    /// Sends every input (taking frames out whenever the decoder is full), then drains it.
    static func decodeAll(_ inputs: [DecoderInput], with decoder: VideoDecoder) -> [Picture] {
        var pictures: [Picture] = []
        func receiveAll() {
            while decoder.receive({ pictures.append(picture($0)) }) == .frame {}
        }
        for input in inputs {
            var outcome = input.data.withUnsafeBytes { decoder.send($0, pts: input.pts) }
            while outcome == .full {
                receiveAll()
                outcome = input.data.withUnsafeBytes { decoder.send($0, pts: input.pts) }
            }
            #expect(outcome == .accepted, "pts \(input.pts)")
            receiveAll()
        }
        #expect(decoder.sendEndOfStream() == .accepted)
        receiveAll()
        return pictures
    }

    static func md5(_ bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: 16)
        bytes.withUnsafeBufferPointer { av_md5_sum(&digest, $0.baseAddress, $0.count) }
        return digest.map { String(format: "%02x", $0) }.joined()
    }

    /// FFmpeg's own decode of `stream`: one md5 per frame, in output order.
    static func ffmpegFrameMD5s(_ stream: [UInt8], codec: VideoCodec) throws -> [String] {
        let path = try TestEnvironment.temporaryDirectory().appendingPathComponent("clip").path
        try Data(stream).write(to: URL(fileURLWithPath: path))
        let result = try runChecked("ffmpeg", ["-v", "error", "-f", codec == .h264 ? "h264" : "hevc", "-i", path, "-f", "framemd5", "-"])
        return result.text.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap {
            $0.split(separator: ",").last.map { $0.trimmingCharacters(in: .whitespaces) }
        }
    }

    /// A clip FFmpeg encodes from `source` (a lavfi graph) with extra output options: what `encode` cannot ask for.
    static func ffmpegClip(source: String, frames: Int, options: [String]) throws -> [UInt8] {
        let path = try TestEnvironment.temporaryDirectory().appendingPathComponent("clip.h264").path
        try runChecked("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", source, "-frames:v", String(frames)]
            + options + ["-c:v", "libx264", "-f", "h264", path])
        return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    // MARK: - Bit-exact against FFmpeg

    /// B-frames (reordered output), 8-bit H.264 and 10-bit H.265: every frame equals FFmpeg's, in its order.
    @Test(arguments: [("h264", "yuv420p", "keyint=8:bframes=2"), ("h265", "yuv420p10le", "keyint=8:bframes=3")])
    func framesAreBitExactWithFFmpegs(codec: String, pixelFormat: String, parameters: String) throws {
        let stream = try encode(codec, size: "96x64", frames: 20, parameters: parameters, pixelFormat: pixelFormat)
        let inputs = decoderInputs(stream)
        let pictures = Self.decodeAll(inputs, with: try Self.decoder(for: inputs[0]))
        let reference = try Self.ffmpegFrameMD5s(stream, codec: inputs[0].codec)
        #expect(reference.count == 20)
        #expect(pictures.map { Self.md5($0.bytes) } == reference)
    }

    /// Frame threads keep earlier packets while later ones are sent: the reused packet buffer must not be
    /// overwritten under them.
    @Test func frameThreadsAreBitExactWithFFmpegs() throws {
        let stream = try encode("h264", size: "96x64", frames: 24, parameters: "keyint=12:bframes=2")
        let inputs = decoderInputs(stream)
        let decoder = try Self.decoder(for: inputs[0], configuration: DecoderConfiguration(threading: .frame, threads: 3, hardware: .none))
        #expect(decoder.activeThreading == "frame threads × 3")
        let pictures = Self.decodeAll(inputs, with: decoder)
        #expect(pictures.map { Self.md5($0.bytes) } == (try Self.ffmpegFrameMD5s(stream, codec: .h264)))
    }

    /// Noise at qp 0 on frames 3 to 5 only: small access units fill the first packet buffer (64 KiB), then larger
    /// ones make it grow, then small ones again reuse it. Every access unit still reaches libavcodec whole.
    @Test func accessUnitsLargerThanThePacketBufferDecodeExactly() throws {
        let stream = try Self.ffmpegClip(source: "testsrc2=size=320x240:rate=25,noise=alls=100:allf=t:enable='between(n,3,5)'",
                                         frames: 9, options: ["-x264-params", "qp=0:keyint=3:bframes=0"])
        let inputs = decoderInputs(stream)
        let sizes = inputs.map(\.data.count)
        #expect(sizes.count == 9 && sizes[0..<3].allSatisfy { $0 < 64 << 10 } && sizes[3..<6].allSatisfy { $0 > 64 << 10 }
                && sizes[6...].allSatisfy { $0 < 64 << 10 }, "\(sizes)")
        let pictures = Self.decodeAll(inputs, with: try Self.decoder(for: inputs[0]))
        #expect(pictures.map { Self.md5($0.bytes) } == (try Self.ffmpegFrameMD5s(stream, codec: .h264)))
    }

    /// With B-frames the output order differs from the order sent; each frame brings back its own access unit's pts.
    @Test func eachFrameCarriesThePtsOfItsAccessUnit() throws {
        let inputs = decoderInputs(try encode("h264", size: "64x48", frames: 12, parameters: "keyint=6:min-keyint=6:scenecut=0:bframes=2"))
        var keyframes: [Int64] = []
        let decoder = try Self.decoder(for: inputs[0])
        var pts: [Int64] = []
        for input in inputs {
            _ = input.data.withUnsafeBytes { decoder.send($0, pts: 1000 + input.pts) }
            while decoder.receive({ pts.append($0.pts); if $0.isKeyframe { keyframes.append($0.pts) } }) == .frame {}
        }
        _ = decoder.sendEndOfStream()
        while decoder.receive({ pts.append($0.pts); if $0.isKeyframe { keyframes.append($0.pts) } }) == .frame {}
        #expect(pts.sorted() == Array(1000..<1012), "every pts once")
        #expect(pts != pts.sorted(), "B-frames come out in another order than sent")
        #expect(keyframes == inputs.filter(\.isRandomAccess).map { 1000 + $0.pts })
    }

    // MARK: - Send and receive outcomes

    /// AVERROR_INVALIDDATA in FFmpeg's words.
    static let invalidData = DecoderError.sendFailed("Invalid data found when processing input")

    @Test func aFreshDecoderNeedsInput() throws {
        let inputs = decoderInputs(try encode("h264", size: "64x48", frames: 1))
        #expect(try Self.decoder(for: inputs[0]).receive { _ in Issue.record("no frame was sent") } == .needsInput)
    }

    /// libavcodec keeps one decoded frame and one packet not yet decoded; past that the decoder answers `.full`
    /// until its frames are taken out (low delay: every frame is ready at once), and then takes input again.
    @Test func aDecoderHoldingFramesIsFullUntilTheyAreReceived() throws {
        let inputs = decoderInputs(try encode("h264", size: "64x48", frames: 4, parameters: "bframes=0"))
        let decoder = try Self.decoder(for: inputs[0])
        #expect(decoder.lowDelay)
        func send(_ index: Int) -> SendOutcome { inputs[index].data.withUnsafeBytes { decoder.send($0, pts: inputs[index].pts) } }
        #expect(send(0) == .accepted && send(1) == .accepted)
        #expect(send(2) == .full)
        #expect(send(2) == .full, "refusing changes nothing")
        var received: [Int64] = []
        while decoder.receive({ received.append($0.pts) }) == .frame {}
        #expect(received == [0, 1])
        #expect(send(2) == .accepted)
    }

    /// After end of stream the held frames come out, then `.endOfStream`; input is refused until `reset`.
    @Test func aDrainedDecoderRefusesInputUntilReset() throws {
        let inputs = decoderInputs(try encode("h264", size: "64x48", frames: 3, parameters: "bframes=0"))
        let decoder = try Self.decoder(for: inputs[0])
        _ = inputs[0].data.withUnsafeBytes { decoder.send($0, pts: 0) }
        #expect(decoder.sendEndOfStream() == .accepted)
        #expect(decoder.receive { _ in } == .frame)
        #expect(decoder.receive { _ in } == .endOfStream)
        #expect(inputs[1].data.withUnsafeBytes { decoder.send($0, pts: 1) } == .failed(.sendFailed("End of file")))
        decoder.reset()
        // A keyframe again after the reset: it decodes as the first one did.
        #expect(inputs[0].data.withUnsafeBytes { decoder.send($0, pts: 7) } == .accepted)
        var pts: [Int64] = []
        #expect(decoder.receive { pts.append($0.pts) } == .frame && pts == [7])
    }

    /// An empty packet would mean end of stream to libavcodec if it had no data pointer; with one it is refused.
    @Test func anEmptyAccessUnitIsRefusedNotTakenForEndOfStream() throws {
        let inputs = decoderInputs(try encode("h264", size: "64x48", frames: 2, parameters: "bframes=0"))
        let decoder = try Self.decoder(for: inputs[0])
        #expect([UInt8]().withUnsafeBytes { decoder.send($0, pts: 0) } == .failed(.sendFailed("Invalid argument")))
        #expect(inputs[0].data.withUnsafeBytes { decoder.send($0, pts: 0) } == .accepted, "still open")
        #expect(decoder.receive { _ in } == .frame)
    }

    /// Bytes that hold no NAL unit, and a slice whose PPS was never given: refused with FFmpeg's text, no frame,
    /// and the decoder still decodes the real stream afterwards.
    @Test func garbageFailsWithFFmpegsTextAndLeavesTheDecoderUsable() throws {
        let inputs = decoderInputs(try encode("h264", size: "64x48", frames: 2, parameters: "bframes=0"))
        let decoder = try Self.decoder(for: inputs[0])
        var generator = SeededGenerator(seed: 7)
        let noise = (0..<500).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for garbage in [noise, [0, 0, 0, 1, 0x65] + noise] {
            #expect(garbage.withUnsafeBytes { decoder.send($0, pts: 0) } == .failed(Self.invalidData))
            #expect(decoder.receive { _ in Issue.record("a frame out of garbage") } == .needsInput)
        }
        let pictures = Self.decodeAll(inputs, with: decoder)
        #expect(pictures.map(\.pts) == [0, 1])
    }

    /// get_format accepts only the device's own format: a decoder with a device whose format libavcodec does not
    /// offer fails, and never decodes in software behind the caller's back.
    @Test func aHardwareDecoderNeverFallsBackInsideLibavcodec() throws {
        let inputs = decoderInputs(try encode("h264", size: "64x48", frames: 2, parameters: "bframes=0"))
        func decoder(wanting format: AVPixelFormat) throws -> VideoDecoder {
            // Never initialised and never used for decoding: only get_format's choice matters here.
            let context = try #require(av_hwdevice_ctx_alloc(AV_HWDEVICE_TYPE_VAAPI), "libavutil without VA-API")
            return try Self.decoder(for: inputs[0], hardware: HardwareDevice(accelerator: .vaapi, context: context, pixelFormat: format))
        }
        // libavcodec's H.264 decoder offers no DRM_PRIME frames: get_format picks none.
        let refused = try decoder(wanting: AV_PIX_FMT_DRM_PRIME)
        #expect(inputs[0].data.withUnsafeBytes { refused.send($0, pts: 0) } == .failed(Self.invalidData))
        #expect(refused.receive { _ in Issue.record("a frame decoded without the device") } == .needsInput)
        // The control: a format it does offer (its software one) is taken, and the same access unit decodes.
        let offered = try decoder(wanting: AV_PIX_FMT_YUV420P)
        #expect(inputs[0].data.withUnsafeBytes { offered.send($0, pts: 0) } == .accepted)
        #expect(offered.receive { _ in } == .frame)
    }

    // MARK: - Configuration

    /// Low delay only where the bitstream states no reordering and slice threading is asked for.
    @Test func lowDelayOnlyWhereTheStreamStatesNoReordering() throws {
        let unit = decoderInputs(try encode("h264", size: "64x48", frames: 1, parameters: "bframes=0"))[0]
        func lowDelay(_ reorderDepth: Int?, _ stated: Bool, _ threading: DecoderConfiguration.Threading) throws -> Bool {
            try VideoDecoder(codec: .h264, configuration: DecoderConfiguration(threading: threading, hardware: .none),
                             parameterSets: unit.parameterSets, reorderDepth: reorderDepth, lowDelay: stated,
                             assumedReorderDepth: 4, hardware: nil).lowDelay
        }
        #expect(try lowDelay(0, true, .slice))
        #expect(try !lowDelay(0, false, .slice), "reordering only inferred")
        #expect(try !lowDelay(2, true, .slice), "the stream reorders")
        #expect(try !lowDelay(nil, true, .slice), "depth unknown")
        #expect(try !lowDelay(0, true, .frame), "frame threads win")
    }

    @Test func activeThreadingSaysWhatLibavcodecRuns() throws {
        let unit = decoderInputs(try encode("h264", size: "64x48", frames: 1))[0]
        func threading(_ configuration: DecoderConfiguration) throws -> String {
            try Self.decoder(for: unit, configuration: configuration).activeThreading
        }
        #expect(try threading(DecoderConfiguration(threading: .slice, threads: 1, hardware: .none)) == "one thread")
        #expect(try threading(DecoderConfiguration(threading: .slice, threads: 2, hardware: .none)) == "slice threads × 2")
        #expect(try threading(DecoderConfiguration(threading: .frame, threads: 2, hardware: .none)) == "frame threads × 2")
    }

    /// Chunked: each slice sent on its own (as they arrive over a byte stream). The picture comes out after its last
    /// slice, never before, and equals the whole access unit's; back to whole access units, nothing changed.
    @Test func slicesSentOneByOneGiveTheSamePicturesAsWholeAccessUnits() throws {
        let inputs = decoderInputs(try encode("h264", size: "96x64", frames: 4, parameters: "slices=4:bframes=0"))
        let reference = Self.decodeAll(inputs, with: try Self.decoder(for: inputs[0]))
        let decoder = try Self.decoder(for: inputs[0])
        decoder.setChunked(true)
        #expect(decoder.isChunked)
        var pictures: [Picture] = []
        for input in inputs {
            let parts = Self.sliceParts(of: input.data)
            #expect(parts.count == 4, "pts \(input.pts): \(parts.count) parts")
            for (index, part) in parts.enumerated() {
                #expect(part.withUnsafeBytes { decoder.send($0, pts: input.pts) } == .accepted)
                let before = pictures.count
                while decoder.receive({ pictures.append(Self.picture($0)) }) == .frame {}
                #expect(pictures.count - before == (index == parts.count - 1 ? 1 : 0), "pts \(input.pts), part \(index)")
            }
        }
        #expect(pictures == reference)
        decoder.setChunked(false)
        #expect(!decoder.isChunked)
        decoder.reset()
        #expect(Self.decodeAll(inputs, with: decoder) == reference)
    }

    /// An access unit cut as the daemon cuts it: everything up to and including the first slice, then each slice.
    static func sliceParts(of accessUnit: [UInt8]) -> [[UInt8]] {
        var splitter = AnnexBSplitter()
        var units: [NALUnit] = []
        splitter.append(accessUnit) { units.append($0) }
        splitter.flush { units.append($0) }
        var parts: [[UInt8]] = [[]]
        var slices = 0
        for unit in units {
            let isSlice = [1, 5].contains(unit.bytes.first! & 0x1F)
            if isSlice && slices > 0 { parts.append([]) }
            parts[parts.count - 1] += [0, 0, 0, 1] + unit.bytes
            if isSlice { slices += 1 }
        }
        return parts
    }
}
