import Glibc

extension AttachError {
    /// No object of that name (yet): the daemon has not made the ring, or has removed it. Anything else (an
    /// object that is not a ring, no permission) will not change by waiting.
    public var isMissing: Bool {
        if case .sharedMemory(let error) = self { return error.errno == ENOENT }
        return false
    }
}

extension FrameRingReader {
    /// How often a consumer looks for a ring that is not there yet.
    public static let ringPollNanoseconds: UInt64 = 50_000_000

    /// Attaches to `shmName` once the ring exists. Consumers often start before the daemon has made it: socket
    /// activation starts the daemon at the first connection, and a restart or a reload with another geometry
    /// makes a new object. Looks every 50 ms; `waiting` is called once, when the first look finds nothing. An
    /// object that exists but is not a ring is an error at once.
    /// - Returns: nil when `timeoutNanoseconds` passed without the ring (nil waits for ever).
    public static func waitingForRing(
        shmName: String, timeoutNanoseconds: Int64?, waiting: () -> Void = {}
    ) throws(AttachError) -> FrameRingReader? {
        let start = MonotonicClock.nanoseconds()
        var told = false
        while true {
            do {
                return try FrameRingReader(shmName: shmName)
            } catch {
                guard error.isMissing else { throw error }
                if let timeout = timeoutNanoseconds, MonotonicClock.nanoseconds() - start >= UInt64(max(0, timeout)) { return nil }
                if !told {
                    told = true
                    waiting()
                }
                usleep(UInt32(ringPollNanoseconds / 1000))
            }
        }
    }
}

extension FrameStream {
    /// Attaches once the ring exists (see `FrameRingReader.waitingForRing`), waiting without blocking a thread of
    /// Swift's cooperative pool.
    /// - Parameters:
    ///   - timeout: as for `init(stream:shmName:timeout:)`: the longest wait for a frame.
    ///   - ringTimeout: the longest wait for the ring; nil waits for ever (until the task is cancelled).
    /// - Throws: `AttachError` when the object is not a ring, `FrameStream.Timeout` when `ringTimeout` passed,
    ///   `CancellationError` when the task was cancelled.
    public static func waitingForRing(
        stream name: String? = nil, shmName: String? = nil, timeout: Duration? = nil, ringTimeout: Duration? = nil
    ) async throws -> FrameStream {
        let deadline = ringTimeout.map { ContinuousClock.now + $0 }
        while true {
            let attached: Result<FrameStream, AttachError> = Result { () throws(AttachError) in
                try FrameStream(stream: name, shmName: shmName, timeout: timeout)
            }
            switch attached {
            case .success(let stream):
                return stream
            case .failure(let error):
                guard error.isMissing else { throw error }
                if let deadline, ContinuousClock.now >= deadline { throw Timeout() }
                try await Task.sleep(for: .nanoseconds(Int64(FrameRingReader.ringPollNanoseconds)))
            }
        }
    }
}
