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
final class RingFixture {
    let name = "streamrecv-test-stage-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    /// The ring writer's owner, as in the decode session.
    let publisher: FramePublisher
    let reader: FrameRingReader
    let registry = PrometheusCollectorRegistry()
    let metrics: StreamMetrics
    let snapshot = NIOLockedValueBox(StreamSnapshot())

    /// `makingDelay`: each new ring object is made this many nanoseconds late, as a large one is on a loaded machine.
    init(maxWidth: Int = 64, maxHeight: Int = 48, sizeLimit: Int? = nil, slots: Int = 4, makingDelay: UInt64 = 0) throws {
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "stage", slotCount: slots, maxWidth: maxWidth, maxHeight: maxHeight, sizeLimit: sizeLimit))
        writer.objectMakingDelay = makingDelay
        publisher = FramePublisher(writer: writer, output: .auto)
        reader = try FrameRingReader(shmName: name)
        metrics = StreamMetrics(stream: "stage", factory: MetricsServer.factory(registry: registry))
    }

    deinit {
        publisher.close(removingName: false) { _ in }
        shm_unlink("/" + name)
    }

    func telemetry() -> StreamTelemetry {
        StreamTelemetry(ring: publisher, metrics: metrics, snapshot: snapshot, logger: .init(label: "test"))
    }

    /// The value of one metrics line, e.g. `streamrecvd_access_units_total{stream="stage"}`.
    func sample(_ series: String) -> Double? {
        registry.sample(series)
    }
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
}
