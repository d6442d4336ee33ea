import Bitstream
import FuzzSupport

/// A compound RTCP datagram as a WebRTC receiver reads it. What parses is written again where there is a writer:
/// a Generic NACK's sequence numbers through `genericNACK` must name the same set, and a REMB's bitrate through
/// `receiverEstimatedMaximumBitrate` must come back no higher, a transport-wide feedback message read back the same. The input's 16-bit words are also a loss list for
/// the NACK packer, which must name exactly that set. Nothing may trap.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRTCP(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    let lost = stride(from: 0, to: input.count - 1, by: 2).map { UInt16(input[$0]) << 8 | UInt16(input[$0 + 1]) }
    checkNACKRoundTrip(lost)
    guard let packets = try? RTCPPacketSummary.parseCompound(input) else { return 0 }
    precondition(packets.count <= RTCPPacketSummary.maximumPackets, "more packets than the limit")
    for packet in packets {
        switch packet {
        case .genericNACK(_, _, let entries):
            checkNACKRoundTrip(entries.flatMap(\.sequenceNumbers))
        case .receiverEstimatedMaximumBitrate(let sender, let bitrate, let ssrcs):
            let bytes = RTCPTransportFeedback.receiverEstimatedMaximumBitrate(senderSSRC: sender, bitrate: bitrate, mediaSSRCs: ssrcs)
            guard case .receiverEstimatedMaximumBitrate(sender, let decoded, ssrcs)? = try? RTCPPacketSummary.parseCompound(bytes).last,
                  decoded <= bitrate
            else { preconditionFailure("REMB did not come back") }
        case .transportWideFeedback(let feedback):
            guard feedback.statusCount > 0,
                  case .transportWideFeedback(feedback)? = try? RTCPPacketSummary.parseCompound(RTCPTransportFeedback.transportWide(feedback)).last
            else { preconditionFailure("transport-wide feedback did not come back") }
        default:
            break
        }
    }
    return 0
}

/// Packs `lost` into NACK datagrams, parses them, and checks they name exactly the lost set.
private func checkNACKRoundTrip(_ lost: [UInt16]) {
    let datagrams = RTCPTransportFeedback.genericNACK(senderSSRC: 1, mediaSSRC: 2, lost: lost, maximumEntriesPerPacket: 7)
    var named: [UInt16] = []
    for datagram in datagrams {
        guard case .genericNACK(1, 2, let entries)? = try? RTCPPacketSummary.parseCompound(datagram).last else {
            preconditionFailure("our own NACK does not parse")
        }
        precondition(entries.count <= 7, "more entries than asked for")
        named += entries.flatMap(\.sequenceNumbers)
    }
    precondition(Set(named) == Set(lost) && named.count == Set(lost).count, "NACK entries name another set")
}

@_cdecl("FuzzRTCP_main")
public func main(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runFuzzer(argc, argv, fuzzRTCP)
}
