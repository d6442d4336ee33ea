/// What receiving one parameter set NAL unit did to the store.
public enum ParameterSetUpdate: Sendable, Equatable {
    /// Byte-identical to the stored set with that id: no parse, no event, no work.
    case unchanged
    /// A set seen for the first time, or replacing one with different content.
    case updated(ParameterSetEvent)
    /// Unparsable or out of range; the store is untouched.
    case rejected(kind: ParameterSetKind, BitstreamError)
}

/// A new or changed parameter set, and what it did to the sets that depend on it.
public struct ParameterSetEvent: Sendable, Equatable {
    public var codec: VideoCodec
    public var kind: ParameterSetKind
    public var id: Int
    /// Nil for a set not seen before; otherwise what changed (empty when only fields outside
    /// `SequenceFormat` changed, e.g. a PPS's content).
    public var changes: FormatChanges?
    /// The sequence format, for an SPS.
    public var format: SequenceFormat?
    /// For a PPS: the SPS it refers to; for an H.265 SPS: its VPS.
    public var referencedId: Int?
    /// Sets dropped because they depended on the replaced one (H.265 only, as FFmpeg's decoder does).
    public var invalidated: [ParameterSetReference] = []

    public var isChange: Bool { changes != nil }
}

public struct ParameterSetReference: Sendable, Hashable {
    public var kind: ParameterSetKind
    public var id: Int
    public init(kind: ParameterSetKind, id: Int) {
        self.kind = kind
        self.id = id
    }
}

/// A stored parameter set: the parsed value and the NAL unit bytes it came from (header included, escaped).
public struct StoredParameterSet<Value: Sendable>: Sendable {
    public var nalUnit: [UInt8]
    public var value: Value
}

/// Parameter sets by id, for one stream. Identical repeats are detected by comparing bytes before any parsing;
/// a changed SPS reports which aspects of the format changed. For H.265, replacing a VPS drops the SPSs that use
/// it and replacing an SPS drops the PPSs that use it (FFmpeg's HEVC decoder does the same); for H.264 a PPS
/// outlives a change of its SPS (FFmpeg's H.264 decoder keeps it too, and re-reads it against the new SPS).
public struct ParameterSetStore: Sendable {
    public private(set) var h264SPS = [StoredParameterSet<H264SequenceParameterSet>?](repeating: nil, count: 32)
    public private(set) var h264PPS = [StoredParameterSet<H264PictureParameterSet>?](repeating: nil, count: 256)
    public private(set) var h265VPS = [StoredParameterSet<H265VideoParameterSet>?](repeating: nil, count: 16)
    public private(set) var h265SPS = [StoredParameterSet<H265SequenceParameterSet>?](repeating: nil, count: 16)
    public private(set) var h265PPS = [StoredParameterSet<H265PictureParameterSet>?](repeating: nil, count: 64)

    /// Formats of H.265 SPSs dropped with their VPS, so that the SPS re-sent after the VPS still reports what
    /// changed rather than looking new.
    private var droppedH265Formats = [SequenceFormat?](repeating: nil, count: 16)

    public init() {}

