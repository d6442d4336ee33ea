import CoreMetrics
import Glibc
import Logging
import NIOConcurrencyHelpers
import NIOCore
import ServiceLifecycle
import UnixSignals

/// Owns the running streams and applies a reloaded configuration on SIGHUP: streams that were added start,
/// removed ones stop (draining their decoder), changed ones restart with the new settings, and streams whose
/// configuration is identical are not touched at all. A configuration that fails to load or validate changes
/// nothing: the error is logged and the daemon keeps running as it was.
final class StreamSupervisor: Service {
    private let group: EventLoopGroup
    private let logger: Logger
    private let configurationPath: String?
    private let metricsFactory: any MetricsFactory
    /// The `[webrtc]` server of `listen = "whip"` streams, when configured at start.
    private let webrtc: WebRTCServer?
    /// Listeners from socket activation by stream name. The supervisor keeps the originals and gives each
    /// pipeline instance a duplicate, so that a stream restarted by a reload can listen on it again.
    private let inherited: [String: Int32]
    private let state: NIOLockedValueBox<State>
    /// Streams of the configuration that could not start (a reload added or changed them), with why: shown in
    /// STATUS lines, and started again by the next reload even if their settings did not change.
    private let failures = NIOLockedValueBox<[String: String]>([:])
    /// The pipelines of the initial configuration, once `run` has made them (or has ended without: then empty).
    private let initialPipelines = NIOLockedValueBox<[StreamPipeline]>([])
    private let initialStarted = OneShotSignal()

    /// The configuration in force and the streams running under it.
    private struct State {
        var configuration: DaemonConfiguration
        var running: [Running]
    }

    private struct Running {
        var pipeline: StreamPipeline
        var metrics: StreamMetrics
        /// Fires when `pipeline.run()` has returned.
        var finished: OneShotSignal
    }

    init(
        configuration: DaemonConfiguration, configurationPath: String?, group: EventLoopGroup,
        metricsFactory: any MetricsFactory, inherited: [String: Int32], logger: Logger, webrtc: WebRTCServer? = nil
    ) {
        self.group = group
        self.webrtc = webrtc
        self.logger = logger
        self.configurationPath = configurationPath
        self.metricsFactory = metricsFactory
        self.inherited = inherited
        state = NIOLockedValueBox(State(configuration: configuration, running: []))
    }

    /// The streams running now, in configuration order.
    var pipelines: [StreamPipeline] { state.withLockedValue { $0.running.map(\.pipeline) } }

    /// Configured streams that are not running, and why.
    var failedStreams: [(name: String, reason: String)] {
        failures.withLockedValue { $0.sorted { $0.key < $1.key }.map { ($0.key, $0.value) } }
    }

    /// Returns true once every stream of the initial configuration listens; false if one could not start.
    func initialStreamsSettled(count: Int) async -> Bool {
        await initialStarted.wait()
        let initial = initialPipelines.withLockedValue { $0 }
        guard initial.count >= count else { return false }
        for pipeline in initial { await pipeline.settled.wait() }
        return initial.allSatisfy(\.isListening)
    }

    private enum Event {
        case reload
        /// A stream of the initial configuration could not start: the daemon stops.
        case failed(any Error)
    }

