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
/// Every frame out of `decoder`, planar; `events` gets what its policy did, in order with them.
func decodeAll(_ inputs: [DecoderInput], decoder: StreamDecoder, output: DecoderConfiguration.OutputMode = .auto,
               events: (StreamDecoderEvent) -> Void = { _ in }) -> [[UInt8]] {
    var frames: [[UInt8]] = []
    let collect: (StreamDecoderOutput) -> Void = { emitted in
        guard case .frame(let frame) = emitted else {
            if case .event(let event) = emitted { events(event) }
            return
        }
        let format = frame.outputFormat(output)!
        let layout = FrameLayout(format: format, width: frame.width, height: frame.height)
        var buffer = [UInt8](repeating: 0, count: layout.byteCount)
        buffer.withUnsafeMutableBytes { try! frame.write(into: $0, layout: layout) }
        frames.append(PlanarConversion.planar(buffer, layout: layout))
    }
    for input in inputs { decoder.decode(input, collect) }
    decoder.drain(collect)
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
