/// Something the assembler reports while it works.
public enum AssemblerEvent: Sendable {
    /// The codec was recognised from the first parameter set (see `CodecDetector`).
    case codecDetected(VideoCodec)
    /// A new or changed parameter set. Identical repeats produce no event.
    case parameterSet(ParameterSetEvent)
    /// A complete access unit.
    case accessUnit(AccessUnit)
    /// Input that was dropped or could not be interpreted; already counted in `statistics`.
    case problem(AssemblerProblem)
}

/// A defect in the input: what was wrong and what the assembler did about it.
public struct AssemblerProblem: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, CaseIterable {
        case forbiddenBit = "forbidden_bit"
        case beforeCodecDetected = "before_codec_detected"
        case parameterSetRejected = "parameter_set_rejected"
        case sliceHeader = "slice_header"
        case oversizedAccessUnit = "oversized_access_unit"
        case prematureEnd = "premature_end"
    }
    public var kind: Kind
    public var streamOffset: Int64
    public var error: BitstreamError?

    public var description: String {
        "\(kind.rawValue) at byte \(streamOffset)" + (error.map { ": \($0)" } ?? "")
    }
}

/// Groups NAL units into access units by the rules of H.264 7.4.1.2.3/7.4.1.2.4 and H.265 7.4.2.4.4, keeps the
/// parameter sets, and emits each access unit the moment it is known to be complete: when the next one's first
/// NAL unit arrives, at an end-of-sequence NAL unit, or when the caller calls `endAccessUnit` (RTP marker,
/// transport idle, end of input) so no access unit waits for the next frame.
public struct AccessUnitAssembler {
    public struct Statistics: Sendable, Equatable {
        public var nalUnits = 0
        public var accessUnits = 0
        public var forbiddenBitNALUnits = 0
        public var nalUnitsBeforeCodecDetected = 0
        public var rejectedParameterSets = 0
        public var parameterSetRepeats = 0
        public var sliceHeaderErrors = 0
        public var oversizedAccessUnits = 0
        /// `endAccessUnit` was called inside a picture: the next slice continued it.
        public var prematureEnds = 0

        public init() {}
    }

    public private(set) var codec: VideoCodec?
    public private(set) var store = ParameterSetStore()
    public private(set) var statistics = Statistics()
    public let maximumAccessUnitSize: Int

    private(set) var data: [UInt8] = []
    private var nalUnitTypes: [UInt8] = []
    /// The buffers of the access unit emitted last: reused for the next one once its consumer has let go of it,
    /// so a steady stream makes no allocation per access unit.
    private var spareData: [UInt8] = []
    private var spareNALUnitTypes: [UInt8] = []
    private var streamOffset: Int64 = 0
    private(set) var sliceCount = 0
    /// The access unit's first slice is its picture's first (macroblock or CTU 0).
    private var beginsWithFirstSlice = false
    /// Some slice of the picture may be referenced by later pictures.
    private var isReference = false
    private var recoveryFrameCount: Int?
    private var randomAccess: RandomAccessKind?
    private var ppsId: Int?
    private var displayOrientation: DisplayOrientation??
    private(set) var discardingOversized = false
    private(set) var lastH264Slice: H264SliceHeader?
    private var frameNum: (value: Int, modulus: Int)?
    private(set) var lastFirstMb = -1
    private var endedExplicitlyInPicture = false
    /// See `pictureInProgressDecodesInParts`.
    private(set) var decodesInParts = false
    /// Annex B parameter sets of the last PPS id asked for; dropped whenever any parameter set changes.
    private var cachedParameterSets: (ppsId: Int, bytes: [UInt8]?)?

    /// - Parameters:
    ///   - codec: the stream's codec, or nil to detect it from the first parameter set.
    ///   - maximumAccessUnitSize: larger access units are dropped whole and counted.
    public init(codec: VideoCodec? = nil, maximumAccessUnitSize: Int = 64 << 20) {
        self.codec = codec
        self.maximumAccessUnitSize = maximumAccessUnitSize
    }

    /// Takes the next NAL unit of the stream.
    public mutating func push(_ unit: NALUnit, _ emit: (AssemblerEvent) -> Void) {
        statistics.nalUnits += 1
        if codec == nil {
            guard let detected = CodecDetector.codec(ofFirstParameterSet: unit.bytes) else {
                statistics.nalUnitsBeforeCodecDetected += 1
                emit(.problem(AssemblerProblem(kind: .beforeCodecDetected, streamOffset: unit.startCodeOffset)))
                return
            }
            codec = detected
            emit(.codecDetected(detected))
        }
        switch codec! {
        case .h264: pushH264(unit, emit)
        case .h265: pushH265(unit, emit)
        }
    }

    /// The caller knows the access unit in progress is complete (RTP marker, transport idle, end of input).
    public mutating func endAccessUnit(_ emit: (AssemblerEvent) -> Void) {
        if sliceCount > 0 { endedExplicitlyInPicture = true }
        finishAccessUnit(.explicit, emit)
    }

    // MARK: - H.264

