import Bitstream

/// rtp://: datagrams to NAL units in sequence order, from one validated source (RFC 3550 appendix A.1,
/// `RTPSourceValidator`), with RTP timestamps unwrapped to 64 bits. When a new source is confirmed (a new SSRC, or
/// the same one with its sequence numbers restarted, as a restarted sender has), what the old one left in the
/// reorder window is handed out first, then the ordering and depacketizing start afresh. Owned by the decode thread.
struct RTPIngest {
    enum Event {
        /// The NAL units of a packet follow, from depacketizer offset `offset`, with this unwrapped timestamp.
        case packet(offset: Int64, mediaTimestamp: Int64)
        case nalUnit(NALUnit)
        case endOfAccessUnit
        /// Packets that never arrived, just before the packet whose units start at depacketizer offset `offset`.
        case lost(packets: Int, offset: Int64)
        /// The source stopped (or was replaced) inside an access unit: its last packets, with the marker bit, never
        /// came, and no later packet can tell, so the units handed out before are an incomplete picture.
        case truncated(offset: Int64)
        case dropped(RTPDrop, offset: Int64)
        case discarded(RTPDiscard)
        /// A source replaced the one before (not emitted for the first): the rest is another stream.
        case sourceChanged(ssrc: UInt32, restarted: Bool)
    }

    let codec: VideoCodec
    let payloadType: UInt8
    let maximumNALUnitSize: Int
    let reorderWindow: Int
    private var validator: RTPSourceValidator
    private var reorder: RTPReorderBuffer
    private var depacketizer: RTPDepacketizer
    /// The last RTP timestamp extended to 64 bits (RTP's 32 bits wrap after 13 h at 90 kHz).
    private var lastMediaTimestamp: Int64?
    private var hadSource = false
    /// NAL units were handed out since the last marker bit.
    private var accessUnitOpen = false
    /// Reused for every packet: no allocation per packet in steady state.
    private var sourceEvents: [RTPSourceEvent] = []
    private var ordered: [RTPPacket] = []
    private var depacketized: [RTPDepacketizerEvent] = []

    /// - Parameter authenticatedSources: the transport authenticated every packet (SRTP) and hands over only its
    ///   sender's current SSRC: a new one is the sender's new source at its first packet, without probation.
    init(codec: VideoCodec, payloadType: UInt8, maximumNALUnitSize: Int, reorderWindow: Int, authenticatedSources: Bool = false) {
        validator = authenticatedSources
            ? RTPSourceValidator(minimumSequential: 1, maximumLateness: RTPSourceValidator.maximumDropout)
            : RTPSourceValidator()
        self.codec = codec
        self.payloadType = payloadType
        self.maximumNALUnitSize = maximumNALUnitSize
        self.reorderWindow = reorderWindow
        reorder = RTPReorderBuffer(window: reorderWindow)
        depacketizer = RTPDepacketizer(codec: codec, payloadType: payloadType, maximumNALUnitSize: maximumNALUnitSize)
    }

    /// The confirmed source's SSRC (where keyframe requests go).
    var ssrc: UInt32? { validator.ssrc }

    var lostPackets: Int { depacketizer.statistics.lostPackets }

    mutating func push(_ packet: RTPPacket, _ emit: (Event) -> Void) {
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
                    flush(emit)
                    reorder = RTPReorderBuffer(window: reorderWindow)
                    depacketizer = RTPDepacketizer(codec: codec, payloadType: payloadType, maximumNALUnitSize: maximumNALUnitSize)
                    lastMediaTimestamp = nil
                    emit(.sourceChanged(ssrc: ssrc, restarted: restarted))
                }
                hadSource = true
            }
        }
        sourceEvents = events
    }

    /// Hands out everything held (the sender is gone).
    mutating func flush(_ emit: (Event) -> Void) {
        var held: [RTPSourceEvent] = []
        validator.flush { held.append($0) }
        for case .packet(let packet) in held { order(packet, emit) }
        var remaining = ordered
        ordered = []
        remaining.removeAll(keepingCapacity: true)
        reorder.flush { remaining.append($0) }
        for packet in remaining { depacketize(packet, emit) }
        ordered = remaining
        if accessUnitOpen {
            accessUnitOpen = false
            emit(.truncated(offset: depacketizer.offset))
        }
    }

    private mutating func order(_ packet: RTPPacket, _ emit: (Event) -> Void) {
        var released = ordered
        ordered = []
        released.removeAll(keepingCapacity: true)
        reorder.push(packet) { released.append($0) }
        for packet in released { depacketize(packet, emit) }
        ordered = released
    }

    private mutating func depacketize(_ packet: RTPPacket, _ emit: (Event) -> Void) {
        let start = depacketizer.offset
        emit(.packet(offset: start, mediaTimestamp: unwrap(packet.timestamp)))
        var events = depacketized
        depacketized = []
        events.removeAll(keepingCapacity: true)
        depacketizer.push(packet) { events.append($0) }
        for event in events {
            switch event {
            case .nalUnit(let unit, _):
                accessUnitOpen = true
                emit(.nalUnit(unit))
            case .endOfAccessUnit:
                accessUnitOpen = false
                emit(.endOfAccessUnit)
            case .packetsLost(let count): emit(.lost(packets: count, offset: start))
            case .dropped(let reason): emit(.dropped(reason, offset: start))
            }
        }
        depacketized = events
    }

    /// `timestamp` extended to 64 bits: the nearest value to the previous one with the same low 32 bits.
    private mutating func unwrap(_ timestamp: UInt32) -> Int64 {
        guard let last = lastMediaTimestamp else {
            lastMediaTimestamp = Int64(timestamp)
            return Int64(timestamp)
        }
        let value = last + Int64(Int32(bitPattern: timestamp &- UInt32(truncatingIfNeeded: last)))
        lastMediaTimestamp = value
        return value
    }
}
