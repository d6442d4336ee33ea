import CoreMetrics
import Glibc
import Logging
import NIOCore
import NIOEmbedded
@testable import Pipeline
import Prometheus
import StreamrecvTestSupport
import Testing

/// accept(2) failures on a listening socket (out of descriptors): counted every time, logged at most once per
/// 10 s, and swallowed so that the listener keeps running.
@Suite struct AcceptErrorReporterTests {
    struct Fixture {
        let lines = CapturedLines()
        let registry = PrometheusCollectorRegistry()
        let counter: CoreMetrics.Counter
        let logger: Logger

        init() {
            let lines = lines
            counter = CoreMetrics.Counter(label: "test_accept_errors_total", factory: MetricsServer.factory(registry: registry))
            logger = Logger(label: "accept") { _ in CaptureHandler(lines: lines) }
        }

        var count: Double? {
            registry.sample("test_accept_errors_total")
        }
    }

    static let outOfDescriptors = IOError(errnoCode: EMFILE, reason: "accept")

    /// The error stops at the reporter: nothing reaches the end of the pipeline, where it would close the listener.
    @Test func anAcceptErrorIsCountedLoggedAndSwallowed() throws {
        let fixture = Fixture()
        let channel = EmbeddedChannel(handler: AcceptErrorReporter(listener: "stream desk tcp://127.0.0.1:5000",
                                                                   counter: fixture.counter, logger: fixture.logger))
        defer { _ = try? channel.finish() }
        channel.pipeline.fireErrorCaught(Self.outOfDescriptors)
        #expect(throws: Never.self) { try channel.throwIfErrorCaught() }
        #expect(fixture.count == 1)
        let line = try #require(fixture.lines.all.first)
        #expect(line.level == .error)
        #expect(line.message.hasPrefix("stream desk tcp://127.0.0.1:5000: cannot accept connections: "), "\(line.message)")
        #expect(line.message.contains("Too many open files") && line.message.hasSuffix("; pausing accepts for 1 s"), "\(line.message)")
    }

    /// A process out of descriptors fails every accept: the journal gets one line per 10 s, the counter all of them.
    @Test func repeatedErrorsAreCountedEveryTimeButLoggedOnce() {
        let fixture = Fixture()
        let channel = EmbeddedChannel(handler: AcceptErrorReporter(listener: "metrics", counter: fixture.counter, logger: fixture.logger))
        defer { _ = try? channel.finish() }
        for _ in 0..<100 { channel.pipeline.fireErrorCaught(Self.outOfDescriptors) }
        #expect(fixture.count == 100)
        #expect(fixture.lines.all.count == 1, "\(fixture.lines.all.map(\.message))")
    }

    /// Accepted connections pass through untouched: the reporter only looks at errors.
    @Test func acceptedChannelsPassThrough() throws {
        let fixture = Fixture()
        let channel = EmbeddedChannel(handler: AcceptErrorReporter(listener: "l", counter: fixture.counter, logger: fixture.logger))
        defer { _ = try? channel.finish() }
        let accepted = EmbeddedChannel()
        try channel.writeInbound(accepted as Channel)
        let passed = try channel.readInbound(as: Channel.self)
        #expect(passed === accepted)
        #expect(fixture.count == 0 && fixture.lines.all.isEmpty)
    }

    /// A listener gets NIO's backoff first (it pauses accepting, so the loop does not spin on a socket that stays
    /// readable), then the reporter: the backoff must forward the error, or it would never be counted.
    @Test func theBackoffComesFirstAndForwardsTheErrorToTheReporter() throws {
        let fixture = Fixture()
        let handlers = AcceptErrorReporter.handlers(listener: "l", counter: fixture.counter, logger: fixture.logger)
        #expect(handlers.count == 2)
        #expect(handlers.first is AcceptBackoffHandler && handlers.last is AcceptErrorReporter)
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish() }
        try channel.pipeline.syncOperations.addHandlers(handlers)
        channel.pipeline.fireErrorCaught(Self.outOfDescriptors)
        #expect(fixture.count == 1 && fixture.lines.all.count == 1)
        #expect(throws: Never.self) { try channel.throwIfErrorCaught() }
    }
}
