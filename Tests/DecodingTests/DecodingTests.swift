import Bitstream
import Decoding
import FrameFormats
import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

/// A probe that answers from a table, to test selection without hardware.
struct FakeProbe: HardwareDeviceProbing {
    var supported: Set<HardwareAccelerator>
    var opens: Set<HardwareAccelerator>

    func codecSupports(_ accelerator: HardwareAccelerator, codec: VideoCodec) -> Bool { supported.contains(accelerator) }

    func openDevice(_ accelerator: HardwareAccelerator, codec: VideoCodec) -> Result<HardwareDevice, HardwareProbeFailure> {
        opens.contains(accelerator) ? .success(.simulated(accelerator)) : .failure(HardwareProbeFailure(reason: "no \(accelerator.rawValue) device"))
    }
}

/// Access units of an Annex B file, as the pipeline would hand them to the decoder.
func decoderInputs(_ bytes: [UInt8]) -> [DecoderInput] {
    let units = accessUnits(of: bytes)
    return units.enumerated().map { index, unit in
        DecoderInput(
            codec: unit.codec, data: unit.data, pts: Int64(index), isRandomAccess: unit.isKeyframe,
            parameterSets: unit.parameterSets,
            reorderDepth: unit.format?.reorderDepth, reorderDepthIsSignalled: unit.format?.reorderDepthIsSignalled ?? false,
            decodedPictureBufferFrames: unit.format?.decodedPictureBufferFrames ?? 16,
            undecodable: unit.hasPicture && unit.format == nil)
    }
}

func encode(_ codec: String, size: String, frames: Int, parameters: String = "", pixelFormat: String = "yuv420p") throws -> [UInt8] {
    let directory = try TestEnvironment.temporaryDirectory()
    let url = try GeneratedStreams.encode(
        codec: codec, size: size, frames: frames, pixelFormat: pixelFormat, encoderParameters: parameters,
        in: directory, name: "s.\(codec)")
    return [UInt8](try Data(contentsOf: url))
}

/// Decodes every input and returns each frame as planar bytes (as y4m carries them) in output order.
func decodeAll(_ inputs: [DecoderInput], decoder: StreamDecoder, output: DecoderConfiguration.OutputMode = .auto) -> [[UInt8]] {
    var frames: [[UInt8]] = []
    let collect: (DecodedFrame) -> Void = { frame in
        let format = frame.outputFormat(output)!
        let layout = FrameLayout(format: format, width: frame.width, height: frame.height)
        var buffer = [UInt8](repeating: 0, count: layout.byteCount)
        buffer.withUnsafeMutableBytes { try! frame.write(into: $0, layout: layout) }
        frames.append(PlanarConversion.planar(buffer, layout: layout))
    }
    for input in inputs { decoder.decode(input, output: collect) }
    decoder.drain(output: collect)
    return frames
}

@Suite struct HardwareSelectionTests {
    @Test func autoTakesTheFirstAcceleratorThatOpens() throws {
        let probe = FakeProbe(supported: [.vaapi, .vdpau, .cuda], opens: [.vdpau])
        let selection = try HardwareSelection.select(.auto, codec: .h264, probe: probe)
        #expect(selection.device?.accelerator == .vdpau)
        #expect(selection.attempts.map(\.accelerator) == [.vaapi, .cuda, .vdpau])
        #expect(selection.summary.contains("hardware decoding with vdpau"))
        #expect(selection.summary.contains("vaapi: no vaapi device"))
    }

    @Test func autoFallsBackToSoftwareAndSaysWhy() throws {
        let selection = try HardwareSelection.select(.auto, codec: .h265, probe: FakeProbe(supported: [.vaapi], opens: []))
        #expect(selection.device == nil)
        #expect(selection.summary.hasPrefix("software decoding (hwaccel = auto)"))
        #expect(selection.summary.contains("vaapi: no vaapi device"))
        #expect(selection.summary.contains("cuda: libavcodec's decoder has no cuda support"))
    }

    @Test func aNamedAcceleratorIsStrict() {
        #expect(throws: DecoderError.hardwareUnavailable(accelerator: "cuda", device: "CUDA device 0", reason: "no cuda device")) {
            _ = try HardwareSelection.select(.only(.cuda), codec: .h264, probe: FakeProbe(supported: [.cuda], opens: []))
        }
        #expect(throws: DecoderError.self) {
            _ = try HardwareSelection.select(.only(.qsv), codec: .h264, probe: FakeProbe(supported: [], opens: [.qsv]))
        }
        #expect(throws: Never.self) {
            _ = try HardwareSelection.select(.none, codec: .h264, probe: FakeProbe(supported: [.vaapi], opens: [.vaapi]))
        }
    }

    /// No GPU here: the real probe must fall back for `auto` and fail clearly for `vaapi`.
    @Test func realProbeOnThisMachine() throws {
        let automatic = try HardwareSelection.select(.auto, codec: .h264, probe: FFmpegHardwareProbe())
        guard automatic.device == nil else { return }  // a machine with a GPU: nothing more to check here
        #expect(automatic.summary.contains("software decoding"))
        do {
            _ = try HardwareSelection.select(.only(.vaapi), codec: .h264, probe: FFmpegHardwareProbe())
            Issue.record("vaapi opened on a machine where auto found nothing")
        } catch {
            #expect(error.description.contains("hwaccel vaapi unavailable on /dev/dri/renderD128"))
        }
    }
}

