import Bitstream
import Decoding
import FrameFormats
import Glibc
import StreamrecvTestSupport
import Testing

/// A probe whose devices work (their frames count as the device's own) until they "fail" after some frames.
struct FailingDeviceProbe: HardwareDeviceProbing {
    var failingAfterFrames: Int?

    func codecSupports(_ accelerator: HardwareAccelerator, codec: VideoCodec) -> Bool { accelerator == .cuda }

    func openDevice(_ accelerator: HardwareAccelerator, codec: VideoCodec) -> Result<HardwareDevice, HardwareProbeFailure> {
        .success(.simulated(accelerator, working: true, failingAfterFrames: failingAfterFrames))
    }
}

/// The hardware decoder lost mid-stream (the device reset, the driver gone, a download that fails): the stream goes
/// on in software from the current GOP, and no frame is lost or handed out twice.
@Suite struct HardwareFallbackTests {
    static func fallbackReasons(_ events: [StreamDecoderEvent]) -> [String] {
        events.compactMap { if case .fellBackToSoftware(let reason) = $0 { reason } else { nil } }
    }

    /// Failing in the middle of a GOP with B-frames, at its first frame, and in the first GOP.
    @Test(arguments: [17, 30, 31, 3])
    func aDeviceLostMidStreamFallsBackWithoutLosingTheGOP(failingAfterFrames: Int) throws {
        let inputs = decoderInputs(try encode("h264", size: "96x64", frames: 60, parameters: "keyint=30:min-keyint=30:scenecut=0:bframes=2"))
        let reference = decodeAll(inputs, decoder: StreamDecoder(configuration: DecoderConfiguration(hardware: .none)))
        var events: [StreamDecoderEvent] = []
        let decoder = StreamDecoder(configuration: DecoderConfiguration(hardware: .only(.cuda)),
                                    probe: FailingDeviceProbe(failingAfterFrames: failingAfterFrames))
        let frames = decodeAll(inputs, decoder: decoder) { events.append($0) }
        #expect(frames.count == reference.count && frames == reference, "\(frames.count) frames, \(reference.count) expected")
        #expect(decoder.statistics.hardwareFallbacks == 1)
        #expect(Self.fallbackReasons(events) == ["injected device failure after \(failingAfterFrames) frames"], "\(events)")
    }

    /// A working device never falls back.
    @Test func aWorkingDeviceKeepsDecoding() throws {
        let inputs = decoderInputs(try encode("h264", size: "96x64", frames: 40, parameters: "keyint=10:bframes=2"))
        let decoder = StreamDecoder(configuration: DecoderConfiguration(hardware: .only(.cuda)), probe: FailingDeviceProbe())
        let reference = decodeAll(inputs, decoder: StreamDecoder(configuration: DecoderConfiguration(hardware: .none)))
        #expect(decodeAll(inputs, decoder: decoder) == reference)
        #expect(decoder.statistics.hardwareFallbacks == 0)
    }

    /// A frame whose download failed (`reportHardwareFailure` from the consumer) is not lost: the replay in
    /// software hands it out again, and the frames before it are not repeated.
    @Test func aFailedDownloadIsDecodedAgainInSoftware() throws {
        let inputs = decoderInputs(try encode("h265", size: "96x64", frames: 40, parameters: "keyint=20:min-keyint=20:scenecut=0:bframes=3"))
        let reference = decodeAll(inputs, decoder: StreamDecoder(configuration: DecoderConfiguration(hardware: .none)))
        var events: [StreamDecoderEvent] = []
        let decoder = StreamDecoder(configuration: DecoderConfiguration(hardware: .only(.cuda)), probe: FailingDeviceProbe())
        var frames: [[UInt8]] = []
        var offered = 0
        let collect: (StreamDecoderOutput) -> Void = { output in
            guard case .frame(let frame) = output else {
                if case .event(let event) = output { events.append(event) }
                return
            }
            offered += 1
            if offered == 25 {
                decoder.reportHardwareFailure("GPU frame download failed: simulated")
                return
            }
            let layout = FrameLayout(format: frame.outputFormat(.auto)!, width: frame.width, height: frame.height)
            var buffer = [UInt8](repeating: 0, count: layout.byteCount)
            buffer.withUnsafeMutableBytes { try! frame.write(into: $0, layout: layout) }
            frames.append(PlanarConversion.planar(buffer, layout: layout))
        }
        for input in inputs { decoder.decode(input, collect) }
        decoder.drain(collect)
        #expect(frames == reference, "\(frames.count) frames, \(reference.count) expected")
        #expect(Self.fallbackReasons(events) == ["GPU frame download failed: simulated"])
    }

    /// A new size or bit depth at a keyframe recreates the hardware decoder (and with it the frames context
    /// libavcodec makes from the device at get_format), on the hardware path, every frame still exact.
    @Test(arguments: [("h264", "96x64", "64x48", "yuv420p", "yuv420p"), ("h265", "96x64", "96x64", "yuv420p", "yuv420p10le")])
    func aFormatChangeRecreatesTheHardwareDecoder(codec: String, first: String, second: String, firstFormat: String, secondFormat: String) throws {
        let inputs = decoderInputs(try encode(codec, size: first, frames: 12, parameters: "keyint=6:bframes=2", pixelFormat: firstFormat)
            + encode(codec, size: second, frames: 12, parameters: "keyint=6:bframes=2", pixelFormat: secondFormat))
        let reference = decodeAll(inputs, decoder: StreamDecoder(configuration: DecoderConfiguration(hardware: .none)))
        var events: [StreamDecoderEvent] = []
        let decoder = StreamDecoder(configuration: DecoderConfiguration(hardware: .only(.cuda)), probe: FailingDeviceProbe())
        #expect(decodeAll(inputs, decoder: decoder) { events.append($0) } == reference)
        let created = events.compactMap { if case .created(let recreation, let hardware, _, _, _) = $0 { (recreation, hardware) } else { nil } }
        #expect(created.count == 2 && created[1].0 && created.allSatisfy { $0.1 == "cuda" }, "\(created)")
        #expect(decoder.statistics.hardwareFallbacks == 0)
    }

    @Test func hardwarePoolsCoverWhatTheDaemonHolds() {
        let slice = DecoderConfiguration(threading: .slice, threads: 1)
        #expect(VideoDecoder.extraHardwareFrames(reorderDepth: 2, assumedReorderDepth: 16, configuration: slice) == 2)
        #expect(VideoDecoder.extraHardwareFrames(reorderDepth: nil, assumedReorderDepth: 5, configuration: slice) == 7)
        let frames = DecoderConfiguration(threading: .frame, threads: 4)
        #expect(VideoDecoder.extraHardwareFrames(reorderDepth: 0, assumedReorderDepth: 16, configuration: frames) == 6)
        let automatic = DecoderConfiguration(threading: .frame, threads: 0)
        #expect(VideoDecoder.extraHardwareFrames(reorderDepth: 0, assumedReorderDepth: 16, configuration: automatic) == 18)
    }
}