    /// Receives an H.264 SPS (type 7) or PPS (type 8) NAL unit (header included).
    public mutating func receiveH264(_ unit: ArraySlice<UInt8>) -> ParameterSetUpdate {
        let payload = unit.dropFirst()
        switch H264NALUnitHeader(byte: unit.first ?? 0).type {
        case .sps:
            var peek = BitReader(payload)
            peek.skip(24)
            let id = Int(peek.readUE())
            if !peek.hasError, id < 32, let stored = h264SPS[id], stored.nalUnit.elementsEqual(unit) { return .unchanged }
            let sps: H264SequenceParameterSet
            do { sps = try H264SequenceParameterSet(payload: payload) } catch { return .rejected(kind: .sps, error) }
            let previous = h264SPS[sps.id]
            h264SPS[sps.id] = StoredParameterSet(nalUnit: Array(unit), value: sps)
            return .updated(ParameterSetEvent(
                codec: .h264, kind: .sps, id: sps.id,
                changes: previous.map { $0.value.format.changes(to: sps.format) }, format: sps.format))
        case .pps:
            var peek = BitReader(payload)
            let id = Int(peek.readUE())
            if !peek.hasError, id < 256, let stored = h264PPS[id], stored.nalUnit.elementsEqual(unit) { return .unchanged }
            let pps: H264PictureParameterSet
            do { pps = try H264PictureParameterSet(payload: payload) } catch { return .rejected(kind: .pps, error) }
            let previous = h264PPS[pps.id]
            h264PPS[pps.id] = StoredParameterSet(nalUnit: Array(unit), value: pps)
            return .updated(ParameterSetEvent(
                codec: .h264, kind: .pps, id: pps.id, changes: previous.map { _ in [] }, referencedId: pps.spsId))
        default:
            preconditionFailure("receiveH264 takes SPS and PPS NAL units only")
        }
    }

    /// Whether `unit` (header included) is a parameter set this store already holds byte for byte: sending it
    /// again changes nothing. False for any other NAL unit.
    public func holds(_ unit: ArraySlice<UInt8>, codec: VideoCodec) -> Bool {
        guard let first = unit.first else { return false }
        switch codec {
        case .h264:
            switch H264NALUnitHeader(byte: first).type {
            case .sps: return h264SPS.contains { $0?.nalUnit.elementsEqual(unit) == true }
            case .pps: return h264PPS.contains { $0?.nalUnit.elementsEqual(unit) == true }
            default: return false
            }
        case .h265:
            switch (first >> 1) & 0x3f {
            case 32: return h265VPS.contains { $0?.nalUnit.elementsEqual(unit) == true }
            case 33: return h265SPS.contains { $0?.nalUnit.elementsEqual(unit) == true }
            case 34: return h265PPS.contains { $0?.nalUnit.elementsEqual(unit) == true }
            default: return false
            }
        }
    }

    /// Receives an H.265 VPS (32), SPS (33) or PPS (34) NAL unit (header included).
    public mutating func receiveH265(_ unit: ArraySlice<UInt8>) -> ParameterSetUpdate {
        let payload = unit.dropFirst(2)
        let type = H265NALUnitHeader(firstByte: unit.first ?? 0, secondByte: unit.dropFirst().first ?? 0).type
        switch type {
        case .vps:
            let id = Int((payload.first ?? 0) >> 4)
            if let stored = h265VPS[id], stored.nalUnit.elementsEqual(unit) { return .unchanged }
            let vps: H265VideoParameterSet
            do { vps = try H265VideoParameterSet(payload: payload) } catch { return .rejected(kind: .vps, error) }
            let previous = h265VPS[id]
            h265VPS[id] = StoredParameterSet(nalUnit: Array(unit), value: vps)
            var event = ParameterSetEvent(codec: .h265, kind: .vps, id: id, changes: previous.map { _ in [] })
            if previous != nil {
                for spsId in h265SPS.indices where h265SPS[spsId]?.value.vpsId == id {
                    event.invalidated += removeH265SPS(spsId)
                }
            }
            return .updated(event)
        case .sps:
            let sps: H265SequenceParameterSet
            // The SPS id sits after profile_tier_level, so a repeat is recognised by its bytes among stored SPSs.
            if h265SPS.contains(where: { $0?.nalUnit.elementsEqual(unit) == true }) { return .unchanged }
            do { sps = try H265SequenceParameterSet(payload: payload) } catch { return .rejected(kind: .sps, error) }
            var format = sps.format
            if format.frameRate == nil, let vps = h265VPS[sps.vpsId] { format.frameRate = vps.value.frameRate }
            let previous = h265SPS[sps.id]
            let previousFormat = previous?.value.format ?? droppedH265Formats[sps.id]
            droppedH265Formats[sps.id] = nil
            var event = ParameterSetEvent(
                codec: .h265, kind: .sps, id: sps.id,
                changes: previousFormat.map { $0.changes(to: sps.format) }, format: format,
                referencedId: sps.vpsId)
            if previous != nil { event.invalidated = removeH265SPS(sps.id).filter { $0.kind == .pps } }
            h265SPS[sps.id] = StoredParameterSet(nalUnit: Array(unit), value: sps)
            return .updated(event)
        case .pps:
            var peek = BitReader(payload)
            let id = Int(peek.readUE())
            if !peek.hasError, id < 64, let stored = h265PPS[id], stored.nalUnit.elementsEqual(unit) { return .unchanged }
            let pps: H265PictureParameterSet
            do { pps = try H265PictureParameterSet(payload: payload) } catch { return .rejected(kind: .pps, error) }
            let previous = h265PPS[pps.id]
            h265PPS[pps.id] = StoredParameterSet(nalUnit: Array(unit), value: pps)
            return .updated(ParameterSetEvent(
                codec: .h265, kind: .pps, id: pps.id, changes: previous.map { _ in [] }, referencedId: pps.spsId))
        default:
            preconditionFailure("receiveH265 takes VPS, SPS and PPS NAL units only")
        }
    }

