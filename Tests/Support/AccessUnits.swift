import Bitstream

/// Every access unit of a whole Annex B stream, as the daemon would assemble it.
public func accessUnits(of stream: [UInt8]) -> [AccessUnit] {
    var splitter = AnnexBSplitter()
    var assembler = AccessUnitAssembler()
    var nals: [NALUnit] = []
    splitter.append(stream) { nals.append($0) }
    splitter.flush { nals.append($0) }
    var units: [AccessUnit] = []
    for nal in nals { assembler.push(nal) { if case .accessUnit(let unit) = $0 { units.append(unit) } } }
    assembler.endAccessUnit { if case .accessUnit(let unit) = $0 { units.append(unit) } }
    return units
}