    func run() async throws {
        let (events, eventSink) = AsyncStream.makeStream(of: Event.self)
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        let forwarder = Task {
            for await _ in hangups { eventSink.yield(.reload) }
        }
        defer {
            forwarder.cancel()
            for descriptor in inherited.values { close(descriptor) }
            initialStarted.fire()  // ended before starting them: whoever waits learns that none started
        }
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            let initial = state.withLockedValue { $0.configuration.streams }
            let started = initial.map { start($0, in: &tasks, events: eventSink, fatal: true) }
            initialPipelines.withLockedValue { $0 = started }
            initialStarted.fire()
            for await event in events.cancelOnGracefulShutdown() {
                switch event {
                case .reload:
                    await reload(tasks: &tasks, events: eventSink)
                case .failed(let error):
                    for pipeline in pipelines { pipeline.stop() }
                    throw error
                }
            }
            try await tasks.waitForAll()
        }
    }

    /// Starts one stream as a child task. A stream of the initial configuration that cannot start ends the daemon
    /// (`fatal`); one added by a reload only logs why.
    @discardableResult
    private func start(
        _ stream: StreamConfiguration, in tasks: inout ThrowingTaskGroup<Void, any Error>,
        events: AsyncStream<Event>.Continuation, fatal: Bool
    ) -> StreamPipeline {
        let descriptor = inherited[stream.name].map { dup($0) }
        let metrics = StreamMetrics(stream: stream.name, factory: metricsFactory)
        let pipeline = StreamPipeline(
            configuration: stream, group: group, logger: logger, inheritedDescriptor: descriptor, metrics: metrics, webrtc: webrtc)
        let finished = OneShotSignal()
        state.withLockedValue { $0.running.append(Running(pipeline: pipeline, metrics: metrics, finished: finished)) }
        let logger = self.logger
        let startFailures = Counter(label: "streamrecvd_stream_start_failures_total", dimensions: [("stream", stream.name)],
                                    factory: metricsFactory)
        failures.withLockedValue { $0[stream.name] = nil }
        tasks.addTask { [state, failures] in
            defer {
                state.withLockedValue { $0.running.removeAll { $0.pipeline === pipeline } }
                finished.fire()
            }
            do {
                try await pipeline.run()
            } catch {
                logger.error("stream \(stream.name) could not start: \(error)")
                startFailures.increment()
                failures.withLockedValue { $0[stream.name] = "\(error)" }
                if fatal { events.yield(.failed(error)) }
            }
        }
        return pipeline
    }

    /// SIGHUP: RELOADING=1, apply the differences, READY=1 once the new and changed streams listen.
    private func reload(tasks: inout ThrowingTaskGroup<Void, any Error>, events: AsyncStream<Event>.Continuation) async {
        var monotonic = timespec()
        clock_gettime(CLOCK_MONOTONIC, &monotonic)
        ServiceManager.notify("RELOADING=1\nMONOTONIC_USEC=\(UInt64(monotonic.tv_sec) * 1_000_000 + UInt64(monotonic.tv_nsec) / 1000)")
        defer { ServiceManager.notify("READY=1") }
        guard let configurationPath else {
            logger.warning("SIGHUP: no configuration file to reload")
            return
        }
        let next: DaemonConfiguration
        do {
            next = try ConfigurationLoader.load(path: configurationPath)
        } catch {
            logger.error("reload failed, configuration unchanged: \(error)")
            return
        }
        for warning in next.warnings { logger.warning("reload: \(warning)") }
        let (previous, running) = state.withLockedValue { ($0.configuration, $0.running) }
        let failed = Set(failures.withLockedValue { Array($0.keys) })
        let plan = ReloadPlan(from: previous.streams, to: next.streams, failed: failed)
        if next.metrics != previous.metrics {
            logger.warning("reload: a changed [daemon] metrics address takes effect at the next restart")
        }
        if next.webrtc != previous.webrtc {
            logger.warning("reload: a changed [webrtc] table takes effect at the next restart")
        } else {
            webrtc?.reloadCertificate()  // the same files, perhaps renewed
        }
        if next.logLevel != previous.logLevel {
            JournalLogHandler.setDaemonLevel(Logger.Level(rawValue: next.logLevel.rawValue) ?? .info)
        }
        // Stop first (removed and changed streams), so a changed stream's new instance can take its ring and port.
        let stopping = running.filter { plan.stop.contains($0.pipeline.configuration.name) }
        for entry in stopping { entry.pipeline.stop(removingRing: plan.removed.contains(entry.pipeline.configuration.name)) }
        for entry in stopping {
            await entry.finished.wait()
            entry.metrics.destroy()
        }
        state.withLockedValue { $0.configuration = next }
        failures.withLockedValue { failures in failures = failures.filter { name, _ in next.streams.contains { $0.name == name } } }
        var started: [StreamPipeline] = []
        for stream in next.streams where plan.start.contains(stream.name) {
            started.append(start(stream, in: &tasks, events: events, fatal: false))
        }
        for pipeline in started { await pipeline.settled.wait() }
        let notStarted = started.filter { !$0.isListening }.map(\.configuration.name)
        if notStarted.isEmpty {
            logger.notice("reloaded \(configurationPath): \(plan.summary)")
        } else {
            // The daemon runs on (and says READY), but the log and STATUS= say which streams are down and why.
            logger.error("reloaded \(configurationPath) with errors: \(plan.summary); not running: \(notStarted.joined(separator: ", ")) (see above; the next reload retries)")
        }
    }
}

/// What a reload does, by stream name.
struct ReloadPlan: Equatable {
    var added: [String] = []
    var removed: [String] = []
    var changed: [String] = []
    var unchanged: [String] = []

    /// - Parameter failed: streams that are configured but not running: started again even if unchanged.
    init(from old: [StreamConfiguration], to new: [StreamConfiguration], failed: Set<String> = []) {
        for stream in new {
            if let before = old.first(where: { $0.name == stream.name }) {
                if before == stream && !failed.contains(stream.name) { unchanged.append(stream.name) } else { changed.append(stream.name) }
            } else {
                added.append(stream.name)
            }
        }
        removed = old.map(\.name).filter { name in !new.contains { $0.name == name } }
    }

    var stop: Set<String> { Set(removed + changed) }
    var start: Set<String> { Set(added + changed) }

    var summary: String {
        func list(_ names: [String]) -> String { names.isEmpty ? "none" : names.joined(separator: ", ") }
        return "added \(list(added)); removed \(list(removed)); changed \(list(changed)); unchanged \(list(unchanged))"
    }
}
