/// Why an access unit may be decoded without earlier pictures.
public enum RandomAccessKind: String, Sendable, Hashable {
    /// H.264 IDR picture or H.265 IDR_W_RADL / IDR_N_LP.
    case idr
    /// H.265 clean random access picture.
    case cra
    /// H.265 broken link access picture.
    case bla
    /// A recovery point SEI: decoding may start here (intra refresh streams with no IDR at all).
    case recoveryPoint = "recovery_point"
}

/// What ended an access unit.
public enum AccessUnitEnd: String, Sendable, Hashable {
    /// The first NAL unit of the next access unit arrived (7.4.1.2.3 / 7.4.2.4.4).
    case nextAccessUnit = "next_au"
    /// An end-of-sequence or end-of-stream NAL unit closed it.
    case endOfSequence = "end_of_sequence"
    /// The caller said so: RTP marker bit, transport idle, or end of input.
    case explicit
}

/// One access unit: all NAL units of one coded picture (plus the parameter sets and SEI sent with it).
public struct AccessUnit: Sendable {
    public var codec: VideoCodec
    /// The NAL units in Annex B form, each behind a 4-byte start code: what a decoder is fed as one packet.
    /// Ownership: the value owns it (copy-on-write); the assembler reuses its buffer only when the caller did not
    /// keep the access unit.
    public var data: [UInt8]
    /// `nal_unit_type` of each NAL unit, in order.
    public var nalUnitTypes: [UInt8]
    /// Stream offset of the first NAL unit's start code (its `zero_byte` included).
    public var streamOffset: Int64
    /// Number of slices (slice segments for H.265) of the primary picture.
    public var sliceCount: Int
    /// Set when the access unit can start decoding.
    public var randomAccess: RandomAccessKind?
    /// Parameter sets the picture activates (from its first slice); nil when it has no slice or they are missing.
    public var ppsId: Int?
    public var format: SequenceFormat?
    /// The VPS/SPS/PPS the picture activates, in Annex B form, as they were when the access unit was complete
    /// (a later parameter set with the same id does not change it). Nil when they are missing.
    public var parameterSets: [UInt8]?
    /// From a display orientation SEI in this access unit; `.some(nil)` cancels an earlier one.
    public var displayOrientation: DisplayOrientation??
    public var end: AccessUnitEnd
    /// Its first slice is the picture's first (first_mb_in_slice 0, first_slice_segment_in_pic_flag): nothing of
    /// the picture came before it. A keyframe after lost data is only whole if this holds.
    public var beginsWithFirstSlice = false
    /// Later pictures may refer to it (H.264 nal_ref_idc ≠ 0; H.265 not a sub-layer non-reference picture).
    public var isReference = false
    /// With a recovery point SEI: the pictures are correct `recoveryFrameCount` frames (H.264) or POC units
    /// (H.265) after this one.
    public var recoveryFrameCount: Int?
    /// H.264: the first slice's frame_num and its modulus (MaxFrameNum): a gap tells reference pictures went missing.
    public var frameNum: (value: Int, modulus: Int)?

    public init(
        codec: VideoCodec, data: [UInt8], nalUnitTypes: [UInt8], streamOffset: Int64, sliceCount: Int,
        randomAccess: RandomAccessKind?, ppsId: Int?, format: SequenceFormat?, parameterSets: [UInt8]?,
        displayOrientation: DisplayOrientation??, end: AccessUnitEnd, beginsWithFirstSlice: Bool = false,
        isReference: Bool = false, recoveryFrameCount: Int? = nil, frameNum: (value: Int, modulus: Int)? = nil
    ) {
        self.codec = codec
        self.data = data
        self.nalUnitTypes = nalUnitTypes
        self.streamOffset = streamOffset
        self.sliceCount = sliceCount
        self.randomAccess = randomAccess
        self.ppsId = ppsId
        self.format = format
        self.parameterSets = parameterSets
        self.displayOrientation = displayOrientation
        self.end = end
        self.beginsWithFirstSlice = beginsWithFirstSlice
        self.isReference = isReference
        self.recoveryFrameCount = recoveryFrameCount
        self.frameNum = frameNum
    }

    public var isKeyframe: Bool { randomAccess != nil }
    public var hasPicture: Bool { sliceCount > 0 }
}
