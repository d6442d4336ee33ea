/// The line-by-line reader behind `WebRTCOffer.parse`. It works on bytes until a line is known to be bounded
/// printable text (in a Swift String "\r\n" is one Character, and a control byte has no business in SDP), then
/// keeps session state, one `Section` per m-line, and settles inheritance and the cross-section checks at the end.
struct WebRTCOfferReader {
    private typealias Limits = WebRTCOffer.Limits

    /// One m-section while it is read: its parameters before inheritance and what it has already seen.
    struct Section {
        var media: WebRTCOffer.Media
        var own = WebRTCOffer.TransportParameters()
        var payloadIndex: [UInt8: Int] = [:]
        var hasDirection = false
    }

    private var hasVersion = false
    private var origin: WebRTCOffer.Origin?
    private var sessionName: String?
    private var timing: (start: UInt64, stop: UInt64)?
    private var bundleGroups: [(line: Int, mids: [String])] = []
    private var session = WebRTCOffer.TransportParameters()
    private var sessionDirection: WebRTCOffer.Direction?
    private var sessionEndOfCandidates = false
    private var iceLite = false
    private var sections: [Section] = []

    mutating func read(_ bytes: [UInt8]) throws(WebRTCOfferError) {
        guard bytes.count <= Limits.bytes else { throw .tooLarge(bytes: bytes.count) }
        var number = 0
        var start = 0
        while start < bytes.count {
            let end = bytes[start...].firstIndex(of: 0x0a) ?? bytes.count
            number += 1
            guard number <= Limits.lines else { throw .tooManyLines }
            var line = bytes[start..<end]
            if line.last == 0x0d { line = line.dropLast() }
            guard line.count <= Limits.lineLength else { throw .lineTooLong(line: number) }
            try readLine(line, number: number)
            start = end + 1
        }
    }

