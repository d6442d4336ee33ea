import Bitstream
import FuzzSupport

/// H.265 VPS, SPS and PPS parsers on arbitrary payloads (after the two-byte NAL header); the first byte picks one.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzH265(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    guard let selector = input.first else { return 0 }
    let payload = input.dropFirst()
    switch selector % 3 {
    case 0:
        _ = try? H265VideoParameterSet(payload: payload)
    case 1:
        if let sps = try? H265SequenceParameterSet(payload: payload) {
            precondition(sps.format.width > 0 && sps.format.height > 0, "a parsed SPS has a picture")
        }
    default:
        _ = try? H265PictureParameterSet(payload: payload)
    }
    return 0
}

@_cdecl("FuzzH265ParameterSets_main")
public func main(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runFuzzer(argc, argv, fuzzH265)
}
