import Bitstream
import FuzzSupport

/// RTP parsing, RFC 3550 source validation, the reorder window and both depacketizers on a sequence of datagrams,
/// as the daemon chains them: the input is [control byte] then datagrams, each prefixed by a 2-byte big-endian
/// length. Bit 7 of the control byte bypasses the validator (the reorder buffer on its own).
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
        guard let packet = try? RTPPacket(parsing: datagram) else { continue }
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
    return 0
}

@_cdecl("FuzzRTP_main")
public func main(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runFuzzer(argc, argv, fuzzRTP)
}
