import Bitstream
import Decoding
import Foundation
import FrameFormats
@testable import Pipeline
import SharedFrames
import StreamrecvTestSupport
import Testing

/// Frames of a small stream encoded with x264, decoded by libavcodec: `body` gets each as it comes out.
private func decodedFrames(count: Int, _ body: (DecodedFrame) -> Void) throws {
    let directory = try TestEnvironment.temporaryDirectory()
    let path = try GeneratedStreams.encode(codec: "h264", size: "64x48", frames: count, encoderParameters: "bframes=0",
                                           in: directory, name: "stage.h264")
    var splitter = AnnexBSplitter()
    var assembler = AccessUnitAssembler(codec: .h264)
    var units: [AccessUnit] = []
    let collect: (AssemblerEvent) -> Void = { if case .accessUnit(let unit) = $0 { units.append(unit) } }
    var nalUnits: [NALUnit] = []
    splitter.append([UInt8](try Data(contentsOf: path))) { nalUnits.append($0) }
    splitter.flush { nalUnits.append($0) }
    for unit in nalUnits { assembler.push(unit, collect) }
    assembler.endAccessUnit(collect)
    let decoder = StreamDecoder(configuration: DecoderConfiguration())
    let frames: (StreamDecoderOutput) -> Void = { if case .frame(let frame) = $0 { body(frame) } }
    for (pts, unit) in units.enumerated() { decoder.decode(DecoderInput(unit, data: unit.data, pts: Int64(pts)), frames) }
    decoder.drain(frames)
}

@Suite(.serialized) struct FramePublisherTests {
    /// The publisher owns the ring: metadata and flags go with the pixels, the first frame and the one after a
    /// gap carry the discontinuity flag, and a frame that cannot fit is refused with the reason, never half-written.
    @Test func thePublisherMarksGapsAndRefusesWhatCannotFit() throws {
        let ring = try RingFixture()
        let publisher = ring.publisher
        var outcomes: [Result<FrameLayout, FramePublisher.Refusal>] = []
        var index = 0
        try decodedFrames(count: 3) { frame in
            if index == 2 { publisher.markDiscontinuity() }
            let pending = PendingFrame(timeFirstByte: 10, timeComplete: 20, keyframe: index == 0, afterLoss: false, mediaTimestamp: 9000)
            let flags: FrameFlags = index == 0 ? [.keyframe] : []
            outcomes.append(publisher.publish(frame, metadata: FramePublisher.metadata(of: frame, pending: pending, flags: flags, decodedAt: 30)))
            index += 1
        }
        #expect(outcomes.count == 3 && outcomes.allSatisfy { (try? $0.get())?.format == .nv12 })
        var pixels: [UInt8] = []
        let flags: [FrameFlags] = (1...3).map { sequence in
            guard case .frame(let info) = ring.reader.read(sequence: UInt64(sequence), into: &pixels) else { return [.corrupt] }
            #expect(info.pts == 9000 && info.timeFirstByte == 10 && info.timeAccessUnitComplete == 20 && info.timeDecoded == 30)
            #expect(info.layout.width == 64 && info.layout.height == 48 && pixels.count >= 64 * 48 * 3 / 2)
            return info.flags
        }
        #expect(flags == [[.keyframe, .discontinuity], [], [.discontinuity]], "\(flags)")

        // A limit that two slots of 64x48 NV12 exceed: refused, counted by the caller, nothing published.
        let small = try RingFixture(sizeLimit: 4096)
        let refusing = small.publisher
        var refusals: [FramePublisher.Refusal] = []
        try decodedFrames(count: 1) { frame in
            if case .failure(let refusal) = refusing.publish(frame, metadata: FrameMetadata()) { refusals.append(refusal) }
        }
        #expect(refusals.count == 1 && refusals.first?.dropReason == .slotCapacity, "\(refusals)")
        #expect(small.reader.status.latestSequence == 0 && refusing.discontinuity)
    }
}
