/// The receiving side of transport-wide congestion control (draft-holmer-rmcat-transport-wide-cc-extensions-01):
/// it records when each packet with a transport-wide sequence number arrived and, every `interval`, says which
/// arrived and when, so that the sender's delay-based estimator can probe up and back off. Sans-IO: the arrival
/// times and the present are inputs, feedback messages are outputs; no clock is read.
///
/// Late packets (reordered) are still reported when they are at most `maximumLateness` numbers behind what was
/// last reported: the window of the next message starts back at them (the sender takes a second report of a packet
/// in its stride). A retransmission is not late: the sender gives it a number of its own.
public struct TransportWideFeedbackRecorder: Sendable {
    /// Chromium's own receiver sends feedback every 50 to 250 ms; the short end lets the sender react sooner.
    public static let interval: UInt64 = 50_000_000
    /// How long an arrival stays known after it was reported, for a late packet's message to start before it.
    static let backWindow: UInt64 = 500_000_000
    /// Per message: at most this many sequence numbers and arrivals, so that any message stays under 1000 bytes
    /// (2-bit vectors of 7 for every status, two bytes for every delta).
    static let maximumStatuses = 1000
    static let maximumArrivals = 300
    /// More arrivals than this kept at once and the oldest go, whatever their age: a bound for a flood.
    static let maximumKept = 8192
    /// Messages per interval at most (8 KB): sequence numbers scattered on purpose would otherwise take a message
    /// each. What does not fit is not reported; the sender takes it as lost.
    public static let maximumMessages = 8
    /// How far behind the last report a late packet may be and still be reported: each one moves the next window
    /// back, and every arrival in between is reported again (a sender filling old holes on purpose got 3 times
    /// more bytes back than it sent before this bound).
    static let maximumLateness: Int64 = 64

    let senderSSRC: UInt32
    private var mediaSSRC: UInt32 = 0
    /// (unwrapped sequence number, arrival), in sequence order.
    private var arrivals: [(sequence: Int64, arrival: UInt64)] = []
    private var newest: Int64?
    /// The first sequence number the next message reports.
    private var windowStart: Int64?
    /// One past the last sequence number reported.
    private var reportedUpTo: Int64?
    private var feedbackCount: UInt8 = 0
    /// When the next message is due; nil while nothing waits to be reported.
    public private(set) var deadline: UInt64?

    public init(senderSSRC: UInt32) {
        self.senderSSRC = senderSSRC
    }

    /// A packet that carried transport-wide sequence number `sequenceNumber` arrived at `arrival` (nanoseconds on
    /// the caller's monotonic clock). A duplicate, or a packet more than `maximumLateness` behind the last report,
    /// is ignored.
    public mutating func record(sequenceNumber: UInt16, mediaSSRC: UInt32, arrival: UInt64) {
        let sequence = unwrap(sequenceNumber)
        if let newest, sequence < newest - Int64(Self.maximumKept) { return }
        if let reportedUpTo, sequence < reportedUpTo - Self.maximumLateness { return }
        let index = insertionIndex(of: sequence)
        if index < arrivals.count, arrivals[index].sequence == sequence { return }
        arrivals.insert((sequence, arrival), at: index)
        if arrivals.count > Self.maximumKept { arrivals.removeFirst(arrivals.count - Self.maximumKept) }
        newest = max(newest ?? sequence, sequence)
        windowStart = min(windowStart ?? sequence, sequence)
        self.mediaSSRC = mediaSSRC
        if deadline == nil { deadline = arrival + Self.interval }
    }

