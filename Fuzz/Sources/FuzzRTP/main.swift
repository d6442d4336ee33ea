import Bitstream
import FuzzSupport

/// RTP parsing, RFC 3550 source validation, the reorder window and both depacketizers on a sequence of datagrams,
/// as the daemon chains them: the input is [control byte] then datagrams, each prefixed by a 2-byte big-endian
/// length. Bit 7 of the control byte bypasses the validator (the reorder buffer on its own). Each datagram's header
/// extension is searched for a transport-wide sequence number (id from the control byte), recorded as arriving at
/// the datagram's index in milliseconds, and the feedback for them must read back as written. Every packet also goes
/// to an `RTPReceiver` set up as a WHIP session's (RTX 97, NACK, PLI, each new source asked), polled after each, the
/// decoder's keyframe wish toggled by the packets' low sequence bit: all it sends must read back as RTCP.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRTP(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    guard let control = input.first else { return 0 }
    var depacketizer = RTPDepacketizer(codec: control & 1 == 0 ? .h264 : .h265, payloadType: 96, maximumNALUnitSize: 4096)
    var reorder = RTPReorderBuffer(window: Int(control >> 1) % 32 + 1)
    var validator = RTPSourceValidator()
    var packets = 0
    var offset = 1
    var nalBytes = 0
    var transportFeedback = TransportWideFeedbackRecorder(senderSSRC: 1)
    var configuration = RTPReceiver.Configuration(localSSRC: 7)
    configuration.payloadType = 96
    configuration.retransmissionPayloadType = 97
    configuration.requestsRetransmissions = true
    configuration.keyframeRequest = control & 0x40 == 0 ? .pictureLossIndication : .fullIntraRequest
    configuration.asksNewSourcesForKeyframes = true
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
    func depacketize(_ packet: RTPPacket) {
        depacketizer.push(packet) { event in
            if case .nalUnit(let unit, _) = event {
                precondition(unit.bytes.count <= 4096 + 4, "NAL unit over the limit")
                nalBytes += unit.bytes.count
            }
        }
    }
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
        if case .repaired(let original) = receiver.receive(packet, now: clock) {
            precondition(original.payloadType == 96 && original.ssrc == receiver.ssrc, "a repair not of the current source's video")
        }
        if packet.sequenceNumber & 1 == 0 { receiver.keyframeWanted(of: packet.ssrc) } else { receiver.keyframeArrived() }
        checkFeedback(receiver.poll(now: clock))
        if packet.sequenceNumber & 2 == 0, let deadline = receiver.nextDeadline, deadline > clock {
            clock = deadline
            checkFeedback(receiver.poll(now: clock))
        }
        if control & 0x80 != 0 {
            reorder.push(packet, depacketize)
            continue
        }
        var released: [RTPPacket] = []
        validator.push(packet) { event in
            switch event {
            case .packet(let packet): released.append(packet)
            case .newSource: reorder = RTPReorderBuffer(window: reorder.window)
            case .discarded: break
            }
        }
        for packet in released { reorder.push(packet, depacketize) }
        packets += 1
        precondition(validator.statistics.sources <= packets, "more sources than packets")
    }
    validator.flush { if case .packet(let packet) = $0 { reorder.push(packet, depacketize) } }
    reorder.flush(depacketize)
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
