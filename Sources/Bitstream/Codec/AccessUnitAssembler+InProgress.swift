/// The access unit in progress, as far as it has arrived: what the decode thread asks while it decodes a picture
/// slice by slice (Pipeline's DecodeSession+Parts.swift), and whether the next NAL unit's first bytes close it.
extension AccessUnitAssembler {
    /// Slices taken into the access unit in progress: growing means the last NAL unit was a slice it accepted.
    public var slicesInProgress: Int { sliceCount }

    /// H.264: first_mb_in_slice of the last slice taken into the access unit in progress.
    public var firstMacroblockOfLastSlice: Int? { codec == .h264 && sliceCount > 0 ? lastFirstMb : nil }

    /// The access unit in progress so far, Annex B as `AccessUnit.data` will hold it (empty while an oversized
    /// one is being dropped). A view of the assembler's buffer: look, then let go before the next `push`.
    public var bytesInProgress: ArraySlice<UInt8> { discardingOversized ? [] : data[...] }

    /// The picture in progress can be decoded slice by slice, each slice as it arrives (decided at its first
    /// slice: `ParameterSetStore.decodesInParts`).
    public var pictureInProgressDecodesInParts: Bool { sliceCount > 0 && decodesInParts && !discardingOversized }

    /// What the access unit in progress will say about its picture once complete, as far as its NAL units so far
    /// tell; no data or NAL unit types (see `bytesInProgress`). Nil before its first slice.
    public mutating func pictureInProgress() -> AccessUnit? {
        guard sliceCount > 0, codec != nil else { return nil }
        return describe(data: [], nalUnitTypes: [], end: .explicit)
    }

    /// Whether a NAL unit beginning with `prefix` (its first bytes, header included, possibly not all of it)
    /// starts a new access unit, judged by the same rules as `push` without changing anything: true only when
    /// the prefix is long enough to tell and a picture is in progress. Lets the caller close the access unit as
    /// soon as the next one's first bytes arrive, instead of when its first NAL unit is complete.
    public func startsAccessUnit(_ prefix: ArraySlice<UInt8>) -> Bool {
        guard sliceCount > 0, let codec, let first = prefix.first else { return false }
        switch codec {
        case .h264:
            let header = H264NALUnitHeader(byte: first)
            if header.forbiddenZeroBit { return false }
            switch header.type.role {
            case .beginsAccessUnit:
                return true
            case .slice:
                guard let last = lastH264Slice else { return false }
                let store = self.store
                // A prefix too short for the whole slice header throws (truncated): not yet known.
                guard let slice = try? H264SliceHeader(
                    header: header, payload: prefix.dropFirst(),
                    pps: { store.h264PPS[$0]?.value }, sps: { store.h264SPS[$0]?.value }) else { return false }
                return slice.startsNewPicture(after: last)
            case .endsAccessUnit, .withinAccessUnit:
                return false
            }
        case .h265:
            guard prefix.count >= 3 else { return false }
            let header = H265NALUnitHeader(firstByte: first, secondByte: prefix[prefix.startIndex + 1])
            if header.forbiddenZeroBit || header.temporalIdPlus1 == 0 || header.layerId > 0 { return false }
            switch header.type.role {
            case .beginsAccessUnit: return true
            case .slice: return prefix[prefix.startIndex + 2] & 0x80 != 0  // first_slice_segment_in_pic_flag
            case .endsAccessUnit, .withinAccessUnit: return false
            }
        }
    }
}