    /// The messages due at `now`: none before the deadline, else every arrival not yet reported (and the late
    /// ones), in as many messages as the limits need.
    public mutating func feedback(now: UInt64) -> [TransportWideFeedback] {
        guard let due = deadline, now >= due, let start = windowStart else { return [] }
        let first = insertionIndex(of: start)
        var messages: [TransportWideFeedback] = []
        var builder: MessageBuilder?
        for (sequence, arrival) in arrivals[first...] {
            if builder?.add(sequence: sequence, arrival: arrival) != true {
                if let built = builder { messages.append(built.message(feedbackCount: next())) }
                guard messages.count < Self.maximumMessages else { builder = nil; break }
                builder = MessageBuilder(base: sequence, arrival: arrival, senderSSRC: senderSSRC, mediaSSRC: mediaSSRC)
            }
        }
        if let built = builder { messages.append(built.message(feedbackCount: next())) }
        reportedUpTo = max(reportedUpTo ?? .min, (newest ?? start) + 1)
        windowStart = nil
        deadline = nil
        // What is older than the back window (and was reported) goes.
        let keepAfter = now > Self.backWindow ? now - Self.backWindow : 0
        arrivals.removeAll { $0.arrival < keepAfter }
        return messages
    }

    private mutating func next() -> UInt8 {
        defer { feedbackCount &+= 1 }
        return feedbackCount
    }

    private func unwrap(_ sequenceNumber: UInt16) -> Int64 {
        guard let newest else { return Int64(sequenceNumber) + (1 << 16) }  // room for early late packets
        return newest + Int64(Int16(bitPattern: sequenceNumber &- UInt16(truncatingIfNeeded: newest)))
    }

    /// Where `sequence` goes in `arrivals`: nearly always at the end, so searched from there.
    private func insertionIndex(of sequence: Int64) -> Int {
        var index = arrivals.count
        while index > 0, arrivals[index - 1].sequence >= sequence { index -= 1 }
        return index
    }
}

/// One message being filled: arrivals in sequence order, each delta measured from the time the sender will
/// rebuild (the reference time plus the deltas before it), so rounding never accumulates.
private struct MessageBuilder {
    let base: Int64
    let referenceTime: UInt64
    let senderSSRC: UInt32
    let mediaSSRC: UInt32
    var received: [TransportWideFeedback.Arrival] = []
    var lastSequence: Int64
    /// The rebuilt time of the last arrival, in nanoseconds.
    var lastTime: UInt64

    init(base: Int64, arrival: UInt64, senderSSRC: UInt32, mediaSSRC: UInt32) {
        self.base = base
        referenceTime = arrival / TransportWideFeedback.referenceTickNanoseconds
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
        lastSequence = base
        lastTime = referenceTime * TransportWideFeedback.referenceTickNanoseconds
        _ = add(sequence: base, arrival: arrival)
    }

    /// Adds an arrival; false when it does not fit this message (limits, or a delta beyond 16 bits).
    mutating func add(sequence: Int64, arrival: UInt64) -> Bool {
        guard sequence - base < Int64(TransportWideFeedbackRecorder.maximumStatuses),
              received.count < TransportWideFeedbackRecorder.maximumArrivals else { return false }
        let tick = Int64(TransportWideFeedback.deltaTickNanoseconds)
        let difference = Int64(bitPattern: arrival &- lastTime)
        // Rounded to the nearest tick, away from zero at halves.
        let ticks = (difference + (difference < 0 ? -tick / 2 : tick / 2)) / tick
        guard let delta = Int16(exactly: ticks) else { return false }
        received.append(.init(sequenceNumber: UInt16(truncatingIfNeeded: sequence), delta: delta))
        lastSequence = sequence
        lastTime = UInt64(bitPattern: Int64(bitPattern: lastTime) + ticks * tick)
        return true
    }

    func message(feedbackCount: UInt8) -> TransportWideFeedback {
        TransportWideFeedback(senderSSRC: senderSSRC, mediaSSRC: mediaSSRC, baseSequenceNumber: UInt16(truncatingIfNeeded: base),
                              statusCount: UInt16(lastSequence - base + 1),
                              referenceTime: UInt32(truncatingIfNeeded: referenceTime), feedbackCount: feedbackCount,
                              received: received)
    }
}
