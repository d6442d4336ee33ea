import Foundation
import FrameFormats
import Glibc
@testable import Pipeline
import Prometheus
import SharedFrames
import StreamrecvTestSupport
import Synchronization
import Testing

/// A clock that moves only when the test says: the decode session's time (`DecodeClock`).
final class ManualClock: Sendable {
    private let nanoseconds = Atomic<UInt64>(MonotonicClock.nanoseconds())

    var now: UInt64 { nanoseconds.load(ordering: .acquiring) }
    var decodeClock: DecodeClock { DecodeClock { [self] in now } }

    func advance(seconds: Double) { nanoseconds.add(UInt64(seconds * 1e9), ordering: .releasing) }
}

/// A stream's decode thread on its own, as the pipeline starts it (a real ring, a real decoder), fed work items by
/// the test instead of a listener, on a `ManualClock`.
final class DecodeThreadFixture {
    let clock = ManualClock()
    let lines = CapturedLines()
    let registry = PrometheusCollectorRegistry()
    let configuration: StreamConfiguration
    let worker: StreamWorker
    let reader: FrameRingReader

    init(_ adjust: (inout StreamConfiguration) -> Void = { _ in }) throws {
        var configuration = StreamConfiguration(
            name: "session", source: .tcp(ListenAddress(transport: .tcp, host: "127.0.0.1", port: 5000)))
        configuration.shmName = "streamrecv-test-session-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        configuration.maxWidth = 320
        configuration.maxHeight = 240
        configuration.slots = 8
        adjust(&configuration)
        self.configuration = configuration
        let metrics = StreamMetrics(stream: configuration.name, factory: MetricsServer.factory(registry: registry))
        let logger = lines.logger(label: "session")
        let writer = try FrameRingWriter(configuration: configuration.ring())
        reader = try FrameRingReader(shmName: configuration.shmName)
        worker = StreamWorker(
            configuration: configuration, ringEvents: RingEventReporter(shmName: configuration.shmName, logger: logger, metrics: metrics),
            activity: SenderActivity(), logger: logger, metrics: metrics, clock: clock.decodeClock)
        worker.start(ring: writer)
        worker.enqueue(.listening)
    }

    deinit {
        worker.stopAndWait(removingRing: true)
    }

    /// A sender's whole connection: connected, its bytes in pieces of `chunk`, gone.
    func sendConnection(_ id: ConnectionID, _ stream: [UInt8], chunk: Int = 1400) {
        worker.enqueue(.connected(id, remote: "127.0.0.1:40000"))
        var offset = 0
        while offset < stream.count {
            let end = min(offset + chunk, stream.count)
            worker.enqueue(.bytes(Array(stream[offset..<end]), receivedAt: clock.now, connection: id))
            offset = end
        }
        worker.enqueue(.disconnected(id, reason: .closedBySender))
    }

    /// The ring header now, followed to the object the stream moved to (the ring is made anew for the frames' size).
    var status: RingStatus {
        _ = reader.reattachIfReplaced()
        return reader.status
    }

    /// Returns once the decode thread has taken every work item queued before this call and gone round its loop
    /// once more (where it checks the ring and the decoder's linger), whatever the clock says.
    func settle() throws {
        for round in 0..<2 {
            let mark = "mark \(round) \(UInt32.random(in: 0...UInt32.max))"
            worker.enqueue(.sourceStatus(mark))
            try waitFor("the decode thread to take \(mark)") { status.sourceStatus == mark }
        }
    }

    func waitFor(_ what: String, seconds: Double = 20, _ condition: () -> Bool) throws {
        let deadline = MonotonicClock.nanoseconds() + UInt64(seconds * 1e9)
        while !condition() {
            if MonotonicClock.nanoseconds() > deadline { throw FixtureError.timedOut(what) }
            usleep(2000)
        }
    }

    /// Frames `sequences` as tightly packed planes (what `ffmpeg -f rawvideo` writes).
    func packedFrames(_ sequences: ClosedRange<UInt64>) -> [[UInt8]] {
        _ = reader.reattachIfReplaced()
        var pixels: [UInt8] = []
        return sequences.compactMap { sequence in
            guard case .frame(let info) = reader.read(sequence: sequence, into: &pixels) else { return nil }
            return PlanarConversion.packed(pixels, layout: info.layout)
        }
    }

    func messages(containing text: String) -> [String] { lines.all.map(\.message).filter { $0.contains(text) } }

    enum FixtureError: Error { case timedOut(String) }
}

@Suite(.serialized) struct DecodeSessionTests {
    static let frameCount = 8

