/// What the depacketizer makes of RTP packets.
public enum RTPDepacketizerEvent: Sendable, Equatable {
    /// A whole NAL unit (header included), in decoding order.
    case nalUnit(NALUnit, timestamp: UInt32)
    /// The marker bit: the access unit with this timestamp is complete — no need to wait for the next one.
    case endOfAccessUnit(timestamp: UInt32)
    /// A gap in sequence numbers: `count` packets never arrived. A fragmented NAL unit in progress is dropped.
    case packetsLost(count: Int)
    /// A packet or partial NAL unit that was discarded, and why.
    case dropped(RTPDrop)
}

public enum RTPDrop: String, Sendable, Equatable {
    case wrongPayloadType = "wrong_payload_type"
    case unsupportedPacketType = "unsupported_packet_type"
    case malformedAggregation = "malformed_aggregation"
    case fragmentWithoutStart = "fragment_without_start"
    case incompleteFragment = "incomplete_fragment"
    case oversizedNALUnit = "oversized_nal_unit"
    case duplicate
}

/// Turns RTP packets into NAL units: H.264 per RFC 6184 (single NAL unit, STAP-A, FU-A; non-interleaved mode) and
/// H.265 per RFC 7798 (single NAL unit, AP, FU; without DONL, i.e. sprop-max-don-diff = 0). Pure and incremental:
/// aggregated NAL units are slices of the packet (no copy); fragments are gathered in one reused buffer, bounded by
/// `maximumNALUnitSize`. Packets are taken in the order given (`RTPReorderBuffer` restores sequence order in front of
/// it): a sequence gap is reported, and a fragment cut by it is dropped rather than handed out damaged.
public struct RTPDepacketizer {
    public struct Statistics: Sendable, Equatable {
        public var packets = 0
        public var lostPackets = 0
        public var nalUnits = 0
        public var dropped: [RTPDrop: Int] = [:]
        public init() {}
    }

    public let codec: VideoCodec
    public let payloadType: UInt8
    public let maximumNALUnitSize: Int
    public private(set) var statistics = Statistics()
    private var expectedSequence: UInt16?
    private var fragment: [UInt8] = []
    private var fragmentActive = false
    private var fragmentTimestamp: UInt32 = 0
    /// A running count of NAL unit bytes handed out (4-byte start codes counted), used as each unit's virtual
    /// stream offset.
    public private(set) var offset: Int64 = 0

    public init(codec: VideoCodec, payloadType: UInt8 = 96, maximumNALUnitSize: Int = 16 << 20) {
        self.codec = codec
        self.payloadType = payloadType
        self.maximumNALUnitSize = maximumNALUnitSize
    }

    public mutating func push(_ packet: RTPPacket, _ emit: (RTPDepacketizerEvent) -> Void) {
        guard packet.payloadType == payloadType else {
            drop(.wrongPayloadType, emit)
            return
        }
        if let expected = expectedSequence {
            let gap = Int(packet.sequenceNumber &- expected)
            if gap >= 0x8000 {
                // Behind the expected number: a duplicate or a straggler the reorder window gave up on.
                drop(.duplicate, emit)
                return
            }
            if gap > 0 {
                statistics.lostPackets += gap
                emit(.packetsLost(count: gap))
                if fragmentActive {
                    fragmentActive = false
                    drop(.incompleteFragment, emit)
                }
            }
        }
        expectedSequence = packet.sequenceNumber &+ 1
        statistics.packets += 1
        switch codec {
        case .h264: pushH264(packet, emit)
        case .h265: pushH265(packet, emit)
        }
        if packet.marker { emit(.endOfAccessUnit(timestamp: packet.timestamp)) }
    }

    // MARK: - H.264 (RFC 6184)

    private mutating func pushH264(_ packet: RTPPacket, _ emit: (RTPDepacketizerEvent) -> Void) {
        let payload = packet.payload
        let indicator = payload.first!
        switch indicator & 0x1F {
        case 1...23:
            hand(payload, packet.timestamp, emit)
        case 24:  // STAP-A: [header][size16 NAL]…
            aggregate(payload.dropFirst(), timestamp: packet.timestamp, emit)
        case 28:  // FU-A: [indicator][FU header][fragment]
            guard payload.count > 2 else {
                drop(.fragmentWithoutStart, emit)
                return
            }
            let header = payload[payload.startIndex + 1]
            fragment(start: header & 0x80 != 0, end: header & 0x40 != 0,
                     header: ((indicator & 0xE0) | (header & 0x1F), nil),
                     body: payload.dropFirst(2), timestamp: packet.timestamp, emit)
        default:  // STAP-B, MTAP16/24, FU-B (interleaved mode) and reserved types
            drop(.unsupportedPacketType, emit)
        }
    }

