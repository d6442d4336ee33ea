import Bitstream

/// Whether a whole access unit goes to the decoder: the first question `DecodeSession.decode` asks of one not
/// decoded in parts. Pure; the session counts and logs what it answers.
enum AccessUnitAdmission: Equatable {
    /// Larger than max_width × max_height: refused before any decoder sees it (counted as too large).
    case tooLarge(width: Int, height: Int)
    /// Nothing to decode: no slice and no end of sequence (the delimiter a sender writes after its last frame,
    /// parameter sets before a disconnect); libavcodec's H.264 decoder would call such a packet an error ("no
    /// frame!"). `pictureLost`: rtp:// lost data inside it, so its picture never came (counted as lost).
    case nothingToDecode(pictureLost: Bool)
    case decode

    /// `lostWithin`: data was lost inside this access unit (rtp://).
    init(_ unit: AccessUnit, maxWidth: Int, maxHeight: Int, lostWithin: Bool) {
        if let format = unit.format, format.width > maxWidth || format.height > maxHeight {
            self = .tooLarge(width: format.width, height: format.height)
        } else if unit.hasPicture || unit.nalUnitTypes.contains(where: { Self.endsSequence($0, unit.codec) }) {
            // An end of sequence goes to the decoder even alone: it changes how the next random-access picture is
            // decoded.
            self = .decode
        } else {
            self = .nothingToDecode(pictureLost: lostWithin)
        }
    }

    private static func endsSequence(_ type: UInt8, _ codec: VideoCodec) -> Bool {
        switch codec {
        case .h264: H264NALUnitType(rawValue: type).role == .endsAccessUnit
        case .h265: H265NALUnitType(rawValue: type).role == .endsAccessUnit
        }
    }
}
