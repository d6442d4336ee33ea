import Bitstream
import FuzzSupport

/// RTP parsing, the receiver's source validation and reorder window, and both depacketizers on a sequence of
/// datagrams, as the daemon chains them: the input is [control byte] then datagrams, each prefixed by a 2-byte
/// big-endian length. Every packet goes to two `RTPReceiver`s: one set up as rtp://'s (anyone may send: probation;
/// the window from the control byte) and one as a WHIP session's (authenticated, RTX 97, NACK, PLI, each new source
/// asked), polled after each, the decoder's keyframe wish toggled by the packets' low sequence bit: all it sends must
/// read back as RTCP. Bit 7 of the control byte says whose ordered packets are depacketized (the WHIP one's when set);
/// after a source change, every packet handed on is the current source's. Each datagram's header extension is
/// searched for a transport-wide sequence number (id from the control byte), recorded as arriving at the datagram's
/// index in milliseconds, and the feedback for them must read back as written.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRTP(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    guard let control = input.first else { return 0 }
    var depacketizer = RTPDepacketizer(codec: control & 1 == 0 ? .h264 : .h265, payloadType: 96, maximumNALUnitSize: 4096)
    var plainConfiguration = RTPReceiver.Configuration(localSSRC: 8)
    plainConfiguration.reorderWindow = Int(control >> 1) % 32 + 1
    plainConfiguration.reportInterval = nil
    var plain = RTPReceiver(plainConfiguration, now: 0)
    var packets = 0
    var handedOn = 0
    var offset = 1
    var nalBytes = 0
    var transportFeedback = TransportWideFeedbackRecorder(senderSSRC: 1)
    var configuration = RTPReceiver.Configuration(localSSRC: 7)
    configuration.payloadType = 96
    configuration.retransmissionPayloadType = 97
    configuration.requestsRetransmissions = true
    configuration.keyframeRequest = control & 0x40 == 0 ? .pictureLossIndication : .fullIntraRequest
    configuration.asksNewSourcesForKeyframes = true
    configuration.authenticatedSources = true
    var receiver = RTPReceiver(configuration, now: 0)
    var clock: UInt64 = 0
    func checkFeedback(_ feedback: [RTPReceiver.Feedback]) {
        for item in feedback {
            guard let summary = try? RTCPPacketSummary.parseCompound(item.packet), !summary.isEmpty else {
                preconditionFailure("the receiver's own RTCP does not read back")
            }
            if case .retransmissionRequest(_, let named) = item { precondition(named >= 1 && named <= LossRecovery.maximumTracked) }
        }
    }
    let extensionID = (control >> 1) % 15 + 1
    /// What a receiver handed on: the packets after its last source change are all its current source's.
    func take(_ events: [RTPOrderedEvent], current: UInt32?) {
        let lastChange = events.lastIndex { if case .sourceChanged = $0 { true } else { false } } ?? -1
        for (index, event) in events.enumerated() {
            switch event {
            case .packet(let packet):
                handedOn += 1
                if index > lastChange && lastChange >= 0 { precondition(packet.ssrc == current, "a packet of another source after the change") }
                depacketizer.push(packet) { event in
                    if case .nalUnit(let unit, _) = event {
                        precondition(unit.bytes.count <= 4096 + 4, "NAL unit over the limit")
                        nalBytes += unit.bytes.count
                    }
                }
            case .sourceChanged:
                depacketizer = RTPDepacketizer(codec: depacketizer.codec, payloadType: 96, maximumNALUnitSize: 4096)
            case .discarded:
                handedOn += 1
            }
        }
    }
    let depacketizingWHIP = control & 0x80 != 0
    while offset + 2 <= input.count {
        let length = Int(input[offset]) << 8 | Int(input[offset + 1])
        offset += 2
        let datagram = input[offset..<min(offset + length, input.count)]
        offset += datagram.count
        if let sequence = RTPHeaderExtensions.transportSequenceNumber(id: extensionID, in: datagram) {
            transportFeedback.record(sequenceNumber: sequence, mediaSSRC: 2, arrival: 1_000_000_000 + UInt64(offset) * 1_000_000)
        }
        guard let packet = try? RTPPacket(parsing: datagram) else { continue }
        // Time only goes forward: 7 ms a packet, and on to the receiver's deadline every other packet.
        clock += 7_000_000
        var whipEvents: [RTPOrderedEvent] = []
        if case .repaired(let original) = receiver.receive(packet, now: clock, { whipEvents.append($0) }) {
            precondition(original.payloadType == 96 && original.ssrc == receiver.ssrc, "a repair not of the current source's video")
        }
        var plainEvents: [RTPOrderedEvent] = []
        _ = plain.receive(packet, now: clock) { plainEvents.append($0) }
        packets += 1
        if depacketizingWHIP { take(whipEvents, current: receiver.ssrc) } else { take(plainEvents, current: plain.ssrc) }
        precondition(depacketizingWHIP || handedOn <= packets, "more handed on than received")
        if packet.sequenceNumber & 1 == 0 { receiver.keyframeWanted(of: packet.ssrc) } else { receiver.keyframeArrived() }
        checkFeedback(receiver.poll(now: clock))
        if packet.sequenceNumber & 2 == 0, let deadline = receiver.nextDeadline, deadline > clock {
            clock = deadline
            checkFeedback(receiver.poll(now: clock))
        }
    }
    var held: [RTPOrderedEvent] = []
    if depacketizingWHIP { receiver.flush { held.append($0) } } else { plain.flush { held.append($0) } }
    take(held, current: nil)
    precondition(depacketizingWHIP || handedOn <= packets, "more handed on than received")
    for message in transportFeedback.feedback(now: .max) {
        let written = RTCPTransportFeedback.transportWide(message)
        precondition(written.count < 1000, "a feedback message over its size")
        guard case .transportWideFeedback(message)? = try? RTCPPacketSummary.parseCompound(written).last else {
            preconditionFailure("our own transport-wide feedback does not read back")
        }
    }
    return 0
}

@_cdecl("FuzzRTP_main")
public func main(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runFuzzer(argc, argv, fuzzRTP)
}
