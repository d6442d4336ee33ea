import Glibc

/// CLOCK_MONOTONIC in nanoseconds: the one clock of this module (decoder creation times, log limiting, device drops).
func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}
