/// Which RTP sequence numbers are missing and when to ask for them again (generic NACK, RFC 4585 §6.2.1): at
/// once, then every `retryInterval`, at most `maximumRequests` times, and never for longer than `giveUpAfter`
/// (by then the reorder window has moved on and the decode thread has flagged the loss).
public struct LossRecovery: Sendable {
    public static let retryInterval: UInt64 = 40_000_000
    public static let maximumRequests = 4
    public static let giveUpAfter: UInt64 = 400_000_000
    /// A jump larger than this is a restart or a forged packet, not loss worth asking for.
    public static let largestGap = 512
    /// Missing packets tracked at most (a burst beyond it is past repair).
    public static let maximumTracked = 1024

    private var highest: UInt16?
    /// A missing number: since when, when last asked for, how many times.
    private struct Gap {
        var since: UInt64
        var lastAsked: UInt64?
        var requests = 0
    }

    private var missing: [UInt16: Gap] = [:]
    private var recovered = 0
    private var unrecovered = 0

    public init() {}

    public mutating func received(_ sequenceNumber: UInt16, now: UInt64) {
        guard let last = highest else {
            highest = sequenceNumber
            return
        }
        let ahead = Int(Int16(bitPattern: sequenceNumber &- last))
        if ahead > 0 {
            if ahead <= Self.largestGap {
                for step in 1..<ahead where missing.count < Self.maximumTracked {
                    missing[last &+ UInt16(step)] = Gap(since: now)
                }
            }
            highest = sequenceNumber
        } else if missing.removeValue(forKey: sequenceNumber) != nil {
            recovered += 1
        }
    }

    /// Whether `sequenceNumber` is one still asked for: only such a retransmission is taken (one of another
    /// source's numbers, a sender's late answer to a request of before its SSRC changed, is not ours).
    public func isMissing(_ sequenceNumber: UInt16) -> Bool { missing[sequenceNumber] != nil }

    /// A new source: its numbers have nothing to do with the last one's, whose gaps are given up (uncounted: they
    /// were not lost, the stream ended). The counts not yet taken stay.
    public mutating func restart() {
        highest = nil
        missing.removeAll()
    }

    /// The sequence numbers to ask for now; those past hope are dropped and counted.
    public mutating func due(now: UInt64) -> [UInt16] {
        var ask: [UInt16] = []
        for (sequenceNumber, entry) in missing {
            if now &- entry.since > Self.giveUpAfter || entry.requests >= Self.maximumRequests {
                missing.removeValue(forKey: sequenceNumber)
                unrecovered += 1
                continue
            }
            if let asked = entry.lastAsked, now &- asked < Self.retryInterval { continue }
            missing[sequenceNumber] = Gap(since: entry.since, lastAsked: now, requests: entry.requests + 1)
            ask.append(sequenceNumber)
        }
        return ask.sorted { Int16(bitPattern: $0 &- $1) < 0 }
    }

    /// When `due` next has something to do: a number to ask for (at once if never asked), to ask again, or to give up.
    public var nextDeadline: UInt64? {
        missing.values.lazy.map { gap in
            gap.lastAsked.map { min($0 &+ Self.retryInterval, gap.since &+ Self.giveUpAfter &+ 1) } ?? gap.since
        }.min()
    }

    /// Losses given up on since the last call.
    public mutating func takeUnrecoveredCount() -> Int {
        defer { unrecovered = 0 }
        return unrecovered
    }

    /// Recoveries since the last call.
    public mutating func takeRecoveredCount() -> Int {
        defer { recovered = 0 }
        return recovered
    }
}
