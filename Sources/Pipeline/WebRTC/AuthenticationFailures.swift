/// Wrong or missing bearer tokens, by party (an address, a local user on loopback): after `free` failures, each
/// further one blocks the party for twice as long as the last (1 s, 2 s, 4 s … at most `longestBlock`), and a
/// blocked party's requests are answered 429 with Retry-After before any token is compared. Online guessing then
/// costs hours for what took 0.19 s (300 guesses on one connection), and a client elsewhere is not slowed. A party
/// without a failure for `forgetAfter` starts afresh; a right token forgives at once. Pure: the time passed in.
struct AuthenticationFailures: Sendable {
    static let free = 5
    static let firstBlock: UInt64 = 1_000_000_000
    static let longestBlock: UInt64 = 300_000_000_000
    static let forgetAfter: UInt64 = 600_000_000_000
    /// Parties remembered at once (the one whose last failure is oldest is forgotten first).
    static let maximumParties = 4096

    private struct Record: Sendable {
        var failures: Int
        var lastFailure: UInt64
        var blockedUntil: UInt64
    }

    private var records: [ConnectionParty: Record] = [:]

    /// How long `party` must still wait, in nanoseconds; nil when it may try.
    func blocked(_ party: ConnectionParty, now: UInt64) -> UInt64? {
        guard let record = records[party], record.blockedUntil > now else { return nil }
        return record.blockedUntil - now
    }

    /// A failure of `party`; the block it starts, in nanoseconds, if any.
    mutating func failed(_ party: ConnectionParty, now: UInt64) -> UInt64? {
        var record = records[party].flatMap { now &- $0.lastFailure < Self.forgetAfter ? $0 : nil }
            ?? Record(failures: 0, lastFailure: now, blockedUntil: 0)
        if records[party] == nil, records.count >= Self.maximumParties, let oldest = records.min(by: { $0.value.lastFailure < $1.value.lastFailure }) {
            records[oldest.key] = nil
        }
        record.failures += 1
        record.lastFailure = now
        var block: UInt64?
        if record.failures > Self.free {
            let doublings = min(record.failures - Self.free - 1, 20)
            let length = min(Self.firstBlock << UInt64(doublings), Self.longestBlock)
            record.blockedUntil = now + length
            block = length
        }
        records[party] = record
        return block
    }

    /// `party` presented a right token.
    mutating func succeeded(_ party: ConnectionParty) {
        records[party] = nil
    }

    var count: Int { records.count }
}
