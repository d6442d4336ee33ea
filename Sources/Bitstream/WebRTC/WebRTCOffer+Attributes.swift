/// The grammar of each attribute `WebRTCOffer` reads. A value that breaks it is an error naming the line: the
/// answer echoes some of these values, so what is kept is only what the grammar allows.
extension WebRTCOffer.TransportParameters {
    /// Reads one ICE or DTLS attribute (valid at session and media level); false for any other attribute.
    mutating func read(_ name: Substring, _ argument: Substring, number: Int) throws(WebRTCOfferError) -> Bool {
        switch name {
        case "ice-ufrag":
            // RFC 8839 §5.4: 4 to 256 ice-chars; STUN usernames are built from it, so nothing else is let through.
            guard iceUsernameFragment == nil, SDPText.isICECredential(argument, length: 4...256) else {
                throw .malformed(line: number, expected: "one a=ice-ufrag of 4 to 256 ICE characters")
            }
            iceUsernameFragment = String(argument)
        case "ice-pwd":
            guard icePassword == nil, SDPText.isICECredential(argument, length: 22...256) else {
                throw .malformed(line: number, expected: "one a=ice-pwd of 22 to 256 ICE characters")
            }
            icePassword = String(argument)
        case "ice-options":
            // Space-separated per RFC 8839 §5.6; libdatachannel (OBS) separates with commas. Only recorded.
            iceOptions += argument.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
        case "fingerprint":
            fingerprints.append(try Self.fingerprint(argument, number: number))
        case "setup":
            guard setup == nil, let value = WebRTCOffer.Setup(rawValue: String(argument)) else {
                throw .malformed(line: number, expected: "one a=setup:actpass, active or passive")
            }
            setup = value
        default:
            return false
        }
        return true
    }

    /// `a=fingerprint:<hash function> <hex>:<hex>:...` (RFC 8122 §5); SHA-256 must have its 32 bytes.
    private static func fingerprint(_ argument: Substring, number: Int) throws(WebRTCOfferError) -> WebRTCOffer.Fingerprint {
        let fields = argument.split(separator: " ")
        guard fields.count == 2, SDPText.isToken(fields[0]), let bytes = SDPText.hexBytes(fields[1]) else {
            throw .malformed(line: number, expected: "a=fingerprint:<hash function> <hex bytes separated by colons>")
        }
        let algorithm = fields[0].lowercased()
        guard algorithm != "sha-256" || bytes.count == 32 else {
            throw .malformed(line: number, expected: "a SHA-256 fingerprint of 32 bytes")
        }
        return .init(algorithm: algorithm, bytes: bytes)
    }
}

extension WebRTCOfferReader.Section {
    /// `a=rtpmap:<payload type> <encoding name>/<clock rate>[/<channels>]` (RFC 8866 §6.6). Like `a=fmtp` and
    /// `a=rtcp-fb`, checked and then ignored for a payload type the m-line lacks.
    mutating func readRTPMap(_ argument: Substring, number: Int) throws(WebRTCOfferError) {
        let expected = "a=rtpmap:<payload type> <encoding name>/<clock rate>[/<channels>]"
        let parts = argument.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, let payloadType = SDPText.payloadType(parts[0]) else {
            throw .malformed(line: number, expected: expected)
        }
        let encoding = parts[1].split(separator: "/", omittingEmptySubsequences: false)
        let channels = encoding.count == 3 ? SDPText.decimal(encoding[2], max: UInt64(UInt16.max)).map(UInt16.init) : nil
        guard (2...3).contains(encoding.count), SDPText.isToken(encoding[0]),
              let clockRate = SDPText.decimal(encoding[1], max: UInt64(UInt32.max)), clockRate > 0,
              encoding.count == 2 || channels ?? 0 > 0 else {
            throw .malformed(line: number, expected: expected)
        }
        guard let index = payloadIndex[payloadType] else { return }
        guard media.payloads[index].encodingName == nil else {
            throw .malformed(line: number, expected: "one a=rtpmap per payload type")
        }
        media.payloads[index].encodingName = String(encoding[0])
        media.payloads[index].clockRate = UInt32(clockRate)
        media.payloads[index].channels = channels
    }