    private mutating func removeH265SPS(_ id: Int) -> [ParameterSetReference] {
        var removed = [ParameterSetReference(kind: .sps, id: id)]
        droppedH265Formats[id] = h265SPS[id]?.value.format
        h265SPS[id] = nil
        for ppsId in h265PPS.indices where h265PPS[ppsId]?.value.spsId == id {
            h265PPS[ppsId] = nil
            removed.append(ParameterSetReference(kind: .pps, id: ppsId))
        }
        return removed
    }

    /// The parameter sets a picture using PPS `ppsId` activates, as one Annex B buffer (4-byte start codes,
    /// VPS first): what a decoder is opened and primed with. Nil when any of them is missing.
    public func annexBParameterSets(codec: VideoCodec, ppsId: Int) -> [UInt8]? {
        var units: [[UInt8]] = []
        switch codec {
        case .h264:
            guard let pps = h264PPS[ppsId], let sps = h264SPS[pps.value.spsId] else { return nil }
            units = [sps.nalUnit, pps.nalUnit]
        case .h265:
            guard ppsId < 64, let pps = h265PPS[ppsId], let sps = h265SPS[pps.value.spsId],
                  let vps = h265VPS[sps.value.vpsId] else { return nil }
            units = [vps.nalUnit, sps.nalUnit, pps.nalUnit]
        }
        var bytes: [UInt8] = []
        for unit in units { bytes += [0, 0, 0, 1] + unit }
        return bytes
    }

    /// The sequence format a picture using PPS `ppsId` would have.
    public func format(codec: VideoCodec, ppsId: Int) -> SequenceFormat? {
        switch codec {
        case .h264:
            guard ppsId < 256, let pps = h264PPS[ppsId] else { return nil }
            return h264SPS[pps.value.spsId]?.value.format
        case .h265:
            guard ppsId < 64, let pps = h265PPS[ppsId], let sps = h265SPS[pps.value.spsId] else { return nil }
            var format = sps.value.format
            if format.frameRate == nil, let vps = h265VPS[sps.value.vpsId] { format.frameRate = vps.value.frameRate }
            return format
        }
    }
}

extension AccessUnitAssembler {
    /// Whether `unit` is a parameter set already held byte for byte, arriving after a slice of the picture in
    /// progress. By the standard's rules it would begin a new access unit (H.264 §7.4.1.2.3, H.265 §7.4.2.4.4),
    /// cutting the picture in two; but RTP senders repeat them inside a picture (GStreamer's rtph264pay with
    /// config-interval puts SPS and PPS before every IDR slice), where the RTP timestamp and marker say where
    /// the access unit ends. Such a repeat changes nothing and is skipped there.
    public func repeatsParameterSetWithinPicture(_ unit: NALUnit) -> Bool {
        guard slicesInProgress > 0, let codec else { return false }
        return store.holds(unit.bytes, codec: codec)
    }
}
