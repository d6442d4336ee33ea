import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import SharedFrames

/// Tells systemd how the daemon is doing (Type=notify): READY=1 once every listener is bound and every ring
/// exists, a STATUS= line at most once a second when it changes, WATCHDOG=1 only while every stream's decode
/// thread is healthy, STOPPING=1 when the graceful shutdown begins.
final class SystemdNotifierService: Service {
    private let supervisor: StreamSupervisor
    private let initialStreams: Int
    private let logger: Logger

    init(supervisor: StreamSupervisor, initialStreams: Int, logger: Logger) {
        self.supervisor = supervisor
        self.initialStreams = initialStreams
        self.logger = logger
    }

    private var pipelines: [StreamPipeline] { supervisor.pipelines }

    func run() async throws {
        guard await supervisor.initialStreamsSettled(count: initialStreams), !Task.isShuttingDownGracefully else {
            // A stream could not start: the supervisor ends the daemon with its error; no READY=1.
            try? await gracefulShutdown()
            return
        }
        var status = statusLine(previous: [:]).line
        ServiceManager.notify("READY=1\nSTATUS=\(status)")
        logger.info("ready: \(initialStreams) stream(s) listening")
        let watchdog = ServiceManager.watchdogMicroseconds
        // Feed the watchdog at half its interval; check the streams at least once a second.
        let tick = min(1_000_000, watchdog.map { $0 / 2 } ?? 1_000_000)
        var frames: [ObjectIdentifier: UInt64] = [:]
        var lastStatus = MonotonicClock.nanoseconds()
        var starving: String?
        // Cancelled too when another service failed (a [webrtc] or metrics port taken): Task.sleep then throws at
        // once, and a loop that only watched for graceful shutdown spun at 100 % CPU, deaf to SIGTERM.
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            do { try await Task.sleep(for: .microseconds(Int64(tick))) } catch { break }
            if Task.isShuttingDownGracefully { break }
            let now = MonotonicClock.nanoseconds()
            if now - lastStatus >= 1_000_000_000 {
                let next = statusLine(previous: frames, seconds: Double(now - lastStatus) / 1e9)
                frames = next.frames
                lastStatus = now
                if next.line != status {
                    status = next.line
                    ServiceManager.notify("STATUS=\(status)")
                }
            }
            guard let watchdog else { continue }
            if let wedged = pipelines.first(where: { !$0.isHealthy(stallLimitNanoseconds: watchdog * 1000) }) {
                if starving != wedged.configuration.name {
                    starving = wedged.configuration.name
                    logger.critical("stream \(wedged.configuration.name): decode thread stuck; no longer feeding the watchdog")
                }
            } else {
                starving = nil
                ServiceManager.notify("WATCHDOG=1")
            }
        }
        ServiceManager.notify("STOPPING=1")
    }

    /// "desk: streaming h264 1280x720 30 fps software; cam: waiting", and the frame counts it was computed from,
    /// by pipeline instance: a reload replaces a stream's pipeline, whose count starts again from zero.
    private func statusLine(previous: [ObjectIdentifier: UInt64], seconds: Double = 1) -> (line: String, frames: [ObjectIdentifier: UInt64]) {
        var frames: [ObjectIdentifier: UInt64] = [:]
        let parts = pipelines.map { pipeline -> String in
            let snapshot = pipeline.snapshot
            let name = pipeline.configuration.name
            frames[ObjectIdentifier(pipeline)] = snapshot.framesPublished
            var text = "\(name): \(snapshot.state)"
            if let problem = pipeline.ringProblem { return text + " (\(problem))" }
            if let source = pipeline.sourceState, snapshot.state != .streaming { text += " (\(source))" }
            guard snapshot.state == .streaming else { return text }
            if let codec = snapshot.codec { text += " \(codec)" }
            if let size = snapshot.size { text += " \(size)" }
            // Saturating: an identifier may be reused by a newer instance whose count is still below the old one's.
            let before = previous[ObjectIdentifier(pipeline)] ?? snapshot.framesPublished
            let fps = Double(snapshot.framesPublished.subtractingSaturating(before)) / max(seconds, 0.001)
            text += " \(Int(fps.rounded())) fps \(snapshot.path)"
            return text
        }
        let failed = supervisor.failedStreams.map { "\($0.name): not running (\($0.reason))" }
        return ((parts + failed).joined(separator: "; "), frames)
    }
}