    /// `a=fmtp:<payload type> <format specific parameters>` (RFC 8866 §6.15), kept as written.
    mutating func readFormatParameters(_ argument: Substring, number: Int) throws(WebRTCOfferError) {
        let parts = argument.split(separator: " ", maxSplits: 1)
        guard let first = parts.first, let payloadType = SDPText.payloadType(first) else {
            throw .malformed(line: number, expected: "a=fmtp:<payload type> <parameters>")
        }
        guard let index = payloadIndex[payloadType] else { return }
        guard media.payloads[index].formatParameters == nil else {
            throw .malformed(line: number, expected: "one a=fmtp per payload type")
        }
        media.payloads[index].formatParameters = parts.count > 1 ? parts[1].trimmingSpaces() : ""
    }

    /// `a=rtcp-fb:<payload type or *> <type> [<parameter>]` (RFC 4585 §4.2), kept lower-cased and single-spaced.
    mutating func readFeedback(_ argument: Substring, number: Int) throws(WebRTCOfferError) {
        let parts = argument.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0] == "*" || SDPText.payloadType(parts[0]) != nil else {
            throw .malformed(line: number, expected: "a=rtcp-fb:<payload type or *> <feedback type> [<parameter>]")
        }
        let value = parts[1].split(separator: " ").joined(separator: " ").lowercased()
        if let payloadType = SDPText.payloadType(parts[0]) {
            if let index = payloadIndex[payloadType] { media.payloads[index].feedback.append(value) }
        } else {
            media.wildcardFeedback.append(value)
        }
    }

    /// `a=extmap:<id>[/<direction>] <URI> [<attributes>]` (RFC 8285 §8); ids 1 to 255 (the two-byte form's).
    mutating func readExtensionMap(_ argument: Substring, number: Int) throws(WebRTCOfferError) {
        let expected = "a=extmap:<id 1 to 255>[/<direction>] <URI>, one per id"
        let fields = argument.split(separator: " ")
        guard fields.count >= 2 else { throw .malformed(line: number, expected: expected) }
        let idAndDirection = fields[0].split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        let direction = idAndDirection.count == 2 ? WebRTCOffer.Direction(rawValue: String(idAndDirection[1])) : nil
        guard let id = SDPText.decimal(idAndDirection[0], max: 255).map(UInt8.init), id > 0,
              idAndDirection.count == 1 || direction != nil,
              !media.extensions.contains(where: { $0.id == id }) else {
            throw .malformed(line: number, expected: expected)
        }
        media.extensions.append(.init(id: id, direction: direction, uri: String(fields[1])))
    }

    /// `a=simulcast:send <streams>[ recv <streams>]` (RFC 8853 §5.1): streams separated by `;`, alternatives by `,`,
    /// a paused one marked `~`; rids are RFC 8851 tokens. Only what is sent matters to a receiver; at most 16.
    mutating func readSimulcast(_ argument: Substring, number: Int) throws(WebRTCOfferError) {
        let expected = "a=simulcast:send <rid>[;<rid>…] (RFC 8853), one per m-section, at most 16 streams"
        let fields = argument.split(separator: " ")
        guard media.simulcastSendStreams.isEmpty, fields.count % 2 == 0, fields.count <= 4 else { throw .malformed(line: number, expected: expected) }
        for index in stride(from: 0, to: fields.count, by: 2) where fields[index] == "send" {
            let streams = fields[index + 1].split(separator: ";", omittingEmptySubsequences: false)
            guard streams.count <= 16 else { throw .malformed(line: number, expected: expected) }
            for stream in streams {
                guard let first = stream.split(separator: ",", omittingEmptySubsequences: false).first else {
                    throw .malformed(line: number, expected: expected)
                }
                let rid = first.hasPrefix("~") ? first.dropFirst() : first
                guard !rid.isEmpty, rid.count <= 32, SDPText.isToken(rid) else { throw .malformed(line: number, expected: expected) }
                media.simulcastSendStreams.append(String(rid))
            }
        }
    }

    /// `a=ssrc:<ssrc> <attribute>[:<value>]` (RFC 5576 §4.1).
    mutating func readSource(_ argument: Substring, number: Int) throws(WebRTCOfferError) {
        let parts = argument.split(separator: " ", maxSplits: 1)
        guard let first = parts.first, let ssrc = SDPText.decimal(first, max: UInt64(UInt32.max)) else {
            throw .malformed(line: number, expected: "a=ssrc:<ssrc> <attribute>[:<value>]")
        }
        media.sources.append(.init(ssrc: UInt32(ssrc), attribute: parts.count > 1 ? parts[1].trimmingSpaces() : ""))
    }

    /// `a=ssrc-group:<semantics> <ssrc> ...` (RFC 5576 §4.2).
    mutating func readSourceGroup(_ argument: Substring, number: Int) throws(WebRTCOfferError) {
        let fields = argument.split(separator: " ")
        let ssrcs = fields.dropFirst().compactMap { SDPText.decimal($0, max: UInt64(UInt32.max)).map(UInt32.init) }
        guard fields.count >= 2, SDPText.isToken(fields[0]), ssrcs.count == fields.count - 1 else {
            throw .malformed(line: number, expected: "a=ssrc-group:<semantics> <ssrc> ...")
        }
        media.sourceGroups.append(.init(semantics: String(fields[0]), ssrcs: ssrcs))
    }
}

