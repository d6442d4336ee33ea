import Bitstream
import FuzzSupport

/// SEI payload parsing for both codecs (recovery point, display orientation; everything else skipped by size).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSEI(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    guard let selector = input.first else { return 0 }
    let messages = SEIMessages(codec: selector & 1 == 0 ? .h264 : .h265, payload: input.dropFirst())
    if let orientation = messages.displayOrientation ?? nil {
        precondition((0...65535).contains(orientation.anticlockwiseRotation), "rotation is 16 bits")
    }
    return 0
}

@_cdecl("FuzzSEI_main")
public func main(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runFuzzer(argc, argv, fuzzSEI)
}
