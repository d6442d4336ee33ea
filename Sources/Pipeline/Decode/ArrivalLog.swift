/// When each piece of a stream arrived: (stream offset, arrival time, unwrapped RTP timestamp) of recent chunks or
/// packets, so that an access unit can be dated by its first byte and given its packet's timestamp. Bounded: the
/// oldest half is forgotten when full.
struct ArrivalLog {
    static let capacity = 4096
    private var arrivals: [(offset: Int64, time: UInt64, mediaTimestamp: Int64?)] = []

    init() { arrivals.reserveCapacity(Self.capacity) }

    /// Bytes from stream offset `offset` on arrived at `time` (in a packet with this timestamp, for RTP).
    mutating func record(offset: Int64, time: UInt64, mediaTimestamp: Int64? = nil) {
        arrivals.append((offset, time, mediaTimestamp))
        if arrivals.count > Self.capacity { arrivals.removeFirst(Self.capacity / 2) }
    }

    /// The chunk or packet that carried byte `offset`; the oldest known when it is older than all of them.
    func arrival(ofOffset offset: Int64) -> (time: UInt64, mediaTimestamp: Int64?)? {
        for arrival in arrivals.reversed() where arrival.offset <= offset { return (arrival.time, arrival.mediaTimestamp) }
        return arrivals.first.map { ($0.time, $0.mediaTimestamp) }
    }

    mutating func removeAll() { arrivals.removeAll(keepingCapacity: true) }
}