/// Lexical pieces of SDP (RFC 8866 §9), checked on bytes so no Unicode grouping can hide a character.
enum SDPText {
    /// Decimal digits only (no sign, no spaces), at most `max`.
    static func decimal(_ text: Substring, max: UInt64) -> UInt64? {
        guard !text.utf8.isEmpty, text.utf8.count <= 20 else { return nil }
        var value: UInt64 = 0
        for byte in text.utf8 {
            guard (0x30...0x39).contains(byte) else { return nil }
            let (product, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, carry) = product.addingReportingOverflow(UInt64(byte - 0x30))
            guard !overflow, !carry else { return nil }
            value = sum
        }
        return value <= max ? value : nil
    }

    static func payloadType(_ text: Substring) -> UInt8? {
        decimal(text, max: 127).map(UInt8.init)
    }

    /// RFC 8866 §9 `token`: visible ASCII except the separators.
    static func isToken(_ text: Substring) -> Bool {
        !text.utf8.isEmpty && text.utf8.allSatisfy { byte in
            switch byte {
            case 0x21, 0x23...0x27, 0x2a, 0x2b, 0x2d, 0x2e, 0x30...0x39, 0x41...0x5a, 0x5e...0x7e: true
            default: false
            }
        }
    }

    /// RFC 8839 §5.4 `ice-char`: ALPHA / DIGIT / "+" / "/".
    static func isICECredential(_ text: Substring, length: ClosedRange<Int>) -> Bool {
        length.contains(text.utf8.count) && text.utf8.allSatisfy { byte in
            switch byte {
            case 0x2b, 0x2f, 0x30...0x39, 0x41...0x5a, 0x61...0x7a: true
            default: false
            }
        }
    }

    /// "AB:cd:01" to bytes: two hex digits per byte, 1 to 64 bytes.
    static func hexBytes(_ text: Substring) -> [UInt8]? {
        let pairs = text.utf8.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
        guard (1...64).contains(pairs.count) else { return nil }
        var bytes: [UInt8] = []
        for pair in pairs {
            guard pair.count == 2, let high = pair.first.flatMap(hexDigit), let low = pair.last.flatMap(hexDigit) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    private static func hexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }
}
