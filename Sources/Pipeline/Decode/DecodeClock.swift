import SharedFrames

/// Where a stream's decode thread reads the time: CLOCK_MONOTONIC in the daemon, a clock the test moves in
/// `DecodeSessionTests` (decoder linger, the ring check) so that nothing there waits for real seconds.
/// The session's stages take the time as an argument; only the session and its telemetry read it, through this.
struct DecodeClock: Sendable {
    private let read: @Sendable () -> UInt64

    init(_ read: @escaping @Sendable () -> UInt64) {
        self.read = read
    }

    static let monotonic = DecodeClock { MonotonicClock.nanoseconds() }

    /// Nanoseconds on CLOCK_MONOTONIC's scale (frames' timestamps in the ring are compared with it by readers).
    func now() -> UInt64 { read() }
}
