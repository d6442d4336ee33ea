import Logging
@testable import Pipeline
import Prometheus
import SharedFrames
import StreamrecvTestSupport
import Testing

/// What happens to a stream's ring, told to the journal (each kind at most once per 10 s), counted in the
/// metrics (every time) and kept for the STATUS line while the stream has no usable ring.
@Suite struct RingEventReporterTests {
    /// A reporter for ring `shm` with its log lines and metrics.
    struct Fixture {
        let lines = CapturedLines()
        let registry = PrometheusCollectorRegistry()
        let reporter: RingEventReporter

        init() {
            let lines = lines
            let metrics = StreamMetrics(stream: "cam", factory: MetricsServer.factory(registry: registry))
            reporter = RingEventReporter(shmName: "streamrecv-cam", logger: Logger(label: "ring") { _ in CaptureHandler(lines: lines) },
                                         metrics: metrics)
        }

        /// The value of one series of the stream, e.g. `ring_problems_total{stream="cam",kind="foreign"}`.
        func sample(_ series: String) -> Double? {
            registry.sample("streamrecvd_" + series)
        }

        func problems(_ kind: RingProblem) -> Double? { sample(#"ring_problems_total{stream="cam",kind="\#(kind.rawValue)"}"#) }
    }

    /// A ring that cannot be made is the stream's problem (STATUS says so) until one is made again.
    @Test func aFailedRingIsTheProblemUntilARingIsMade() {
        let fixture = Fixture()
        #expect(fixture.reporter.problem == nil)
        fixture.reporter.report(.failed("No space left on device"))
        #expect(fixture.reporter.problem == "no ring: No space left on device")
        #expect(fixture.problems(.unavailable) == 1)
        #expect(fixture.lines.all.map(\.level) == [.error])
        #expect(fixture.lines.all.first?.message.hasPrefix("/dev/shm/streamrecv-cam: No space left on device; frames are dropped") == true)

        // Fewer slots than wanted is a warning, not the end of the problem: there is still no ring.
        fixture.reporter.report(.slotsLimited(wanted: 8, slots: 3, limit: 64 << 20))
        #expect(fixture.reporter.problem == "no ring: No space left on device")
        #expect(fixture.problems(.sizeLimit) == 1)

        fixture.reporter.report(.created(bytes: 5 << 20, slots: 8, reason: "none was there"))
        #expect(fixture.reporter.problem == nil)
        #expect(fixture.lines.all.last?.message == "created the frame ring /dev/shm/streamrecv-cam: 5.0 MiB, 8 slots (none was there)")
    }

    /// Every event that leaves the stream with a ring ends the problem: created, taken over, resized, re-created.
    @Test func everyEventThatLeavesARingClearsTheProblem() {
        let events: [FrameRingEvent] = [.created(bytes: 1 << 20, slots: 4, reason: "x"), .tookOver(bytes: 1 << 20, slots: 4),
                                        .resized(fromBytes: 1 << 20, toBytes: 2 << 20, slots: 4), .recreated(.unlinked)]
        for event in events {
            let fixture = Fixture()
            fixture.reporter.report(.failed("gone"))
            fixture.reporter.report(event)
            #expect(fixture.reporter.problem == nil, "\(event)")
        }
        let foreign = Fixture()
        foreign.reporter.report(.failed("gone"))
        foreign.reporter.report(.foreignObject(owner: 0, mode: 0o600, replaced: true))
        #expect(foreign.reporter.problem != nil, "a replaced foreign object is followed by its own created event")
    }

    /// Damage by another process is counted by kind and as a recreation, logged as an error naming the object.
    @Test func damageIsCountedByKindAndAsARecreation() {
        let fixture = Fixture()
        fixture.reporter.report(.recreated(.truncated))
        fixture.reporter.report(.recreated(.replaced))
        #expect(fixture.sample(#"ring_recreations_total{stream="cam"}"#) == 2)
        #expect(fixture.problems(.truncated) == 1 && fixture.problems(.replaced) == 1 && fixture.problems(.unlinked) == 0)
        #expect(fixture.lines.all.map(\.message) == [
            "shared-memory object /dev/shm/streamrecv-cam was truncated by another process; re-created it (readers follow the new one)",
            "shared-memory object /dev/shm/streamrecv-cam was replaced by another process; re-created it (readers follow the new one)",
        ])
        #expect(fixture.lines.all.allSatisfy { $0.level == .error })
    }

    /// Another user's object: its owner and mode (in octal) are named, and whether it could be replaced.
    @Test func aForeignObjectNamesItsOwnerAndMode() {
        let fixture = Fixture()
        fixture.reporter.report(.foreignObject(owner: 1001, mode: 0o644, replaced: false))
        #expect(fixture.problems(.foreign) == 1)
        let line = fixture.lines.all.first
        #expect(line?.level == .warning)
        #expect(line?.message.contains("owner uid 1001, mode 644") == true, "\(String(describing: line))")
        #expect(line?.message.hasSuffix("it cannot be replaced by this user") == true)
    }

    /// Someone truncating the object in a loop cannot flood the journal: a kind repeated within 10 s is not
    /// logged again, while the metrics count every one and the problem follows the latest.
    @Test func aRepeatedKindIsLoggedOnceButCountedEveryTime() {
        let fixture = Fixture()
        for index in 0..<50 { fixture.reporter.report(.failed("attempt \(index)")) }
        fixture.reporter.report(.recreated(.truncated))
        fixture.reporter.report(.recreated(.truncated))
        fixture.reporter.report(.recreated(.unlinked))
        #expect(fixture.problems(.unavailable) == 50 && fixture.problems(.truncated) == 2 && fixture.problems(.unlinked) == 1)
        #expect(fixture.sample(#"ring_recreations_total{stream="cam"}"#) == 3)
        // One line for failed, one for truncated, one for unlinked: damage kinds are separate keys.
        #expect(fixture.lines.all.count == 3, "\(fixture.lines.all.map(\.message))")
        #expect(fixture.lines.all.first?.message.contains("attempt 0") == true)
        fixture.reporter.report(.failed("the latest"))
        #expect(fixture.reporter.problem == "no ring: the latest", "the problem is not rate limited")
    }

    /// Each damage is counted under its own kind in `streamrecvd_ring_problems_total{kind}`.
    @Test func ringDamageMapsToItsProblemKind() {
        #expect(RingProblem(.truncated) == .truncated && RingProblem(.unlinked) == .unlinked)
        #expect(RingProblem(.replaced) == .replaced && RingProblem(.unavailable) == .unavailable)
        #expect(RingProblem.allCases.map(\.rawValue) == ["truncated", "unlinked", "replaced", "foreign", "unavailable", "size_limit"])
    }
}
