import Bitstream

/// tcp:// and udp://: Annex B bytes to NAL units, and what was wrong with the bytes, as events. Owned by the
/// decode thread; the NAL units it emits are views of the splitter's carry buffer, valid until the next append.
struct AnnexBIngest {
    enum Event {
        case nalUnit(NALUnit)
        /// Bytes outside any NAL unit (garbage, or an oversized unit's) were discarded: `bytes` now, `total` so far.
        case discarded(bytes: Int64, total: Int64, inOversizedUnit: Bool)
        /// Splitter defects found in this append (`total`: so far on this stream).
        case defect(StreamDefect, count: Int, total: Int)
    }

    private var splitter: AnnexBSplitter

    init(maximumNALUnitSize: Int) {
        splitter = AnnexBSplitter(maximumNALUnitSize: maximumNALUnitSize)
    }

    /// Bytes received on this stream so far: the stream offset the next byte will have.
    var bytesIn: Int64 { splitter.statistics.bytesIn }

    /// The first bytes of the NAL unit still arriving (after its start code), if any are in: enough to tell
    /// whether it begins the next access unit.
    var unitInProgress: ArraySlice<UInt8>? { splitter.unitInProgress }

    mutating func append(_ bytes: ArraySlice<UInt8>, _ emit: (Event) -> Void) {
        let before = splitter.statistics
        splitter.append(bytes) { emit(.nalUnit($0)) }
        report(since: before, emit)
    }

    /// The end of the input: the unit in progress is complete.
    mutating func flush(_ emit: (Event) -> Void) {
        let before = splitter.statistics
        splitter.flush { emit(.nalUnit($0)) }
        report(since: before, emit)
    }

    private func report(since before: AnnexBSplitter.Statistics, _ emit: (Event) -> Void) {
        let after = splitter.statistics
        let oversized = after.oversizedNALUnits - before.oversizedNALUnits
        if oversized > 0 { emit(.defect(.oversizedNALUnit, count: oversized, total: after.oversizedNALUnits)) }
        if after.discardedBytes > before.discardedBytes {
            emit(.discarded(bytes: after.discardedBytes - before.discardedBytes, total: after.discardedBytes, inOversizedUnit: oversized > 0))
        }
        let empty = after.emptyNALUnits - before.emptyNALUnits
        if empty > 0 { emit(.defect(.emptyNALUnit, count: empty, total: after.emptyNALUnits)) }
    }
}
