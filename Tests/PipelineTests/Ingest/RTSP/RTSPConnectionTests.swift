import NIOCore
import NIOEmbedded
@testable import Pipeline
import Testing

/// The RTSP connection's reads: held back while the decode thread is behind, and what the session's watch learns
/// of it (`ReadHold`).
@Suite struct RTSPConnectionTests {
    @Test func silenceCountsFromTheEndOfTheLastHoldAndNotDuringOne() {
        #expect(ReadHold.reading(since: 0).silentSince(5) == 5)
        #expect(ReadHold.reading(since: 9).silentSince(5) == 9, "the server could not be heard before the hold ended")
        #expect(ReadHold.reading(since: 9).silentSince(12) == 12)
        #expect(ReadHold.heldBack.silentSince(5) == nil)
        #expect(!ReadHold.reading(since: 9).isHeldBack && ReadHold.heldBack.isHeldBack)
    }

    /// A handler on an embedded channel, and the stream's worker with its backlog over the high-water mark.
    static func connection() throws -> (EmbeddedChannel, RTSPConnectionHandler, StreamWorker) {
        let handler = RTSPConnectionHandler()
        let channel = EmbeddedChannel(handler: handler)
        let worker = try RTSPMediaStateTests.worker()
        _ = worker.queue.push(.listening, bytes: worker.backlogHighWater)
        return (channel, handler, worker)
    }

    /// The decode thread drains its backlog below half the mark (as its loop does).
    static func drain(_ worker: StreamWorker, on channel: EmbeddedChannel) {
        _ = worker.queue.pop()
        worker.drained(to: worker.queue.waitingBytes)
        channel.embeddedEventLoop.run()
    }

    @Test func readsAreHeldBackUntilTheDecodeThreadDrains() throws {
        let (channel, handler, worker) = try Self.connection()
        handler.pauseReading(until: worker)
        #expect(handler.readHold.withLockedValue { $0 } == .heldBack)
        Self.drain(worker, on: channel)
        guard case .reading(let since) = handler.readHold.withLockedValue({ $0 }) else {
            Issue.record("still held back after the drain")
            return
        }
        #expect(since > 0, "the end of the hold is noted: the server's silence counts from it")
    }

    /// A session's connection ending while the next one pauses on the same backlog: each is resumed by the drain
    /// (the worker kept one callback, so the last to pause took the other's turn and left it held back for ever).
    @Test func everyConnectionPausedOnTheBacklogIsResumed() throws {
        let (channel, handler, worker) = try Self.connection()
        let next = RTSPConnectionHandler()
        let nextChannel = EmbeddedChannel(handler: next)
        handler.pauseReading(until: worker)
        next.pauseReading(until: worker)
        Self.drain(worker, on: channel)
        nextChannel.embeddedEventLoop.run()
        #expect(handler.readHold.withLockedValue { $0 } != .heldBack)
        #expect(next.readHold.withLockedValue { $0 } != .heldBack)
    }

    /// Throttled (too much that is not video), then behind: held back until the backlog drains, not only until the
    /// budget's window ends.
    @Test func aThrottledConnectionIsHeldBackPastTheBudgetsWindow() throws {
        let (channel, handler, worker) = try Self.connection()
        handler.noteRTP(accepted: true, productive: false, bytes: InterleavedIntakeBudget.unproductiveBytesPerWindow + 1)
        #expect(handler.readHold.withLockedValue { $0 } == .reading(since: 0), "throttled, not held back")
        handler.pauseReading(until: worker)
        #expect(handler.readHold.withLockedValue { $0 } == .heldBack)
        channel.embeddedEventLoop.advanceTime(by: .nanoseconds(Int64(InterleavedIntakeBudget.windowNanoseconds) * 2))
        #expect(handler.readHold.withLockedValue { $0 } == .heldBack, "the window's end resumed reads the decode thread holds back")
        Self.drain(worker, on: channel)
        #expect(handler.readHold.withLockedValue { $0 } != .heldBack)
    }
}
