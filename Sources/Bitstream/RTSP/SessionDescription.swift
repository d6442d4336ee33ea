/// The parts of an SDP session description (RFC 8866) an RTSP client needs for one H.264 or H.265 video stream:
/// its payload type and clock (`a=rtpmap`), its control URL (`a=control`, RFC 2326 C.1.1) and the parameter sets
/// a camera may send only here (`a=fmtp`: RFC 6184 `sprop-parameter-sets`, RFC 7798 `sprop-vps/sps/pps`).
public struct SessionDescription: Sendable, Equatable {
    public struct Video: Sendable, Equatable {
        public var codec: VideoCodec
        public var payloadType: UInt8
        public var clockRate: UInt32
        /// The media's `a=control`, as written (absolute, relative, or "*").
        public var control: String?
        /// NAL units without start codes, in the order given (VPS, SPS, PPS for H.265).
        public var parameterSets: [[UInt8]]
        /// H.264 packetization-mode (0 when absent). Mode 2 (interleaved) needs a de-interleaver.
        public var packetizationMode: Int
        /// H.265 with sprop-max-don-diff > 0: payloads carry decoding order numbers (DONL).
        public var carriesDecodingOrderNumbers: Bool
    }

    public enum ParseError: Error, Equatable, CustomStringConvertible {
        case notSDP
        /// No video media at all.
        case noVideo
        /// Video, but none in a format this daemon decodes (the encodings offered).
        case unsupportedVideo([String])

        public var description: String {
            switch self {
            case .notSDP: "the DESCRIBE answer is not an SDP session description"
            case .noVideo: "the session description has no video"
            case .unsupportedVideo(let names): "no H.264 or H.265 video in the session description (offered: \(names.joined(separator: ", ")))"
            }
        }
    }

    /// The session-level `a=control`.
    public var control: String?
    /// The first H.264 or H.265 video media.
    public var video: Video

    public init(parsing text: String) throws(ParseError) {
        let lines = text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }).map { $0.trimmingSpaces() }
        guard lines.first?.hasPrefix("v=") == true else { throw .notSDP }
        var sessionControl: String?
        // Per media section: its m= line's fields and its attributes.
        var medias: [(fields: [Substring], attributes: [(String, String)])] = []
        for line in lines {
            guard line.count >= 2, Array(line.utf8)[1] == UInt8(ascii: "=") else { continue }
            let value = String(line.dropFirst(2))
            switch line.first {
            case "m":
                medias.append((value.split(separator: " "), []))
            case "a":
                let (name, argument) = value.firstIndex(of: ":").map { (String(value[..<$0]), String(value[value.index(after: $0)...])) } ?? (value, "")
                if medias.isEmpty {
                    if name == "control" { sessionControl = argument }
                } else {
                    medias[medias.count - 1].attributes.append((name, argument))
                }
            default:
                continue
            }
        }
        control = sessionControl
        var offered: [String] = []
        var found: Video?
        search: for media in medias where media.fields.first == "video" && media.fields.count >= 4 {
            for format in media.fields.dropFirst(3).prefix(32) {
                guard let payloadType = UInt8(format), payloadType < 128 else { continue }
                let prefix = "\(payloadType) "
                guard let rtpmap = media.attributes.first(where: { $0.0 == "rtpmap" && $0.1.hasPrefix(prefix) })?.1 else {
                    Self.note("payload type \(payloadType)", in: &offered)
                    continue
                }
                let encoding = rtpmap.dropFirst(prefix.count).split(separator: "/")
                let name = encoding.first.map { String($0.prefix(32)).uppercased() } ?? ""
                let codec: VideoCodec
                switch name {
                case "H264": codec = .h264
                case "H265": codec = .h265
                default:
                    Self.note(name, in: &offered)
                    continue
                }
                // RFC 6184 and 7798 fix 90 kHz; a rate outside what any sender uses is taken for that.
                let clockRate = encoding.count > 1 ? UInt32(encoding[1]).flatMap { (1000...10_000_000).contains($0) ? $0 : nil } ?? 90000 : 90000
                let fmtp = media.attributes.first(where: { $0.0 == "fmtp" && $0.1.hasPrefix(prefix) })?.1.dropFirst(prefix.count)
                let parameters = Self.formatParameters(fmtp.map(String.init) ?? "")
                var parameterSets: [[UInt8]] = []
                let keys = codec == .h264 ? ["sprop-parameter-sets"] : ["sprop-vps", "sprop-sps", "sprop-pps"]
                for key in keys {
                    for item in (parameters[key] ?? "").split(separator: ",") {
                        if let unit = Base64.decode(String(item)), !unit.isEmpty { parameterSets.append(unit) }
                    }
                }
                found = Video(codec: codec, payloadType: payloadType, clockRate: clockRate,
                              control: media.attributes.first(where: { $0.0 == "control" })?.1,
                              parameterSets: parameterSets,
                              packetizationMode: parameters["packetization-mode"].flatMap { Int($0) } ?? 0,
                              carriesDecodingOrderNumbers: (parameters["sprop-max-don-diff"].flatMap { Int($0) } ?? 0) > 0)
                break search
            }
        }
        guard let found else { throw offered.isEmpty ? .noVideo : .unsupportedVideo(offered) }
        video = found
    }

    /// An encoding name for the error message: printable ASCII only, each once, at most 8 (the server chose them).
    private static func note(_ name: String, in offered: inout [String]) {
        let printable = String(String.UnicodeScalarView(name.unicodeScalars.filter { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7f }))
        guard offered.count < 8, !offered.contains(printable) else { return }
        offered.append(printable)
    }

    /// "a=b; c=d" to a dictionary; names lower-cased.
    private static func formatParameters(_ text: String) -> [String: String] {
        var result: [String: String] = [:]
        for item in text.split(separator: ";") {
            let pair = item.split(separator: "=", maxSplits: 1)
            guard let name = pair.first else { continue }
            result[name.trimmingSpaces().lowercased()] = pair.count > 1 ? pair[1].trimmingSpaces() : ""
        }
        return result
    }
}

/// RFC 4648 base64: SDP's parameter sets, HTTP Basic credentials.
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Nil for a character outside the alphabet; padding is optional.
    public static func decode(_ text: String) -> [UInt8]? {
        var output: [UInt8] = []
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in text.utf8 {
            if byte == UInt8(ascii: "=") { break }
            let value: UInt8
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0") + 52
            case UInt8(ascii: "+"), UInt8(ascii: "-"): value = 62
            case UInt8(ascii: "/"), UInt8(ascii: "_"): value = 63
            case UInt8(ascii: " "), UInt8(ascii: "\t"): continue
            default: return nil
            }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        return output
    }

    public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var output: [UInt8] = []
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in bytes {
            accumulator = accumulator << 8 | UInt32(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                output.append(alphabet[Int(accumulator >> UInt32(bits) & 0x3f)])
            }
        }
        if bits > 0 { output.append(alphabet[Int(accumulator << UInt32(6 - bits) & 0x3f)]) }
        while output.count % 4 != 0 { output.append(UInt8(ascii: "=")) }
        return String(decoding: output, as: UTF8.self)
    }
}