    // MARK: - H.265 (RFC 7798)

    private mutating func pushH265(_ packet: RTPPacket, _ emit: (RTPDepacketizerEvent) -> Void) {
        let payload = packet.payload
        guard payload.count >= 2 else {
            drop(.malformedAggregation, emit)
            return
        }
        let first = payload[payload.startIndex]
        let second = payload[payload.startIndex + 1]
        switch (first >> 1) & 0x3F {
        case 48:  // AP: [payload header 2][size16 NAL]…
            aggregate(payload.dropFirst(2), timestamp: packet.timestamp, emit)
        case 49:  // FU: [payload header 2][FU header][fragment]
            guard payload.count > 3 else {
                drop(.fragmentWithoutStart, emit)
                return
            }
            let header = payload[payload.startIndex + 2]
            fragment(start: header & 0x80 != 0, end: header & 0x40 != 0,
                     header: ((first & 0x81) | ((header & 0x3F) << 1), second),
                     body: payload.dropFirst(3), timestamp: packet.timestamp, emit)
        case 50:  // PACI
            drop(.unsupportedPacketType, emit)
        default:
            hand(payload, packet.timestamp, emit)
        }
    }

    // MARK: - Common

    /// Aggregation packets: 16-bit size, NAL unit, repeated. A size running past the packet drops the rest.
    private mutating func aggregate(_ body: ArraySlice<UInt8>, timestamp: UInt32, _ emit: (RTPDepacketizerEvent) -> Void) {
        var rest = body
        while !rest.isEmpty {
            guard rest.count >= 2 else {
                drop(.malformedAggregation, emit)
                return
            }
            let size = Int(rest[rest.startIndex]) << 8 | Int(rest[rest.startIndex + 1])
            rest = rest.dropFirst(2)
            guard size > 0, size <= rest.count else {
                drop(.malformedAggregation, emit)
                return
            }
            hand(rest.prefix(size), timestamp, emit)
            rest = rest.dropFirst(size)
        }
    }

    private mutating func fragment(
        start: Bool, end: Bool, header: (UInt8, UInt8?), body: ArraySlice<UInt8>, timestamp: UInt32,
        _ emit: (RTPDepacketizerEvent) -> Void
    ) {
        if start {
            if fragmentActive { drop(.incompleteFragment, emit) }
            fragment.removeAll(keepingCapacity: true)
            fragment.append(header.0)
            if let second = header.1 { fragment.append(second) }
            fragmentActive = true
            fragmentTimestamp = timestamp
        } else if !fragmentActive {
            drop(.fragmentWithoutStart, emit)
            return
        }
        guard fragment.count + body.count <= maximumNALUnitSize else {
            fragmentActive = false
            drop(.oversizedNALUnit, emit)
            return
        }
        fragment.append(contentsOf: body)
        if end {
            fragmentActive = false
            hand(fragment[...], fragmentTimestamp, emit)
        }
    }

    private mutating func hand(_ unit: ArraySlice<UInt8>, _ timestamp: UInt32, _ emit: (RTPDepacketizerEvent) -> Void) {
        // A NAL unit never ends in a zero byte: trailing zeros are trailing_zero_8bits (FFmpeg 5.1's HEVC packetizer
        // leaves the zero_byte of the next start code there). Stripped, as the Annex B splitter does.
        var bytes = unit
        while bytes.last == 0 { bytes = bytes.dropLast() }
        guard !bytes.isEmpty else {
            drop(.malformedAggregation, emit)
            return
        }
        guard bytes.count <= maximumNALUnitSize else {
            drop(.oversizedNALUnit, emit)
            return
        }
        statistics.nalUnits += 1
        emit(.nalUnit(NALUnit(bytes: bytes, startCodeOffset: offset, startCodeLength: 4), timestamp: timestamp))
        offset += Int64(bytes.count + 4)
    }

    private mutating func drop(_ reason: RTPDrop, _ emit: (RTPDepacketizerEvent) -> Void) {
        statistics.dropped[reason, default: 0] += 1
        emit(.dropped(reason))
    }
}
