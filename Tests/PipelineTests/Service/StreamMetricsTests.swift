import Bitstream
import CoreMetrics
@testable import Pipeline
import Prometheus
import Testing

/// One stream's series: every one carries its `stream` label, each reason counts in its own, and a stream removed
/// by a reload takes all of its series with it and no other stream's.
@Suite struct StreamMetricsTests {
    static func fixture(_ streams: String...) -> ([StreamMetrics], PrometheusCollectorRegistry) {
        let registry = PrometheusCollectorRegistry()
        return (streams.map { StreamMetrics(stream: $0, factory: MetricsServer.factory(registry: registry)) }, registry)
    }

    /// Each reason of each labelled family counts in its own series, and only there.
    @Test func eachReasonCountsInItsOwnSeries() {
        let (streams, registry) = Self.fixture("desk")
        let metrics = streams[0]
        for (index, reason) in StreamMetrics.DropReason.allCases.enumerated() { for _ in 0...index { metrics.dropped(reason) } }
        for (index, reason) in StreamMetrics.RefusalReason.allCases.enumerated() { for _ in 0...index { metrics.refused(reason) } }
        for (index, problem) in RingProblem.allCases.enumerated() { for _ in 0...index { metrics.ringProblem(problem) } }
        metrics.takeover(.stale)
        metrics.rtpDiscarded(.sequenceJump)
        metrics.rtpDiscarded(.sequenceJump)
        metrics.rtpDiscarded(.malformed)
        let samples = registry.samples()
        func value(_ family: String, _ label: String, _ reason: String) -> Double? {
            samples[#"streamrecvd_\#(family){stream="desk",\#(label)="\#(reason)"}"#]
        }
        for (index, reason) in StreamMetrics.DropReason.allCases.enumerated() {
            #expect(value("frames_dropped_total", "reason", reason.rawValue) == Double(index + 1), "\(reason)")
        }
        for (index, reason) in StreamMetrics.RefusalReason.allCases.enumerated() {
            #expect(value("refused_total", "reason", reason.rawValue) == Double(index + 1), "\(reason)")
        }
        for (index, problem) in RingProblem.allCases.enumerated() {
            #expect(value("ring_problems_total", "kind", problem.rawValue) == Double(index + 1), "\(problem)")
        }
        #expect(value("sender_takeovers_total", "reason", "stale") == 1 && value("sender_takeovers_total", "reason", "policy") == 0)
        #expect(value("rtp_packets_discarded_total", "reason", "sequence_jump") == 2)
        #expect(value("rtp_packets_discarded_total", "reason", "probation") == 0 && value("rtp_packets_discarded_total", "reason", "other_source") == 0)
        #expect(value("rtp_packets_discarded_total", "reason", "malformed") == 1)
    }

    /// Defects count by how many were found at once, under their kind's label.
    @Test func defectsCountByTheNumberFound() {
        let (streams, registry) = Self.fixture("desk")
        streams[0].defect(.emptyNALUnit, count: 5)
        streams[0].defect(.emptyNALUnit)
        streams[0].defect(.oversizedNALUnit)
        let samples = registry.samples()
        #expect(samples[#"streamrecvd_stream_defects_total{stream="desk",kind="empty_nal_unit"}"#] == 6)
        #expect(samples[#"streamrecvd_stream_defects_total{stream="desk",kind="oversized_nal_unit"}"#] == 1)
        for defect in StreamDefect.allCases {
            #expect(samples[#"streamrecvd_stream_defects_total{stream="desk",kind="\#(defect.label)"}"#] != nil, "\(defect.label)")
        }
    }

    /// RTSP failures count by `RTSPFailure.kind`; a kind the table does not know is not a new series.
    @Test func rtspFailuresCountByKnownKindOnly() {
        let (streams, registry) = Self.fixture("door")
        streams[0].rtspFailure("unauthorized")
        streams[0].rtspFailure("unauthorized")
        streams[0].rtspFailure("no such kind")
        let samples = registry.samples()
        #expect(samples[#"streamrecvd_rtsp_failures_total{stream="door",reason="unauthorized"}"#] == 2)
        let failures = samples.keys.filter { $0.hasPrefix("streamrecvd_rtsp_failures_total{") }
        #expect(failures.count == RTSPFailure.kinds.count, "\(failures.sorted())")
        #expect(!failures.contains { $0.contains("no such kind") })
    }

    /// Two streams on one endpoint never share a series.
    @Test func streamsAreKeptApartByTheirLabel() {
        let (streams, registry) = Self.fixture("a", "b")
        streams[0].framesPublished.increment(by: 7)
        streams[1].framesPublished.increment()
        streams[1].width.record(1920)
        let samples = registry.samples()
        #expect(samples[#"streamrecvd_frames_published_total{stream="a"}"#] == 7)
        #expect(samples[#"streamrecvd_frames_published_total{stream="b"}"#] == 1)
        #expect(samples[#"streamrecvd_frame_width{stream="b"}"#] == 1920 && samples[#"streamrecvd_frame_width{stream="a"}"#] == 0)
    }

    /// A stream removed by a reload disappears from the endpoint entirely (no stale series for a dashboard to
    /// show), counters, gauges and histograms alike; the other streams' series stay.
    @Test func destroyRemovesEverySeriesOfTheStreamAndNoOther() {
        let (streams, registry) = Self.fixture("gone", "kept")
        for metrics in streams {
            metrics.publishLatency.recordNanoseconds(3_000_000)
            metrics.framesPerSecond.record(30)
        }
        let before = registry.samples().keys
        let gone = before.filter { $0.contains(#"stream="gone""#) }
        let kept = before.filter { $0.contains(#"stream="kept""#) }
        #expect(gone.count == kept.count && gone.count > 50, "\(gone.count) series")
        #expect(gone.contains { $0.hasPrefix(StreamMetrics.latencyLabel + "_count") })

        streams[0].destroy()
        let after = registry.samples().keys
        let left = after.filter { $0.contains(#"stream="gone""#) }
        #expect(left.isEmpty, "left behind: \(left.sorted())")
        #expect(after.filter { $0.contains(#"stream="kept""#) }.count == kept.count)
        #expect(registry.samples()[#"streamrecvd_frames_per_second{stream="kept"}"#] == 30)
    }

    /// Publish latency goes into the video-sized buckets the endpoint's factory sets (0.5 ms to 1 s).
    @Test func publishLatencyFillsTheVideoSizedBuckets() {
        let (streams, registry) = Self.fixture("desk")
        streams[0].publishLatency.recordNanoseconds(3_000_000)
        streams[0].publishLatency.recordNanoseconds(40_000_000)
        let samples = registry.samples()
        let series = StreamMetrics.latencyLabel
        #expect(samples[#"\#(series)_count{stream="desk"}"#] == 2)
        #expect(samples[#"\#(series)_bucket{stream="desk",le="0.002"}"#] == 0)
        #expect(samples[#"\#(series)_bucket{stream="desk",le="0.004"}"#] == 1)
        #expect(samples[#"\#(series)_bucket{stream="desk",le="0.066"}"#] == 2)
    }
}
