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