@Suite struct StreamDecoderTests {
    @Test func nv12AndP010AreLosslessLayoutsOfThePlanarFrame() throws {
        for (pixelFormat, codec) in [("yuv420p", "h264"), ("yuv420p10le", "h265")] {
            let inputs = decoderInputs(try encode(codec, size: "96x64", frames: 3, pixelFormat: pixelFormat))
            let auto = decodeAll(inputs, decoder: StreamDecoder(configuration: DecoderConfiguration(hardware: .none)) { _ in })
            let native = decodeAll(inputs, decoder: StreamDecoder(configuration: DecoderConfiguration(output: .native, hardware: .none)) { _ in },
                                   output: .native)
            #expect(auto.count == 3 && auto == native, "\(pixelFormat)")
        }
    }

    @Test func recreatedOnARealChangeNeverOnRepeats() throws {
        let repeated = decoderInputs(try encode("h264", size: "64x64", frames: 12, parameters: "keyint=4:repeat-headers=1"))
        let steady = StreamDecoder(configuration: DecoderConfiguration(hardware: .none)) { _ in }
        #expect(decodeAll(repeated, decoder: steady).count == 12)
        #expect(steady.statistics.creations == 1 && steady.statistics.recreations == 0)

        let changing = decoderInputs(try encode("h264", size: "64x64", frames: 5) + (try encode("h264", size: "128x96", frames: 5)))
        var events: [StreamDecoderEvent] = []
        let decoder = StreamDecoder(configuration: DecoderConfiguration(hardware: .none)) { events.append($0) }
        let frames = decodeAll(changing, decoder: decoder)
        #expect(frames.count == 10)
        #expect(frames[4].count == 64 * 64 * 3 / 2 && frames[5].count == 128 * 96 * 3 / 2)
        #expect(decoder.statistics.recreations == 1)
        #expect(events.contains { if case .created(recreation: true, _, _, _, _) = $0 { return true } else { return false } })
    }

    @Test func consecutiveFailuresResetAndDecodingResumesAtTheNextKeyframe() throws {
        let clean = decoderInputs(try encode("h264", size: "64x64", frames: 8, parameters: "keyint=4:bframes=0"))
        var garbage = clean[1]
        garbage.undecodable = true
        garbage.isRandomAccess = false
        let inputs = Array(clean[0..<4]) + Array(repeating: garbage, count: StreamDecoder.failuresBeforeReset + 3) + Array(clean[4...])
        var events: [StreamDecoderEvent] = []
        let decoder = StreamDecoder(configuration: DecoderConfiguration(hardware: .none)) { events.append($0) }
        let frames = decodeAll(inputs, decoder: decoder)
        let reference = decodeAll(clean, decoder: StreamDecoder(configuration: DecoderConfiguration(hardware: .none)) { _ in })
        #expect(frames == reference)
        #expect(decoder.statistics.decodeErrors == StreamDecoder.failuresBeforeReset)
        #expect(decoder.statistics.resets == 1)
        #expect(decoder.statistics.skippedAccessUnits == 3)
        #expect(events.contains(.reset(consecutiveFailures: StreamDecoder.failuresBeforeReset)))
    }

    /// A "hardware" decoder whose first frame comes back in system memory (a simulated device) must fall back to
    /// software and feed the GOP again: every frame still comes out, once.
    @Test func unconfirmedHardwareFallsBackAndReplaysTheGOP() throws {
        let inputs = decoderInputs(try encode("h264", size: "64x64", frames: 6, parameters: "keyint=30:bframes=2"))
        var events: [StreamDecoderEvent] = []
        let decoder = StreamDecoder(configuration: DecoderConfiguration(hardware: .auto),
                                    probe: FakeProbe(supported: [.vaapi], opens: [.vaapi])) { events.append($0) }
        let frames = decodeAll(inputs, decoder: decoder)
        let reference = decodeAll(inputs, decoder: StreamDecoder(configuration: DecoderConfiguration(hardware: .none)) { _ in })
        #expect(frames == reference)
        #expect(decoder.statistics.hardwareFallbacks == 1)
        #expect(events.contains { if case .fellBackToSoftware = $0 { return true } else { return false } })
        #expect(decoder.path == "software")
    }

    @Test func accessUnitsBeforeTheFirstKeyframeAreSkipped() throws {
        let inputs = decoderInputs(try encode("h264", size: "64x64", frames: 6, parameters: "keyint=3:bframes=0"))
        let decoder = StreamDecoder(configuration: DecoderConfiguration(hardware: .none)) { _ in }
        #expect(decodeAll(Array(inputs[1...]), decoder: decoder).count == 3)
        #expect(decoder.statistics.skippedAccessUnits == 2)
    }
}
