import Dispatch

/// A stream's frames as an async sequence, for Swift consumers:
///
///     for try await frame in try FrameStream(stream: "desk") {
///         if frame.lappedBefore > 0 { print("fell behind: \(frame.lappedBefore) frames skipped") }
///         process(frame.pixels, frame.info.layout)
///     }
///
/// Starts with the next frame published. Each element is a copy (the ring's slot may be reused as soon as the
/// writer comes round again); for zero-copy access use `FrameRingReader.withFrame(sequence:_:)`. The sequence ends
/// when the daemon stops the stream, or throws `FrameStream.Timeout` after `timeout` without a frame. Waiting
/// happens on a dedicated dispatch queue (a futex wait), never on Swift's cooperative threads; cancelling the
/// task ends the wait within 100 ms.
public struct FrameStream: AsyncSequence, Sendable {
    public struct Frame: Sendable {
        public var info: FrameInfo
        /// The planes at `info.layout`'s offsets (strides padded to 64 bytes).
        public var pixels: [UInt8]
        /// Frames the writer overwrote before this reader got to them, just before this one.
        public var lappedBefore: UInt64
    }

    /// A slot held no valid frame (a damaged or forged ring).
    public struct InvalidFrame: Error, CustomStringConvertible {
        public var sequence: UInt64
        public var description: String { "frame \(sequence) is not a valid frame (a damaged or forged ring)" }
    }

    public struct Timeout: Error, CustomStringConvertible {
        public var description: String { "no frame within the timeout" }
    }

    public let reader: FrameRingReader
    private let timeoutNanoseconds: Int64?

    /// Attaches to `streamrecv-NAME` (or `shmName`).
    public init(stream name: String? = nil, shmName: String? = nil, timeout: Duration? = nil) throws(AttachError) {
        reader = try FrameRingReader(shmName: shmName ?? "streamrecv-" + (name ?? ""))
        timeoutNanoseconds = timeout.map { Int64($0.components.seconds) * 1_000_000_000 + $0.components.attoseconds / 1_000_000_000 }
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(reader: reader, timeoutNanoseconds: timeoutNanoseconds, previous: reader.latestSequence)
    }

    public struct Iterator: AsyncIteratorProtocol {
        let reader: FrameRingReader
        let timeoutNanoseconds: Int64?
        var previous: UInt64
        private let queue = DispatchQueue(label: "streamrecv.frame-stream")

        init(reader: FrameRingReader, timeoutNanoseconds: Int64?, previous: UInt64) {
            self.reader = reader
            self.timeoutNanoseconds = timeoutNanoseconds
            self.previous = previous
        }

        public mutating func next() async throws -> Frame? {
            var waited: Int64 = 0
            while true {
                try Task.checkCancellation()
                let (reader, previous) = (self.reader, self.previous)
                let slice: Int64 = 100_000_000
                let result: (NextOutcome, [UInt8], UInt64) = await withCheckedContinuation { continuation in
                    queue.async {
                        var pixels: [UInt8] = []
                        // Counted per call: iterators of one stream share its reader.
                        var skipped: UInt64 = 0
                        let outcome = reader.next(after: previous, into: &pixels, timeoutNanoseconds: slice, stopWhenStopped: true,
                                                  skipped: &skipped)
                        continuation.resume(returning: (outcome, pixels, skipped))
                    }
                }
                switch result.0 {
                case .frame(let info):
                    self.previous = info.sequence
                    return Frame(info: info, pixels: result.1, lappedBefore: result.2)
                case .stopped:
                    return nil
                case .invalidFrame(let sequence):
                    throw InvalidFrame(sequence: sequence)
                case .timedOut:
                    waited += slice
                    if let timeoutNanoseconds, waited >= timeoutNanoseconds { throw Timeout() }
                }
            }
        }
    }
}

public typealias NextOutcome = FrameRingReader.NextOutcome
