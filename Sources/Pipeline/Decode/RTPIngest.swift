import Bitstream

/// RTP packets, already validated and in sequence order (`RTPReceiver`, on the transport's thread), to NAL units
/// and access-unit ends, with RTP timestamps unwrapped to 64 bits. At a source change the depacketizing starts
/// afresh. Owned by the decode thread.
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
        /// The receiver discarded a packet of no confirmed source (counted and logged here).
        case discarded(RTPDiscard)
        /// A source replaced the one before: the rest is another stream.
        case sourceChanged(ssrc: UInt32, restarted: Bool)
    }

    let codec: VideoCodec
    let payloadType: UInt8
    let maximumNALUnitSize: Int
    private var depacketizer: RTPDepacketizer
    /// The last RTP timestamp extended to 64 bits (RTP's 32 bits wrap after 13 h at 90 kHz).
    private var lastMediaTimestamp: Int64?
    /// NAL units were handed out since the last marker bit.
    private var accessUnitOpen = false
    /// Reused for every packet: no allocation per packet in steady state.
    private var depacketized: [RTPDepacketizerEvent] = []
    /// The SSRC of the last packet (where keyframe requests go).
    private(set) var ssrc: UInt32?

    init(codec: VideoCodec, payloadType: UInt8, maximumNALUnitSize: Int) {
        self.codec = codec
        self.payloadType = payloadType
        self.maximumNALUnitSize = maximumNALUnitSize
        depacketizer = RTPDepacketizer(codec: codec, payloadType: payloadType, maximumNALUnitSize: maximumNALUnitSize)
    }

    var lostPackets: Int { depacketizer.statistics.lostPackets }

    mutating func push(_ packet: RTPPacket, _ emit: (Event) -> Void) {
        ssrc = packet.ssrc
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

    /// Another source's packets follow (the receiver handed on what the old one left): an access unit it left open
    /// is incomplete, and the depacketizing and timestamps start afresh.
    mutating func sourceChanged(to ssrc: UInt32, restarted: Bool, _ emit: (Event) -> Void) {
        flush(emit)
        depacketizer = RTPDepacketizer(codec: codec, payloadType: payloadType, maximumNALUnitSize: maximumNALUnitSize)
        lastMediaTimestamp = nil
        self.ssrc = ssrc
        emit(.sourceChanged(ssrc: ssrc, restarted: restarted))
    }

    /// The sender is gone: an access unit it left open is incomplete.
    mutating func flush(_ emit: (Event) -> Void) {
        guard accessUnitOpen else { return }
        accessUnitOpen = false
        emit(.truncated(offset: depacketizer.offset))
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
