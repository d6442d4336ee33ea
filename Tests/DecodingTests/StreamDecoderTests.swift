import Decoding
import Testing

@Suite struct StreamDecoderTests {
    @Test func nv12AndP010AreLosslessLayoutsOfThePlanarFrame() throws {
        for (pixelFormat, codec) in [("yuv420p", "h264"), ("yuv420p10le", "h265")] {
            let inputs = decoderInputs(try encode(codec, size: "96x64", frames: 3, pixelFormat: pixelFormat))
            let auto = decodeAll(inputs, decoder: StreamDecoder(configuration: DecoderConfiguration(hardware: .none)))
            let native = decodeAll(inputs, decoder: StreamDecoder(configuration: DecoderConfiguration(output: .native, hardware: .none)),
                                   output: .native)
            #expect(auto.count == 3 && auto == native, "\(pixelFormat)")
        }
    }

    @Test func recreatedOnARealChangeNeverOnRepeats() throws {
        let repeated = decoderInputs(try encode("h264", size: "64x64", frames: 12, parameters: "keyint=4:repeat-headers=1"))
        let steady = StreamDecoder(configuration: DecoderConfiguration(hardware: .none))
        #expect(decodeAll(repeated, decoder: steady).count == 12)
        #expect(steady.statistics.creations == 1 && steady.statistics.recreations == 0)

        let changing = decoderInputs(try encode("h264", size: "64x64", frames: 5) + (try encode("h264", size: "128x96", frames: 5)))
        var events: [StreamDecoderEvent] = []
        let decoder = StreamDecoder(configuration: DecoderConfiguration(hardware: .none))
        let frames = decodeAll(changing, decoder: decoder) { events.append($0) }
        #expect(frames.count == 10)
        #expect(frames[4].count == 64 * 64 * 3 / 2 && frames[5].count == 128 * 96 * 3 / 2)
        #expect(decoder.statistics.recreations == 1)
        #expect(events.contains { if case .created(recreation: true, _, _, _, _) = $0 { return true } else { return false } })
    }

    /// Frames and events come out of one sink in the order they happened: the old decoder's frames, drained, then
    /// the recreation, then the new decoder's frames (the session marks the gap on the event, before those frames).
    @Test func aRecreationComesBetweenTheOldDecodersFramesAndTheNewOnes() throws {
        let changing = decoderInputs(try encode("h264", size: "64x64", frames: 5, parameters: "bframes=2")
            + (try encode("h264", size: "128x96", frames: 5, parameters: "bframes=2")))
        let decoder = StreamDecoder(configuration: DecoderConfiguration(hardware: .none))
        var sequence: [String] = []
        let record: (StreamDecoderOutput) -> Void = { output in
            switch output {
            case .frame(let frame): sequence.append("\(frame.width)x\(frame.height)")
            case .event(.created(let recreation, _, _, _, _)): sequence.append(recreation ? "recreated" : "created")
            case .event: break
            }
        }
        for input in changing { decoder.decode(input, record) }
        decoder.drain(record)
        #expect(sequence == ["created"] + Array(repeating: "64x64", count: 5) + ["recreated"] + Array(repeating: "128x96", count: 5),
                "\(sequence)")
    }

    @Test func consecutiveFailuresResetAndDecodingResumesAtTheNextKeyframe() throws {
        let clean = decoderInputs(try encode("h264", size: "64x64", frames: 8, parameters: "keyint=4:bframes=0"))
        var garbage = clean[1]
        garbage.undecodable = true
        garbage.isRandomAccess = false
        let inputs = Array(clean[0..<4]) + Array(repeating: garbage, count: StreamDecoder.failuresBeforeReset + 3) + Array(clean[4...])
        var events: [StreamDecoderEvent] = []
        let decoder = StreamDecoder(configuration: DecoderConfiguration(hardware: .none))
        let frames = decodeAll(inputs, decoder: decoder) { events.append($0) }
        let reference = decodeAll(clean, decoder: StreamDecoder(configuration: DecoderConfiguration(hardware: .none)))
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
                                    probe: FakeProbe(supported: [.vaapi], opens: [.vaapi]))
        let frames = decodeAll(inputs, decoder: decoder) { events.append($0) }
        let reference = decodeAll(inputs, decoder: StreamDecoder(configuration: DecoderConfiguration(hardware: .none)))
        #expect(frames == reference)
        #expect(decoder.statistics.hardwareFallbacks == 1)
        #expect(events.contains { if case .fellBackToSoftware = $0 { return true } else { return false } })
        #expect(decoder.path == "software")
    }

    @Test func accessUnitsBeforeTheFirstKeyframeAreSkipped() throws {
        let inputs = decoderInputs(try encode("h264", size: "64x64", frames: 6, parameters: "keyint=3:bframes=0"))
        let decoder = StreamDecoder(configuration: DecoderConfiguration(hardware: .none))
        #expect(decodeAll(Array(inputs[1...]), decoder: decoder).count == 3)
        #expect(decoder.statistics.skippedAccessUnits == 2)
    }
}