    private mutating func pushH264(_ unit: NALUnit, _ emit: (AssemblerEvent) -> Void) {
        let header = H264NALUnitHeader(byte: unit.bytes.first!)
        if header.forbiddenZeroBit {
            reportForbiddenBit(unit, emit)
            return
        }
        let type = header.type
        switch type.role {
        case .beginsAccessUnit:
            if sliceCount > 0 { finishAccessUnit(.nextAccessUnit, emit) }
            append(unit, type: type.rawValue)
            if type == .sps || type == .pps {
                handle(store.receiveH264(unit.bytes), unit, emit)
            } else if type == .sei {
                noteSEI(SEIMessages(codec: .h264, payload: unit.bytes.dropFirst()))
            }
        case .slice:
            let payload = unit.bytes.dropFirst()
            var startsPicture: Bool
            var slice: H264SliceHeader?
            do {
                let store = self.store
                slice = try H264SliceHeader(
                    header: header, payload: payload,
                    pps: { store.h264PPS[$0]?.value }, sps: { store.h264SPS[$0]?.value })
                startsPicture = lastH264Slice.map { slice!.startsNewPicture(after: $0) } ?? true
            } catch {
                statistics.sliceHeaderErrors += 1
                emit(.problem(AssemblerProblem(kind: .sliceHeader, streamOffset: unit.startCodeOffset, error: error)))
                // Without its parameter sets, fall back to FFmpeg's parser rule: a slice that does not start
                // after the previous one begins a new picture.
                var reader = BitReader(payload)
                let firstMb = Int(reader.readUE())
                startsPicture = firstMb <= lastFirstMb
                lastFirstMb = firstMb
            }
            if let slice { lastFirstMb = slice.firstMbInSlice }
            startPictureIfNeeded(startsPicture, unit, emit)
            if sliceCount == 0 { beginsWithFirstSlice = lastFirstMb == 0 }
            append(unit, type: type.rawValue)
            if let slice {
                if sliceCount == 0 {
                    ppsId = slice.ppsId
                    frameNum = store.h264PPS[slice.ppsId].flatMap { store.h264SPS[$0.value.spsId] }
                        .map { (slice.frameNum, 1 << $0.value.log2MaxFrameNum) }
                    decodesInParts = store.decodesInParts(firstSlice: slice, type: type)
                }
                if slice.redundantPicCnt == 0 { lastH264Slice = slice }
            } else {
                decodesInParts = false
            }
            if type == .dataPartitionA { decodesInParts = false }
            if type == .idrSlice { randomAccess = .idr }
            if header.nalRefIdc != 0 { isReference = true }
            sliceCount += 1
        case .endsAccessUnit:
            append(unit, type: type.rawValue)
            lastH264Slice = nil
            finishAccessUnit(.endOfSequence, emit)
        case .withinAccessUnit:
            // Partitions B/C, filler, SPS extension, auxiliary and extension slices: part of the current unit.
            append(unit, type: type.rawValue)
        }
    }

    // MARK: - H.265

    private mutating func pushH265(_ unit: NALUnit, _ emit: (AssemblerEvent) -> Void) {
        let bytes = unit.bytes
        guard bytes.count >= 2 else {
            reportForbiddenBit(unit, emit)
            return
        }
        let header = H265NALUnitHeader(firstByte: bytes.first!, secondByte: bytes[bytes.startIndex + 1])
        if header.forbiddenZeroBit || header.temporalIdPlus1 == 0 {
            reportForbiddenBit(unit, emit)
            return
        }
        let type = header.type
        if header.layerId > 0 {
            // Enhancement layers never start an access unit of the base layer.
            append(unit, type: type.rawValue)
            return
        }
        switch type.role {
        case .beginsAccessUnit:
            if sliceCount > 0 { finishAccessUnit(.nextAccessUnit, emit) }
            append(unit, type: type.rawValue)
            if (32...34).contains(type.rawValue) {
                handle(store.receiveH265(bytes), unit, emit)
            } else if type == .prefixSEI {
                noteSEI(SEIMessages(codec: .h265, payload: bytes.dropFirst(2)))
            }
        case .slice:
            var reader = BitReader(bytes.dropFirst(2))
            let firstSliceSegment = reader.readFlag()
            if reader.hasError {
                statistics.sliceHeaderErrors += 1
                emit(.problem(AssemblerProblem(
                    kind: .sliceHeader, streamOffset: unit.startCodeOffset,
                    error: .truncated(element: "first_slice_segment_in_pic_flag"))))
            }
            startPictureIfNeeded(firstSliceSegment, unit, emit)
            if sliceCount == 0 { beginsWithFirstSlice = firstSliceSegment && !reader.hasError }
            append(unit, type: type.rawValue)
            if type.isDefinedSlice && sliceCount == 0 {
                if type.isIRAP { _ = reader.readFlag() }  // no_output_of_prior_pics_flag
                let pps = reader.readUE()
                if !reader.hasError && pps < 64 { ppsId = Int(pps) }
            }
            if type.isIDR {
                randomAccess = .idr
            } else if type == .cra {
                randomAccess = .cra
            } else if type.isIRAP && type.rawValue <= 18 {
                randomAccess = .bla
            }
            // Sub-layer non-reference pictures are the even types below 16 (TRAIL_N, TSA_N, RASL_N, …).
            if type.rawValue >= 16 || type.rawValue % 2 == 1 { isReference = true }
            sliceCount += 1
        case .endsAccessUnit:
            append(unit, type: type.rawValue)
            finishAccessUnit(.endOfSequence, emit)
        case .withinAccessUnit:
            // Filler data, suffix SEI, reserved and unspecified types: part of the current unit.
            append(unit, type: type.rawValue)
        }
    }

