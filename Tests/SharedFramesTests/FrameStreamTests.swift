import Foundation
import FrameFormats
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// `FrameStream` for Swift consumers: one stream iterated by several tasks at once, each on its own dispatch queue,
/// sharing the stream's reader (run under TSan by `make test`).
@Suite struct FrameStreamTests {
    struct Seen: Sendable {
        var sequences: [UInt64] = []
        var lapped: UInt64 = 0
        var wrongPixels = 0
    }

    static func consume(_ stream: FrameStream, until last: UInt64) async throws -> Seen {
        var seen = Seen()
        for try await frame in stream {
            // Frames lapped before the first one are not in the span it starts (the iterator may begin late).
            if !seen.sequences.isEmpty { seen.lapped += frame.lappedBefore }
            seen.sequences.append(frame.info.sequence)
            if !matchesPattern(frame.pixels, sequence: frame.info.sequence) { seen.wrongPixels += 1 }
            if frame.info.sequence >= last { break }
        }
        return seen
    }

    /// Two iterators of one stream while the writer publishes and moves the ring to a new object halfway (the shared
    /// reader follows it): each sees its frames in order, every frame's pixels its own, and its own lapped count
    /// (frames received + frames lapped = the span it covered).
    @Test func twoIteratorsOfOneStreamEachKeepTheirOwnPlace() async throws {
        let name = uniqueShmName("stream-twice")
        defer { shm_unlink("/" + name) }
        let writer = try FrameRingWriter(configuration: FrameRingConfiguration(
            shmName: name, streamName: "stream-twice", slotCount: 4, maxWidth: 640, maxHeight: 360))
        let small = FrameLayout(format: .nv12, width: 160, height: 90)
        let large = FrameLayout(format: .nv12, width: 320, height: 180)
        // The first frame makes the ring's pixel area; the iterators start after it.
        _ = writer.publish(layout: small, metadata: FrameMetadata()) { pattern($0, sequence: 1); _ = $1 }
        let stream = try FrameStream(shmName: name, timeout: .seconds(20))
        let last: UInt64 = 400
        async let first = Self.consume(stream, until: last)
        async let second = Self.consume(stream, until: last)
        let publisher = Task.detached {
            usleep(100_000)  // both iterators waiting
            for sequence in 2...last {
                let layout = sequence < last / 2 ? small : large
                _ = writer.publish(layout: layout, metadata: FrameMetadata()) { pattern($0, sequence: sequence); _ = $1 }
                usleep(sequence % 50 == 0 ? 20_000 : 300)  // bursts the readers may fall behind in, and pauses
            }
        }
        let results = try await [first, second]
        await publisher.value
        for seen in results {
            let span = try #require(seen.sequences.last) - seen.sequences[0] + 1
            #expect(zip(seen.sequences, seen.sequences.dropFirst()).allSatisfy { $0 < $1 }, "in order")
            #expect(seen.wrongPixels == 0)
            #expect(UInt64(seen.sequences.count) + seen.lapped == span,
                    "\(seen.sequences.count) frames + \(seen.lapped) lapped over \(span)")
            #expect(seen.sequences.last == last)
        }
    }
}
