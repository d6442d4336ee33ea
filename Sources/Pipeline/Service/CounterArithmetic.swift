extension UInt64 {
    /// `self - earlier`, or 0 when `earlier` is larger: for counters that may come from another instance (a
    /// reloaded stream starts again from zero), a restart or a wrap, where a bare `-` would trap.
    func subtractingSaturating(_ earlier: UInt64) -> UInt64 {
        let (difference, overflow) = subtractingReportingOverflow(earlier)
        return overflow ? 0 : difference
    }
}