    private mutating func readLine(_ bytes: ArraySlice<UInt8>, number: Int) throws(WebRTCOfferError) {
        guard let type = bytes.first else { return }  // blank lines (a trailing one, mostly) carry nothing
        guard hasVersion else {
            guard bytes.elementsEqual("v=0".utf8) else { throw .notSDP }
            hasVersion = true
            return
        }
        // No control byte, tab included: SDP separates with single spaces, and some values are echoed in the answer.
        guard bytes.allSatisfy({ $0 >= 0x20 && $0 != 0x7f }) else {
            throw .malformed(line: number, expected: "printable text")
        }
        guard bytes.count >= 2, bytes[bytes.startIndex + 1] == UInt8(ascii: "="),
              (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(type) else {
            throw .malformed(line: number, expected: "<type letter>=<value>")
        }
        let value = Substring(String(decoding: bytes.dropFirst(2), as: UTF8.self))
        switch UnicodeScalar(type) {
        case "v": throw .malformed(line: number, expected: "one v= line")
        case "o", "s", "t": try readSessionLine(type, value, number: number)
        case "m": try startSection(value, number: number)
        case "a": try readAttribute(value, number: number)
        default: return  // c=, b=, i=, k=...: nothing a WebRTC answer depends on
        }
    }

    private mutating func readSessionLine(_ type: UInt8, _ value: Substring, number: Int) throws(WebRTCOfferError) {
        guard sections.isEmpty else { throw .malformed(line: number, expected: "o=, s= and t= before the first m= line") }
        let fields = value.split(separator: " ")
        switch UnicodeScalar(type) {
        case "o":
            guard fields.count == 6, origin == nil, fields[3] == "IN" else {
                throw .malformed(line: number, expected: "o=<username> <session id> <version> IN <address type> <address>")
            }
            origin = .init(username: String(fields[0]), sessionID: String(fields[1]), sessionVersion: String(fields[2]),
                           address: String(fields[5]))
        case "s":
            guard sessionName == nil else { throw .malformed(line: number, expected: "one s= line") }
            sessionName = String(value)
        default:
            guard fields.count == 2, let start = SDPText.decimal(fields[0], max: .max),
                  let stop = SDPText.decimal(fields[1], max: .max) else {
                throw .malformed(line: number, expected: "t=<start time> <stop time>")
            }
            // RFC 8866 §5.9 allows several time descriptions; WebRTC writes one ("t=0 0"), the first is kept.
            if timing == nil { timing = (start, stop) }
        }
    }

    /// `m=<media> <port>[/<count>] <proto> <fmt> ...` (RFC 8866 §5.14).
    private mutating func startSection(_ value: Substring, number: Int) throws(WebRTCOfferError) {
        guard sections.count < Limits.mediaSections else { throw .tooManyMediaSections(line: number) }
        let fields = value.split(separator: " ")
        let expected = "m=<media> <port> <proto> <format> ..."
        guard fields.count >= 4 else { throw .malformed(line: number, expected: expected) }
        guard fields.count - 3 <= Limits.payloadTypesPerSection else { throw .tooManyPayloadTypes(line: number) }
        let portAndCount = fields[1].split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard SDPText.isToken(fields[0]), let port = SDPText.decimal(portAndCount[0], max: 65535),
              portAndCount.count == 1 || SDPText.decimal(portAndCount[1], max: 65535) != nil,
              fields[2].split(separator: "/", omittingEmptySubsequences: false).allSatisfy(SDPText.isToken),
              fields[3...].allSatisfy(SDPText.isToken) else {
            throw .malformed(line: number, expected: expected)
        }
        let kind: WebRTCOffer.Kind = switch fields[0] {
        case "video": .video
        case "audio": .audio
        case "application": .application
        default: .other(String(fields[0]))
        }
        var section = Section(media: .init(line: number, kind: kind, port: UInt16(port), proto: String(fields[2]),
                                           formats: fields[3...].map(String.init)))
        if fields[2].uppercased().contains("RTP/") {
            for format in fields[3...] {
                guard let payloadType = SDPText.decimal(format, max: 127).map(UInt8.init) else {
                    throw .malformed(line: number, expected: "RTP payload type numbers (0 to 127) on the m= line")
                }
                guard section.payloadIndex[payloadType] == nil else { continue }
                section.payloadIndex[payloadType] = section.media.payloads.count
                section.media.payloads.append(.init(payloadType: payloadType))
            }
        }
        sections.append(section)
    }

    private mutating func readAttribute(_ value: Substring, number: Int) throws(WebRTCOfferError) {
        let colon = value.firstIndex(of: ":")
        let name = colon.map { value[..<$0] } ?? value
        let argument = colon.map { value[value.index(after: $0)...] } ?? ""
        if sections.isEmpty {
            try readSessionAttribute(name, argument, number: number)
        } else {
            try sections[sections.count - 1].read(name, argument, number: number)
        }
    }

    private mutating func readSessionAttribute(_ name: Substring, _ argument: Substring, number: Int) throws(WebRTCOfferError) {
        if try session.read(name, argument, number: number) { return }
        switch name {
        case "group":
            // RFC 5888 §5: a=group:<semantics> <mid> ...; only BUNDLE matters here.
            let fields = argument.split(separator: " ")
            guard fields.allSatisfy(SDPText.isToken), let semantics = fields.first else {
                throw .malformed(line: number, expected: "a=group:<semantics> <mid> ...")
            }
            if semantics.uppercased() == "BUNDLE" && fields.count > 1 {
                bundleGroups.append((number, fields.dropFirst().map(String.init)))
            }
        case "ice-lite": iceLite = true
        case "end-of-candidates": sessionEndOfCandidates = true
        case "sendrecv", "sendonly", "recvonly", "inactive":
            guard sessionDirection == nil else { throw .malformed(line: number, expected: "one direction attribute") }
            sessionDirection = WebRTCOffer.Direction(rawValue: String(name))
        default: return
        }
    }

    /// The offer, once every line is read: inheritance settled and the checks that need the whole offer made.
    func finish() throws(WebRTCOfferError) -> WebRTCOffer {
        guard hasVersion else { throw .notSDP }
        guard let origin else { throw .missingSessionLine("o=") }
        guard let sessionName else { throw .missingSessionLine("s=") }
        guard let timing else { throw .missingSessionLine("t=") }
        let mids = try sectionIndexByMid()
        let media = try sections.map { section throws(WebRTCOfferError) in try resolved(section, mids: mids) }
        return WebRTCOffer(origin: origin, sessionName: sessionName, startTime: timing.start, stopTime: timing.stop,
                           bundleGroups: bundleGroups.map(\.mids), session: session, iceLite: iceLite, media: media)
    }

    /// RFC 8843 §7.2: every bundled m-section has a mid of its own, and a group names only mids that exist.
    private func sectionIndexByMid() throws(WebRTCOfferError) -> [String: Int] {
        var mids: [String: Int] = [:]
        for (index, section) in sections.enumerated() {
            if let mid = section.media.mid {
                guard mids.updateValue(index, forKey: mid) == nil else { throw .duplicateMid(line: section.media.line) }
            } else if !section.media.isRejected {
                throw .missingMid(line: section.media.line)
            }
        }
        guard !bundleGroups.isEmpty else { throw .noBundleGroup }
        for group in bundleGroups where !group.mids.allSatisfy({ mids[$0] != nil }) {
            throw .unknownBundleMid(line: group.line)
        }
        // A mid is in one group, once (RFC 8843 §7.2): the answer's group is built from the offer's.
        var grouped = Set<String>()
        for group in bundleGroups where !group.mids.allSatisfy({ grouped.insert($0).inserted }) {
            throw .malformed(line: group.line, expected: "a=group:BUNDLE naming each mid once, in one group")
        }
        return mids
    }

    /// One m-section with what it inherits: media-level values over the session's over the BUNDLE group's
    /// offerer-tagged m-section (RFC 8843 §7.2: the only one a bundle-only section takes its transport from).
    /// A section in use must end up with ICE credentials (RFC 8839 §5.4) and a fingerprint (RFC 8842 §5.1).
    private func resolved(_ section: Section, mids: [String: Int]) throws(WebRTCOfferError) -> WebRTCOffer.Media {
        var media = section.media
        media.transport = section.own.filled(from: session)
        if let mid = media.mid, let tag = bundleGroups.first(where: { $0.mids.contains(mid) })?.mids.first,
           let tagIndex = mids[tag] {
            media.transport = media.transport.filled(from: sections[tagIndex].own.filled(from: session))
        }
        if !section.hasDirection { media.direction = sessionDirection ?? .sendrecv }
        media.endOfCandidates = media.endOfCandidates || sessionEndOfCandidates
        guard !media.isRejected else { return media }
        guard media.transport.iceUsernameFragment != nil, media.transport.icePassword != nil else {
            throw .missingICECredentials(line: media.line)
        }
        guard !media.transport.fingerprints.isEmpty else { throw .missingFingerprint(line: media.line) }
        return media
    }
}

extension WebRTCOfferReader.Section {
    /// One media-level attribute; unknown ones are skipped (RFC 8866 §5.13).
    mutating func read(_ name: Substring, _ argument: Substring, number: Int) throws(WebRTCOfferError) {
        if try own.read(name, argument, number: number) { return }
        switch name {
        case "mid":
            guard media.mid == nil, SDPText.isToken(argument) else { throw .malformed(line: number, expected: "one a=mid:<token>") }
            media.mid = String(argument)
        case "sendrecv", "sendonly", "recvonly", "inactive":
            guard !hasDirection else { throw .malformed(line: number, expected: "one direction attribute per m-section") }
            hasDirection = true
            media.direction = WebRTCOffer.Direction(rawValue: String(name)) ?? .sendrecv
        case "bundle-only": media.bundleOnly = true
        case "rtcp-mux": media.rtcpMux = true
        case "rtcp-rsize": media.rtcpReducedSize = true
        case "candidate": media.candidateCount += 1
        case "end-of-candidates": media.endOfCandidates = true
        case "rtpmap": try readRTPMap(argument, number: number)
        case "fmtp": try readFormatParameters(argument, number: number)
        case "rtcp-fb": try readFeedback(argument, number: number)
        case "extmap": try readExtensionMap(argument, number: number)
        case "ssrc": try readSource(argument, number: number)
        case "ssrc-group": try readSourceGroup(argument, number: number)
        case "simulcast": try readSimulcast(argument, number: number)
        default: return
        }
    }
}
