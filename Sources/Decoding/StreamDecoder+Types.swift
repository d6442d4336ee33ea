import Bitstream

/// One access unit for `StreamDecoder`, with what its policy needs to know.
public struct DecoderInput {
    public var codec: VideoCodec
    /// The access unit in Annex B form.
    public var data: [UInt8]
    /// Comes back on the frames decoded from this access unit.
    public var pts: Int64
    public var isRandomAccess: Bool
    /// The VPS/SPS/PPS the picture activates, Annex B; nil when unknown.
    public var parameterSets: [UInt8]?
    /// Frames of reordering the parameter sets imply; nil when they do not say.
    public var reorderDepth: Int?
    /// The bitstream states that depth (rather than it being inferred): low-delay decoding is then exact.
    public var reorderDepthIsSignalled: Bool
    /// What to assume when `reorderDepth` is nil: the decoded picture buffer size.
    public var decodedPictureBufferFrames: Int
    /// The access unit cannot be decoded (its slices name parameter sets that were never received).
    public var undecodable: Bool

    public init(codec: VideoCodec, data: [UInt8], pts: Int64, isRandomAccess: Bool, parameterSets: [UInt8]?,
                reorderDepth: Int?, reorderDepthIsSignalled: Bool = false, decodedPictureBufferFrames: Int = 16,
                undecodable: Bool = false) {
        self.codec = codec
        self.data = data
        self.pts = pts
        self.isRandomAccess = isRandomAccess
        self.parameterSets = parameterSets
        self.reorderDepth = reorderDepth
        self.reorderDepthIsSignalled = reorderDepthIsSignalled
        self.decodedPictureBufferFrames = decodedPictureBufferFrames
        self.undecodable = undecodable
    }
}

/// What the decoder policy did; the pipeline logs each (one line per state change) and counts them.
public enum StreamDecoderEvent: Sendable, Equatable {
    case pathSelected(String)
    /// `nanoseconds`: opening the new decoder and closing the old one (extradata parsed, threads started).
    case created(recreation: Bool, hardware: String?, lowDelay: Bool, threading: String, nanoseconds: UInt64)
    case creationFailed(DecoderError, attempt: Int)
    case decodeFailed(DecoderError, consecutive: Int)
    /// Too many consecutive failures: the decoder was torn down; decoding resumes at the next random-access point.
    case reset(consecutiveFailures: Int)
    case fellBackToSoftware(reason: String)
    /// Decoding is waiting for a random-access point (first one after start, reset or failure).
    case waitingForKeyframe
}

/// What comes out of a `decode` or `drain` call, in the order it happened: a frame, or what the decoder policy did
/// (a recreation's event comes before the new decoder's frames, a reset's before the frames drained at it).
public enum StreamDecoderOutput {
    case frame(DecodedFrame)
    case event(StreamDecoderEvent)
}

/// The decoder's public vocabulary: what it counts, where it stands, which part of an access unit a call carries.
extension StreamDecoder {
    public struct Statistics: Sendable, Equatable {
        public var creations = 0
        public var recreations = 0
        public var creationFailures = 0
        public var decodeErrors = 0
        public var resets = 0
        public var skippedAccessUnits = 0
        public var framesDecoded = 0
        public var hardwareFallbacks = 0
        public init() {}
    }

    public enum State: Sendable, Equatable {
        case idle, decoding, degraded
    }

    /// Which part of an access unit a `decode` call carries.
    public enum Part: Sendable, Equatable {
        /// The whole access unit.
        case whole
        /// H.264 slices as they arrive: the part up to and including the picture's first slice (the first part
        /// decides, as a whole access unit would, whether to open, recreate or wait for a keyframe) ...
        case first
        /// ... and each later slice.
        case next
    }
}
