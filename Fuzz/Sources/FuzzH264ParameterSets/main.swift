import Bitstream
import FuzzSupport

/// H.264 SPS, PPS and slice header parsers on arbitrary payloads: the first byte picks the parser. A slice header
/// is parsed against the SPS and PPS of a fixed, valid stream so that it gets past the lookups.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzH264(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    guard let selector = input.first else { return 0 }
    let payload = input.dropFirst()
    switch selector % 3 {
    case 0:
        if let sps = try? H264SequenceParameterSet(payload: payload) {
            precondition(sps.format.width > 0 && sps.format.height > 0, "a parsed SPS has a picture")
        }
    case 1:
        _ = try? H264PictureParameterSet(payload: payload)
    default:
        for type: UInt8 in [1, 5] {
            let header = H264NALUnitHeader(byte: type | 0x60)
            _ = try? H264SliceHeader(header: header, payload: payload, pps: { _ in Fixtures.pps }, sps: { _ in Fixtures.sps })
        }
    }
    return 0
}

/// x264's 320x240 High profile SPS and PPS (payloads after the NAL header).
enum Fixtures {
    // Parsed once; a fixture that stopped parsing would make every slice input stop at the lookup.
    static let sps = try! H264SequenceParameterSet(payload: [0x64, 0x00, 0x0d, 0xac, 0xd9, 0x41, 0x41, 0xfb, 0x01, 0x10, 0x00, 0x00, 0x03, 0x00, 0x10, 0x00, 0x00, 0x03, 0x03, 0xc0, 0xf1, 0x42, 0x99, 0x60][...])
    static let pps = try! H264PictureParameterSet(payload: [0xeb, 0xe3, 0xcb, 0x22, 0xc0][...])
}

@_cdecl("FuzzH264ParameterSets_main")
public func main(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runFuzzer(argc, argv, fuzzH264)
}