    // MARK: - Common

    private mutating func startPictureIfNeeded(_ startsPicture: Bool, _ unit: NALUnit, _ emit: (AssemblerEvent) -> Void) {
        if startsPicture {
            if sliceCount > 0 { finishAccessUnit(.nextAccessUnit, emit) }
        } else if endedExplicitlyInPicture && sliceCount == 0 {
            statistics.prematureEnds += 1
            emit(.problem(AssemblerProblem(kind: .prematureEnd, streamOffset: unit.startCodeOffset)))
        }
        endedExplicitlyInPicture = false
    }

    private mutating func handle(_ update: ParameterSetUpdate, _ unit: NALUnit, _ emit: (AssemblerEvent) -> Void) {
        switch update {
        case .unchanged:
            statistics.parameterSetRepeats += 1
        case .updated(let event):
            cachedParameterSets = nil
            emit(.parameterSet(event))
        case .rejected(_, let error):
            statistics.rejectedParameterSets += 1
            emit(.problem(AssemblerProblem(kind: .parameterSetRejected, streamOffset: unit.startCodeOffset, error: error)))
        }
    }

    private mutating func noteSEI(_ messages: SEIMessages) {
        if let recovery = messages.recoveryPoint, randomAccess == nil {
            randomAccess = .recoveryPoint
            recoveryFrameCount = recovery.recoveryFrameCount
        }
        if let orientation = messages.displayOrientation { displayOrientation = orientation }
    }

    private mutating func reportForbiddenBit(_ unit: NALUnit, _ emit: (AssemblerEvent) -> Void) {
        statistics.forbiddenBitNALUnits += 1
        emit(.problem(AssemblerProblem(
            kind: .forbiddenBit, streamOffset: unit.startCodeOffset, error: .invalidNALUnitHeader)))
    }

    private mutating func append(_ unit: NALUnit, type: UInt8) {
        if nalUnitTypes.isEmpty { streamOffset = unit.startCodeOffset }
        nalUnitTypes.append(type)
        if discardingOversized { return }
        if data.count + 4 + unit.bytes.count > maximumAccessUnitSize {
            discardingOversized = true
            data.removeAll(keepingCapacity: true)
            return
        }
        // A 4-byte start code, byte by byte: an array literal here would allocate for every NAL unit.
        data.append(0)
        data.append(0)
        data.append(0)
        data.append(1)
        data.append(contentsOf: unit.bytes)
    }

    private mutating func finishAccessUnit(_ end: AccessUnitEnd, _ emit: (AssemblerEvent) -> Void) {
        guard !nalUnitTypes.isEmpty else { return }
        if discardingOversized {
            statistics.oversizedAccessUnits += 1
            emit(.problem(AssemblerProblem(kind: .oversizedAccessUnit, streamOffset: streamOffset)))
        } else {
            statistics.accessUnits += 1
            emit(.accessUnit(describe(data: data, nalUnitTypes: nalUnitTypes, end: end)))
        }
        swap(&data, &spareData)
        swap(&nalUnitTypes, &spareNALUnitTypes)
        data.removeAll(keepingCapacity: true)
        nalUnitTypes.removeAll(keepingCapacity: true)
        sliceCount = 0
        beginsWithFirstSlice = false
        isReference = false
        recoveryFrameCount = nil
        randomAccess = nil
        ppsId = nil
        frameNum = nil
        displayOrientation = nil
        discardingOversized = false
        decodesInParts = false
    }

    mutating func describe(data: [UInt8], nalUnitTypes: [UInt8], end: AccessUnitEnd) -> AccessUnit {
        let format = ppsId.flatMap { store.format(codec: codec!, ppsId: $0) }
        var parameterSets: [UInt8]?
        if let ppsId {
            if cachedParameterSets?.ppsId != ppsId {
                cachedParameterSets = (ppsId, store.annexBParameterSets(codec: codec!, ppsId: ppsId))
            }
            parameterSets = cachedParameterSets?.bytes
        }
        return AccessUnit(
            codec: codec!, data: data, nalUnitTypes: nalUnitTypes, streamOffset: streamOffset,
            sliceCount: sliceCount, randomAccess: randomAccess, ppsId: ppsId, format: format,
            parameterSets: parameterSets, displayOrientation: displayOrientation, end: end,
            beginsWithFirstSlice: beginsWithFirstSlice, isReference: isReference,
            recoveryFrameCount: randomAccess == .recoveryPoint ? recoveryFrameCount : nil, frameNum: frameNum)
    }
}
