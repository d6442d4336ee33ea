/// What `RTPPacketOrder` hands on, in the order the depacketizer must see it.
public enum RTPOrderedEvent: Sendable, Equatable {
    /// The current source's next packet in sequence order (a packet given up on leaves a gap the depacketizer sees).
    case packet(RTPPacket)
    /// A source replaced the one before (never said of the first): what the old one left in the reorder window was
    /// handed on before this, and what follows is another stream.
    case sourceChanged(ssrc: UInt32, restarted: Bool)
    /// A packet of no confirmed source (RFC 3550 appendix A.1), dropped.
    case discarded(RTPDiscard)
}

/// One RTP stream's packets from one source, in sequence order: source validation (`RTPSourceValidator`), then the
/// reorder window (`RTPReorderBuffer`). When a new source is confirmed (a new SSRC, or the same one with its sequence
/// numbers restarted, as a restarted sender has), what the old one left in the window is handed on first, then the
/// ordering starts afresh. Pure: part of `RTPReceiver`, owned by the transport's thread.
public struct RTPPacketOrder: Sendable {
    public let reorderWindow: Int
    private var validator: RTPSourceValidator
    private var reorder: RTPReorderBuffer
    private var hadSource = false
    /// Reused for every packet: no allocation per packet in steady state.
    private var sourceEvents: [RTPSourceEvent] = []
    private var released: [RTPPacket] = []

    /// - Parameter authenticatedSources: the transport authenticated every packet (SRTP) and hands over only its
    ///   sender's current SSRC: a new one is the sender's new source at its first packet, without probation.
    public init(reorderWindow: Int, authenticatedSources: Bool) {
        validator = authenticatedSources
            ? RTPSourceValidator(minimumSequential: 1, maximumLateness: RTPSourceValidator.maximumDropout)
            : RTPSourceValidator()
        self.reorderWindow = reorderWindow
        reorder = RTPReorderBuffer(window: reorderWindow)
    }

    /// The confirmed source's SSRC.
    public var ssrc: UInt32? { validator.ssrc }

    public var statistics: RTPSourceValidator.Statistics { validator.statistics }

    public mutating func push(_ packet: RTPPacket, _ emit: (RTPOrderedEvent) -> Void) {
        var events = sourceEvents
        sourceEvents = []
        events.removeAll(keepingCapacity: true)
        validator.push(packet) { events.append($0) }
        for event in events {
            switch event {
            case .packet(let packet):
                order(packet, emit)
            case .discarded(let reason):
                emit(.discarded(reason))
            case .newSource(let ssrc, let restarted):
                if hadSource {
                    reorder.flush { emit(.packet($0)) }
                    reorder = RTPReorderBuffer(window: reorderWindow)
                    emit(.sourceChanged(ssrc: ssrc, restarted: restarted))
                }
                hadSource = true
            }
        }
        sourceEvents = events
    }

    /// Hands on everything held, in order (the sender is gone: better late than never).
    public mutating func flush(_ emit: (RTPOrderedEvent) -> Void) {
        var held: [RTPSourceEvent] = []
        validator.flush { held.append($0) }
        for case .packet(let packet) in held { order(packet, emit) }
        reorder.flush { emit(.packet($0)) }
    }

    private mutating func order(_ packet: RTPPacket, _ emit: (RTPOrderedEvent) -> Void) {
        var packets = released
        released = []
        packets.removeAll(keepingCapacity: true)
        reorder.push(packet) { packets.append($0) }
        for packet in packets { emit(.packet(packet)) }
        released = packets
    }
}
