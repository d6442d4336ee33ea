import Bitstream
import Decoding
import Foundation
import FrameFormats
import Glibc
import NIOConcurrencyHelpers
@testable import Pipeline
import Prometheus
import SharedFrames
import StreamrecvTestSupport
import Testing

/// A ring in /dev/shm, a reader of it, and a metrics registry: what the telemetry and publisher stages write to.
private final class RingFixture {
    let name = "streamrecv-test-stage-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    let writer: FrameRingWriter
    let reader: FrameRingReader
    let registry = PrometheusCollectorRegistry()
    let metrics: StreamMetrics
    let snapshot = NIOLockedValueBox(StreamSnapshot())

    init(maxWidth: Int = 64, maxHeight: Int = 48, sizeLimit: Int? = nil) throws {
        writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "stage", slotCount: 4, maxWidth: maxWidth, maxHeight: maxHeight, sizeLimit: sizeLimit))
        reader = try FrameRingReader(shmName: name)
        metrics = StreamMetrics(stream: "stage", factory: MetricsServer.factory(registry: registry))
    }

    deinit {
        writer.close()
        shm_unlink("/" + name)
    }

    func telemetry() -> StreamTelemetry {
        StreamTelemetry(ring: writer, metrics: metrics, snapshot: snapshot, logger: .init(label: "test"))
    }

    /// The value of one metrics line, e.g. `streamrecvd_access_units_total{stream="stage"}`.
    func sample(_ series: String) -> Double? {
        registry.emitToString().split(separator: "\n").first { $0.hasPrefix(series + " ") }
            .flatMap { Double($0.split(separator: " ").last ?? "") }
    }
}

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
    let decoder = StreamDecoder(configuration: DecoderConfiguration()) { _ in }
    for (pts, unit) in units.enumerated() { decoder.decode(DecoderInput(unit, data: unit.data, pts: Int64(pts)), output: body) }
    decoder.drain(output: body)
}

@Suite(.serialized) struct StreamTelemetryTests {
    /// One call, every place: the ring's header (what `streamrecvctl status` shows), the metrics, the snapshot.
    @Test func oneCallUpdatesRingMetricsAndStatusTogether() throws {
        let ring = try RingFixture()
        let telemetry = ring.telemetry()
        telemetry.count(.accessUnit)
        telemetry.count(.accessUnit)
        telemetry.count(.decodeError)
        telemetry.dropped(.tooLarge)
        telemetry.received(bytes: 1500)
        telemetry.defect(.accessUnit(.sliceHeader), count: 2)
        telemetry.defect(.emptyNALUnit)
        telemetry.setState(.degraded)
        telemetry.codecDetected(.h265)
        let status = ring.reader.status
        #expect(status.counters.accessUnits == 2 && status.counters.decodeErrors == 1)
        #expect(status.counters.framesDropped == 1 && status.counters.bytesReceived == 1500)
        #expect(status.state == .degraded && status.codec == "h265")
        #expect(ring.snapshot.withLockedValue { $0.state == .degraded && $0.codec == "h265" })
        #expect(ring.sample(#"streamrecvd_access_units_total{stream="stage"}"#) == 2)
        #expect(ring.sample(#"streamrecvd_decode_errors_total{stream="stage"}"#) == 1)
        #expect(ring.sample(#"streamrecvd_frames_dropped_total{stream="stage",reason="too_large"}"#) == 1)
        #expect(ring.sample(#"streamrecvd_stream_defects_total{stream="stage",kind="slice_header"}"#) == 2)
        #expect(ring.sample(#"streamrecvd_stream_defects_total{stream="stage",kind="empty_nal_unit"}"#) == 1)
        #expect(Set(StreamDefect.allCases.map(\.label)).count == StreamDefect.allCases.count, "one label per kind")
    }

    /// The publisher owns the ring: metadata and flags go with the pixels, the first frame and the one after a
    /// gap carry the discontinuity flag, and a frame that cannot fit is refused with the reason, never half-written.
    @Test func thePublisherMarksGapsAndRefusesWhatCannotFit() throws {
        let ring = try RingFixture()
        let publisher = FramePublisher(writer: ring.writer, output: .auto)
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
        let refusing = FramePublisher(writer: small.writer, output: .auto)
        var refusals: [FramePublisher.Refusal] = []
        try decodedFrames(count: 1) { frame in
            if case .failure(let refusal) = refusing.publish(frame, metadata: FrameMetadata()) { refusals.append(refusal) }
        }
        #expect(refusals.count == 1 && refusals.first?.dropReason == .slotCapacity, "\(refusals)")
        #expect(small.reader.status.latestSequence == 0 && refusing.discontinuity)
    }
}
