import Bitstream
import FuzzSupport

/// Splitter + assembler on arbitrary bytes, cut into chunks whose sizes the input chooses: no crash, no hang,
/// every byte accounted for, no access unit over the limit.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAnnexB(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    guard let control = input.first else { return 0 }
    let stream = input.dropFirst()
    let codec: VideoCodec? = control & 3 == 0 ? nil : (control & 3 == 1 ? .h264 : .h265)
    let chunk = Int(control >> 2) + 1
    var splitter = AnnexBSplitter(maximumNALUnitSize: 4096)
    var assembler = AccessUnitAssembler(codec: codec, maximumAccessUnitSize: 8192)
    var nalBytes = 0
    func handle(_ event: AssemblerEvent) {
        if case .accessUnit(let unit) = event { precondition(unit.data.count <= 8192, "access unit over the limit") }
    }
    var offset = stream.startIndex
    while offset < stream.endIndex {
        let end = min(offset + chunk, stream.endIndex)
        splitter.append(stream[offset..<end]) { unit in
            nalBytes += unit.bytes.count
            assembler.push(unit, handle)
        }
        offset = end
    }
    splitter.flush { unit in
        nalBytes += unit.bytes.count
        assembler.push(unit, handle)
    }
    assembler.endAccessUnit(handle)
    precondition(nalBytes <= stream.count, "more NAL bytes out than stream bytes in")
    return 0
}

@_cdecl("FuzzAnnexB_main")
public func main(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runFuzzer(argc, argv, fuzzAnnexB)
}
