/// Display orientation (SEI payload type 47 in both codecs): how to rotate/flip the decoded picture for display.
/// The receiver publishes pixels unrotated and carries this as metadata.
public struct DisplayOrientation: Sendable, Hashable {
    public var horizontalFlip: Bool
    public var verticalFlip: Bool
    /// Anticlockwise rotation in units of 2^-16 of a full turn.
    public var anticlockwiseRotation: Int
    public var rotationDegrees: Double { Double(anticlockwiseRotation) * 360 / 65536 }
}

/// Recovery point (SEI payload type 6 in both codecs): decoding may start at this picture and is correct
/// (`exactMatch`) or approximately correct after `recoveryFrameCount` frames (H.264) / POC units (H.265).
public struct RecoveryPoint: Sendable, Hashable {
    public var recoveryFrameCount: Int
    public var exactMatch: Bool
    public var brokenLink: Bool
}

/// The SEI messages a receiver acts on, parsed from one SEI NAL unit. Other payloads are skipped by size.
public struct SEIMessages: Sendable, Hashable {
    public var recoveryPoint: RecoveryPoint?
    /// `.some(nil)` when the message cancels an earlier orientation.
    public var displayOrientation: DisplayOrientation??
    /// Messages whose payload was cut short or malformed; parsing stops at the first one.
    public var malformed = false

    static let recoveryPointType = 6
    static let displayOrientationType = 47

    /// - Parameter payload: the SEI NAL unit after its header (1 byte for H.264, 2 for H.265), escaped.
    public init(codec: VideoCodec, payload: ArraySlice<UInt8>) {
        var r = BitReader(payload)
        while r.moreRBSPData() {
            guard let type = Self.readVariableLength(&r), let size = Self.readVariableLength(&r),
                  size <= payload.count else {
                malformed = true
                return
            }
            let start = r.bitsRead
            switch type {
            case Self.recoveryPointType:
                let count = codec == .h264 ? Int(r.readUE()) : Int(r.readSE())
                let exact = r.readFlag()
                let broken = r.readFlag()
                recoveryPoint = RecoveryPoint(recoveryFrameCount: count, exactMatch: exact, brokenLink: broken)
            case Self.displayOrientationType:
                if r.readFlag() {
                    displayOrientation = .some(nil)
                } else {
                    let horizontal = r.readFlag()
                    let vertical = r.readFlag()
                    let rotation = Int(r.read(16))
                    displayOrientation = .some(DisplayOrientation(
                        horizontalFlip: horizontal, verticalFlip: vertical, anticlockwiseRotation: rotation))
                }
            default:
                break
            }
            let consumed = r.bitsRead - start
            guard consumed <= size * 8 else {
                malformed = true
                return
            }
            r.skip(size * 8 - consumed)
            if r.hasError {
                malformed = true
                return
            }
        }
    }

    /// payloadType / payloadSize: a run of 0xFF bytes plus a final byte. Bounded so hostile input cannot loop.
    private static func readVariableLength(_ r: inout BitReader) -> Int? {
        var value = 0
        for _ in 0..<4096 {
            let byte = Int(r.read(8))
            if r.hasError { return nil }
            value += byte
            if byte != 0xFF { return value }
        }
        return nil
    }
}
