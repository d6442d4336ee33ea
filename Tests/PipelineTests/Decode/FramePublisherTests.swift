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
        var outcomes: [FramePublisher.Outcome] = []
        var index = 0
        try decodedFrames(count: 3) { frame in
            if index == 2 { publisher.markDiscontinuity() }
            let pending = PendingFrame(timeFirstByte: 10, timeComplete: 20, keyframe: index == 0, afterLoss: false, mediaTimestamp: 9000)
            let flags: FrameFlags = index == 0 ? [.keyframe] : []
            publisher.publish(frame, metadata: FramePublisher.metadata(of: frame, pending: pending, flags: flags, decodedAt: 30)) {
                outcomes.append($0)
            }
            index += 1
        }
        #expect(outcomes.count == 3 && outcomes.allSatisfy {
            if case .published(let layout, _, late: false, _) = $0 { layout.format == .nv12 } else { false }
        }, "\(outcomes)")
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
            refusing.publish(frame, metadata: FrameMetadata()) { if case .dropped(let refusal, _, _) = $0 { refusals.append(refusal) } }
        }
        #expect(refusals.count == 1 && refusals.first?.dropReason == .slotCapacity, "\(refusals)")
        #expect(small.reader.status.latestSequence == 0 && refusing.discontinuity)
    }

    /// A ring made late, as a large one is on a loaded machine: after the first frame's half second, the frames
    /// decoded meanwhile are held, in order and bit-exact, and published once it is made; the first carries the
    /// discontinuity flag. No more are held than the ring's slots less one: the oldest go, and the first kept after
    /// them carries the flag. A frame after the held ones is published at once, unflagged.
    @Test func framesWaitingForTheirRingAreHeldThenPublishedInOrder() throws {
        let ring = try RingFixture(slots: 4, makingDelay: 1_000_000_000)
        var outcomes: [String] = []
        var expected: [[UInt8]] = []
        var index = 0
        try decodedFrames(count: 6) { frame in
            let layout = FrameLayout(format: frame.outputFormat(.auto)!, width: frame.width, height: frame.height)
            var pixels = [UInt8](repeating: 0, count: layout.byteCount)
            try? pixels.withUnsafeMutableBytes { try frame.write(into: $0, layout: layout) }
            expected.append(pixels)
            // The ring is there by the last frame.
            if index == 5 { usleep(700_000) }
            var metadata = FrameMetadata()
            metadata.pts = Int64(index)
            ring.publisher.publish(frame, metadata: metadata) { outcome in
                switch outcome {
                case .published(_, let metadata, let late, _): outcomes.append("published \(metadata.pts)\(late ? " late" : "")")
                case .held(_, let count): outcomes.append("held \(count)")
                case .dropped(let refusal, _, _): outcomes.append("dropped \(refusal.dropReason.rawValue)")
                }
            }
            index += 1
        }
        #expect(outcomes == ["held 1", "held 2", "held 3", "dropped awaiting_ring", "held 3", "dropped awaiting_ring", "held 3",
                             "published 2 late", "published 3 late", "published 4 late", "published 5"], "\(outcomes)")
        var pixels: [UInt8] = []
        let read: [(pts: Int64, flags: FrameFlags)] = (1...4).compactMap { sequence in
            guard case .frame(let info) = ring.reader.read(sequence: UInt64(sequence), into: &pixels) else { return nil }
            #expect(Array(pixels.prefix(info.layout.byteCount)) == expected[Int(info.pts)], "frame \(info.pts)")
            return (info.pts, info.flags)
        }
        #expect(read.map(\.pts) == [2, 3, 4, 5])
        #expect(read.map(\.flags) == [[.discontinuity], [], [], []], "\(read.map(\.flags))")
        #expect(!ring.publisher.holdsFrames)
    }

    /// Frames held for a ring that never comes are let go, counted, when the stream ends; nothing is published.
    @Test func framesHeldForARingThatNeverComesAreLetGoAtTheEnd() throws {
        let ring = try RingFixture(makingDelay: 10_000_000_000)
        var held = 0
        try decodedFrames(count: 2) { frame in
            ring.publisher.publish(frame, metadata: FrameMetadata()) { if case .held = $0 { held += 1 } }
        }
        var dropped: [StreamMetrics.DropReason] = []
        ring.publisher.close(removingName: false) { if case .dropped(let refusal, _, _) = $0 { dropped.append(refusal.dropReason) } }
        #expect(held == 2 && dropped == [.awaitingRing, .awaitingRing], "\(held) held, dropped \(dropped)")
        #expect(ring.reader.status.latestSequence == 0)
    }
}
