@testable import Pipeline
import Prometheus
import Testing

/// The WebRTC server's series, as the metrics endpoint shows them: one per reason a session ended or a request
/// was refused, each counting only its own.
@Suite struct WebRTCMetricsTests {
    static func fixture() -> (WebRTCMetrics, PrometheusCollectorRegistry) {
        let registry = PrometheusCollectorRegistry()
        return (WebRTCMetrics(factory: MetricsServer.factory(registry: registry)), registry)
    }

    /// Dashboards and alerts name these series: they exist, at zero, before anything has happened.
    @Test func everySeriesIsThereFromTheStart() {
        let (_, registry) = Self.fixture()
        let samples = registry.samples()
        let plain = ["sessions", "sessions_started_total", "stun_rejected_total", "srtp_rejected_total", "nacks_sent_total",
                     "transport_feedback_sent_total", "retransmissions_recovered_total", "ssrc_changes_total", "received_bytes_total",
                     "connections_given_up_total", "datagrams_not_sent_total", "audio_packets_dropped_total"]
        for name in plain { #expect(samples["streamrecvd_webrtc_" + name] == 0, "\(name)") }
        for reason in WebRTCMetrics.SessionEnd.allCases {
            #expect(samples[#"streamrecvd_webrtc_sessions_ended_total{reason="\#(reason.rawValue)"}"#] == 0, "\(reason)")
        }
        for reason in WebRTCMetrics.Refusal.allCases {
            #expect(samples[#"streamrecvd_webrtc_requests_refused_total{reason="\#(reason.rawValue)"}"#] == 0, "\(reason)")
        }
        #expect(samples.count == plain.count + WebRTCMetrics.SessionEnd.allCases.count + WebRTCMetrics.Refusal.allCases.count,
                "no other series: \(samples.keys.sorted())")
    }

    /// Each reason counts in its own series and nowhere else (two reasons with one label would share a series).
    @Test func eachEndAndRefusalCountsOnlyUnderItsOwnReason() {
        let (metrics, registry) = Self.fixture()
        for (index, reason) in WebRTCMetrics.SessionEnd.allCases.enumerated() {
            for _ in 0...index { metrics.ended(reason) }
        }
        for (index, reason) in WebRTCMetrics.Refusal.allCases.enumerated() {
            for _ in 0..<(index + 10) { metrics.refused(reason) }
        }
        let samples = registry.samples()
        for (index, reason) in WebRTCMetrics.SessionEnd.allCases.enumerated() {
            #expect(samples[#"streamrecvd_webrtc_sessions_ended_total{reason="\#(reason.rawValue)"}"#] == Double(index + 1), "\(reason)")
        }
        for (index, reason) in WebRTCMetrics.Refusal.allCases.enumerated() {
            #expect(samples[#"streamrecvd_webrtc_requests_refused_total{reason="\#(reason.rawValue)"}"#] == Double(index + 10), "\(reason)")
        }
        #expect(samples["streamrecvd_webrtc_sessions_started_total"] == 0, "ends are not starts")
    }

    /// The HTTP front door counts its refusals through the counter it is handed: the same series as `refused`.
    @Test func theRefusalCounterHandedOutIsTheReasonsOwnSeries() {
        let (metrics, registry) = Self.fixture()
        metrics.refusedCounter(.connections).increment(by: 3)
        metrics.refused(.connections)
        metrics.refusedCounter(.tls).increment()
        let samples = registry.samples()
        #expect(samples[#"streamrecvd_webrtc_requests_refused_total{reason="connections"}"#] == 4)
        #expect(samples[#"streamrecvd_webrtc_requests_refused_total{reason="tls_handshake"}"#] == 1)
    }

    /// The session table records how many sessions it holds: the gauge shows the latest, not a sum.
    @Test func openSessionsShowTheLatestCount() {
        let (metrics, registry) = Self.fixture()
        metrics.sessionsOpen.record(2)
        metrics.sessionsOpen.record(1)
        metrics.sessionsStarted.increment()
        metrics.bytesReceived.increment(by: 1500)
        let samples = registry.samples()
        #expect(samples["streamrecvd_webrtc_sessions"] == 1 && samples["streamrecvd_webrtc_sessions_started_total"] == 1)
        #expect(samples["streamrecvd_webrtc_received_bytes_total"] == 1500)
    }

    /// The labels are part of the interface (documented metrics): snake case, each used once.
    @Test func reasonLabelsAreDistinctSnakeCase() {
        let labels = WebRTCMetrics.SessionEnd.allCases.map(\.rawValue) + WebRTCMetrics.Refusal.allCases.map(\.rawValue)
        #expect(Set(WebRTCMetrics.SessionEnd.allCases.map(\.rawValue)).count == WebRTCMetrics.SessionEnd.allCases.count)
        #expect(Set(WebRTCMetrics.Refusal.allCases.map(\.rawValue)).count == WebRTCMetrics.Refusal.allCases.count)
        #expect(labels.allSatisfy { $0.allSatisfy { $0 == "_" || ("a"..."z").contains($0) } }, "\(labels)")
        #expect(WebRTCMetrics.Refusal.throttled.rawValue == "too_many_failures" && WebRTCMetrics.SessionEnd.iceTimeout.rawValue == "ice_timeout")
    }
}