    /// x264's default settings (B-frames, so frames leave the decoder reordered), 320x240, written as Annex B.
    static func generatedStream(frames: Int = frameCount) throws -> (stream: [UInt8], path: String) {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: "h264", size: "320x240", frames: frames, in: directory, name: "session.h264")
        return (Array(try Data(contentsOf: url)), url.path)
    }

    /// FFmpeg's decode of `path`, frame by frame, as planar 4:2:0.
    static func ffmpegFrames(_ path: String, width: Int = 320, height: Int = 240) throws -> [[UInt8]] {
        let raw = Array(try runChecked("ffmpeg", ["-v", "error", "-f", "h264", "-i", path, "-f", "rawvideo", "-pix_fmt", "yuv420p", "-"]).standardOutput)
        let size = width * height * 3 / 2
        return stride(from: 0, to: raw.count, by: size).map { Array(raw[$0..<min($0 + size, raw.count)]) }
    }

    /// Bytes in, frames in the ring, with no socket and no daemon: every frame as FFmpeg decodes it, and the
    /// ring's counters saying so.
    @Test func aSendersBytesBecomeFFmpegsFramesInTheRing() throws {
        let (stream, path) = try Self.generatedStream()
        let reference = try Self.ffmpegFrames(path)
        #expect(reference.count == Self.frameCount)
        let thread = try DecodeThreadFixture { $0.decoder.output = .native }
        thread.sendConnection(1, stream, chunk: 997)
        try thread.waitFor("8 frames published") { thread.status.counters.framesPublished == UInt64(Self.frameCount) }
        let frames = thread.packedFrames(1...UInt64(Self.frameCount))
        #expect(frames.count == Self.frameCount)
        #expect(frames == reference, "bit-identical to ffmpeg -f rawvideo, in output order")
        try thread.settle()
        let status = thread.status
        #expect(status.state == .waiting, "the sender left")
        #expect(status.counters.accessUnits == UInt64(Self.frameCount) && status.counters.decodeErrors == 0)
        #expect(status.counters.bytesReceived == UInt64(stream.count))
    }

    /// New parameter sets in the middle of a connection (320x240, then 160x120): the decoder is recreated once, the
    /// ring follows the new size, and every frame of both parts is FFmpeg's decode of that part.
    @Test func aSizeChangeInOneConnectionRecreatesTheDecoderAndKeepsEveryFrame() throws {
        let (first, firstPath) = try Self.generatedStream(frames: 4)
        let directory = try TestEnvironment.temporaryDirectory()
        let second = try GeneratedStreams.encode(codec: "h264", size: "160x120", frames: 4, in: directory, name: "small.h264")
        let reference = try Self.ffmpegFrames(firstPath) + Self.ffmpegFrames(second.path, width: 160, height: 120)
        #expect(reference.count == 8)
        let thread = try DecodeThreadFixture { $0.decoder.output = .native }
        thread.sendConnection(1, first + Array(try Data(contentsOf: second)), chunk: 1400)
        try thread.waitFor("8 frames published") { thread.status.counters.framesPublished == 8 }
        #expect(thread.packedFrames(1...8) == reference)
        #expect(thread.messages(containing: "moved to a new object").isEmpty, "a smaller picture fits the ring it has")
        let counters = thread.status.counters
        #expect(counters.decoderRecreations == 1 && counters.decodeErrors == 0 && counters.framesDropped == 0)
    }

    /// `decoder_linger` runs on the session's clock: the decoder is still open 29 s after the sender left, closed
    /// once 30 s have passed, and the next sender gets a new one.
    @Test func theDecoderIsClosedWhenDecoderLingerHasPassedOnTheSessionsClock() throws {
        let (stream, _) = try Self.generatedStream()
        let thread = try DecodeThreadFixture { $0.decoderLinger = 30 }
        thread.sendConnection(1, stream)
        try thread.waitFor("the first sender's frames") { thread.status.counters.framesPublished == UInt64(Self.frameCount) }
        try thread.settle()
        thread.clock.advance(seconds: 29)
        try thread.settle()
        #expect(thread.messages(containing: "decoder closed after").isEmpty, "29 s after the sender left")
        thread.clock.advance(seconds: 1.5)
        try thread.settle()
        #expect(thread.messages(containing: "decoder closed after 30.0 s without a sender").count == 1)
        thread.sendConnection(2, stream)
        try thread.waitFor("the second sender's frames") {
            thread.status.counters.framesPublished == UInt64(2 * Self.frameCount)
        }
        #expect(thread.status.counters.decodeErrors == 0)
    }

    /// The ring's name is checked once a second of the session's clock, frames flowing or not: a name someone
    /// removed stays removed until that second has passed, then the ring is there again.
    @Test func aRemovedRingNameIsPutBackAtTheNextCheckOfTheSessionsClock() throws {
        let thread = try DecodeThreadFixture()
        try thread.settle()
        let path = "/dev/shm/\(thread.configuration.shmName)"
        #expect(unlink(path) == 0)
        try thread.settle()
        #expect(access(path, F_OK) != 0, "no second has passed on the session's clock")
        thread.clock.advance(seconds: 1)
        try thread.settle()
        // The check runs at the top of the loop, before the thread takes settle's second mark: it is done by now.
        #expect(access(path, F_OK) == 0, "checked once a second had passed on the session's clock")
    }
}
