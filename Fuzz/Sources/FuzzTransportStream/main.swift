import Bitstream
import FuzzSupport

/// The MPEG-TS demuxer on bytes split as the input says: the first byte picks the chunk size (1 to 256), so packets
/// are also cut across appends; the video bytes then go through the Annex B splitter, as the daemon chains them.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTransportStream(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    guard let control = input.first else { return 0 }
    let chunk = Int(control) + 1
    var demuxer = TransportStreamDemuxer()
    var splitter = AnnexBSplitter(maximumNALUnitSize: 4096)
    var payloadBytes = 0
    var discardedBytes = 0
    var offset = 1
    while offset < input.count {
        let end = min(input.count, offset + chunk)
        demuxer.append(input[offset..<end]) { event in
            switch event {
            case .payload(let bytes):
                payloadBytes += bytes.count
                splitter.append(bytes) { precondition($0.bytes.count <= 4096 + 4, "NAL unit over the limit") }
            case .discarded(_, let count): discardedBytes += count
            default: break
            }
        }
        offset = end
    }
    precondition(payloadBytes + discardedBytes <= input.count, "more bytes out than in")
    return 0
}

@_cdecl("FuzzTransportStream_main")
public func main(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runFuzzer(argc, argv, fuzzTransportStream)
}
