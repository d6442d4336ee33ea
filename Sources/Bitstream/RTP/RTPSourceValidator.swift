/// What `RTPSourceValidator` makes of a packet.
public enum RTPSourceEvent: Sendable, Equatable {
    /// A packet of the current source, to be put in order and depacketized.
    case packet(RTPPacket)
    /// A source was confirmed (its packets follow): a first or new SSRC, or the same SSRC after its sequence
    /// numbers started again elsewhere. What came before belongs to another stream: start afresh.
    case newSource(ssrc: UInt32, restarted: Bool)
    /// A packet that belongs to no confirmed source, dropped.
    case discarded(RTPDiscard)
}

public enum RTPDiscard: String, Sendable, Equatable {
    /// A packet held while its source was on probation, given up when the next one did not follow it.
    case probation
    /// A sequence number far from the current one, not followed by its successor.
    case sequenceJump = "sequence_jump"
    /// Another SSRC's packet, not followed by a second one in sequence.
    case otherSource = "other_source"
    /// Not an RTP packet at all (its header, padding or payload is not there): dropped by the transport.
    case malformed
}

/// RTP source validation after RFC 3550 appendix A.1: a source is confirmed after `minimumSequential` packets
/// in sequence (probation), a jump of more than `maximumDropout` ahead or `maximumMisorder` behind is dropped
/// unless the next packet follows it (the sender restarted its sequence: resynchronise), and a new SSRC is a new
/// source once it passes probation. Unlike A.1, packets on probation are held and released on confirmation
/// rather than dropped: the first packets of a stream carry its parameter sets and keyframe. Pure; bounded.
public struct RTPSourceValidator: Sendable {
    /// Probation's length where anyone may send: A.1's, less one (a packet is held, not dropped).
    public static let minimumSequential = 2
    public static let maximumDropout: UInt16 = 3000
    public static let maximumMisorder: UInt16 = 100

    public struct Statistics: Sendable, Equatable {
        public var sources = 0
        public var resynchronisations = 0
        public var discarded: [RTPDiscard: Int] = [:]
        public init() {}
    }

    private struct Candidate {
        var ssrc: UInt32
        var lastSequence: UInt16
        var held: [RTPPacket]
    }

    private struct Source {
        var ssrc: UInt32
        var highestSequence: UInt16
        /// The sequence number after a large jump: if the next packet has it, the sender restarted.
        var jump: (next: UInt16, packet: RTPPacket)?
    }

    public private(set) var statistics = Statistics()
    /// Packets in sequence that confirm a source; 1 where the transport authenticated the sender (SRTP): a new
    /// SSRC of its is its new source at once, and probation would only lose the first packets of its stream.
    public let minimumSequential: Int
    /// How far behind the highest a packet is late rather than a jump. A.1's 100 where anyone may send; where the
    /// sender is authenticated and retransmits what NACK asks for, `maximumDropout`: at 30 Mbit/s (2700 packets a
    /// second) a retransmission 80 ms after the loss is 200 packets behind, and two in a row were taken for a
    /// restart of the numbering (the source reset, the decoder's parameter sets lost until the next keyframe).
    public let maximumLateness: UInt16
    private var source: Source?
    private var candidate: Candidate?

    public init(minimumSequential: Int = Self.minimumSequential, maximumLateness: UInt16 = Self.maximumMisorder) {
        precondition(minimumSequential >= 1, "a source needs at least one packet to be confirmed")
        precondition((1...Self.maximumDropout).contains(maximumLateness), "late means 1 to maximumDropout behind")
        self.minimumSequential = minimumSequential
        self.maximumLateness = maximumLateness
    }

    /// The confirmed source's SSRC.
    public var ssrc: UInt32? { source?.ssrc }

    public mutating func push(_ packet: RTPPacket, _ emit: (RTPSourceEvent) -> Void) {
        guard var current = source, current.ssrc == packet.ssrc else {
            probe(packet, emit)
            return
        }
        let ahead = packet.sequenceNumber &- current.highestSequence
        if ahead < Self.maximumDropout {
            // In order, or a gap the reorder buffer and depacketizer deal with.
            if ahead != 0 { current.highestSequence = packet.sequenceNumber }
            if current.jump != nil { discard(.sequenceJump, emit) }
            current.jump = nil
            source = current
            emit(.packet(packet))
        } else if ahead <= UInt16.max - maximumLateness + 1 {
            // A very large jump: a stray packet, or the sender restarted its numbering.
            if let jump = current.jump, jump.next == packet.sequenceNumber {
                statistics.resynchronisations += 1
                source = Source(ssrc: packet.ssrc, highestSequence: packet.sequenceNumber)
                emit(.newSource(ssrc: packet.ssrc, restarted: true))
                emit(.packet(jump.packet))
                emit(.packet(packet))
            } else {
                if current.jump != nil { discard(.sequenceJump, emit) }
                current.jump = (packet.sequenceNumber &+ 1, packet)
                source = current
            }
        } else {
            // Slightly behind: late or duplicated; the reorder buffer and depacketizer decide.
            emit(.packet(packet))
        }
    }

    /// A packet from no confirmed source: it starts or continues a candidate's probation, which it may end.
    private mutating func probe(_ packet: RTPPacket, _ emit: (RTPSourceEvent) -> Void) {
        if var continued = candidate, continued.ssrc == packet.ssrc, packet.sequenceNumber == continued.lastSequence &+ 1 {
            continued.held.append(packet)
            continued.lastSequence = packet.sequenceNumber
            candidate = continued
        } else {
            if let candidate {
                for _ in candidate.held { discard(source == nil ? .probation : .otherSource, emit) }
            }
            candidate = Candidate(ssrc: packet.ssrc, lastSequence: packet.sequenceNumber, held: [packet])
        }
        guard let confirmed = candidate, confirmed.held.count >= minimumSequential else { return }
        statistics.sources += 1
        source = Source(ssrc: packet.ssrc, highestSequence: packet.sequenceNumber)
        candidate = nil
        emit(.newSource(ssrc: packet.ssrc, restarted: false))
        for held in confirmed.held { emit(.packet(held)) }
    }

    private mutating func discard(_ reason: RTPDiscard, _ emit: (RTPSourceEvent) -> Void) {
        statistics.discarded[reason, default: 0] += 1
        emit(.discarded(reason))
    }

    /// Releases what probation holds (the end of the stream: better late than never).
    public mutating func flush(_ emit: (RTPSourceEvent) -> Void) {
        guard let candidate, source == nil || source?.ssrc == candidate.ssrc else { return }
        self.candidate = nil
        for held in candidate.held { emit(.packet(held)) }
    }
}
