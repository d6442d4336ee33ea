/// When the daemon's DTLS certificate is made anew. It is valid for 30 days from the day before it was made
/// (DTLSIdentity), so a daemon up for longer would answer with an expired one, which a strict peer refuses: it is
/// renewed after 20 days, for offers from then on; sessions keep the identity they were answered with. A failed
/// renewal is tried again an hour later. Pure: the time passed in, from the first tick on.
struct DTLSIdentityRenewal: Sendable {
    static let interval: UInt64 = 20 * 86_400 * 1_000_000_000
    static let retry: UInt64 = 3_600 * 1_000_000_000

    private var due: UInt64?

    /// Whether to renew now; the first call starts the count.
    mutating func isDue(now: UInt64) -> Bool {
        guard let due else {
            self.due = now &+ Self.interval
            return false
        }
        return now >= due
    }

    mutating func renewed(now: UInt64) { due = now &+ Self.interval }
    mutating func failed(now: UInt64) { due = now &+ Self.retry }
}
