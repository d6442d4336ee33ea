import Bitstream
import StreamrecvTestSupport
import Testing

/// A WHIP endpoint takes offers from anyone who can reach it: truncated, mangled, oversized or built to hurt.
/// Each must end in an offer or a typed error, never a trap, and whatever is answered must still be sound SDP.
@Suite struct WebRTCHostileOfferTests {
    typealias Fixtures = WebRTCOfferFixtures

    /// Parses and, when that works, answers; the answer must read back. Returns whether an answer came out.
    @discardableResult
    static func survive(_ text: String) -> Bool {
        guard let offer = try? WebRTCOffer.parse(text),
              let (sdp, media) = try? WebRTCAnswer.make(for: offer, local: Fixtures.local, codecs: Fixtures.bothCodecs) else {
            return false
        }
        let answer = try? WebRTCOffer.parse(sdp)
        // One BUNDLE group: the video and the audio taken beside it, the transport's section first.
        let taken = Set([media.mid] + (media.acceptedAudio.map { [$0.mid] } ?? []))
        let group = answer?.bundleGroups.first ?? []
        #expect(answer?.media.count == offer.media.count && answer?.bundleGroups.count == 1 && Set(group) == taken
                && group.count == taken.count && group.first == media.transportMid)
        return true
    }

    @Test(arguments: WebRTCOfferFixtures.all.indices)
    func everyPrefixOfAnOfferParsesOrThrows(fixture: Int) {
        let (name, text) = Fixtures.all[fixture]
        let bytes = Array(text.utf8)
        var answered = 0
        for end in 0...bytes.count where Self.survive(String(decoding: bytes[..<end], as: UTF8.self)) {
            answered += 1
        }
        // Once the video's lines are all in, the prefixes are answerable offers.
        #expect(answered > 0 && Self.survive(text), "\(name)")
    }

    @Test func inputsOverTheLimitsAreRefusedBeforeTheyAreRead() {
        let big = String(repeating: "a=x\n", count: 16_385)
        #expect(throws: WebRTCOfferError.tooLarge(bytes: 65540)) { try WebRTCOffer.parse(big) }
        #expect(throws: WebRTCOfferError.tooLarge(bytes: 10_000_000)) { try WebRTCOffer.parse(String(repeating: "v", count: 10_000_000)) }
        #expect(throws: WebRTCOfferError.tooManyLines) { try WebRTCOffer.parse("v=0\n" + String(repeating: "\n", count: 2000)) }
        #expect(throws: WebRTCOfferError.lineTooLong(line: 2)) { try WebRTCOffer.parse("v=0\ns=" + String(repeating: "x", count: 4095)) }
        #expect(throws: Never.self) { try WebRTCOffer.parse(Fixtures.webrtcbin.replacingFirst("s=-", with: "s=" + String(repeating: "x", count: 4094))) }
        let sections = (0..<17).map { "m=audio 0 RTP/AVP 0\na=mid:m\($0)" }
        #expect(throws: WebRTCOfferError.tooManyMediaSections(line: 41)) {
            try WebRTCOffer.parse(WebRTCOfferTests.minimal(sections: sections, bundle: "m0"))
        }
        let formats = (0..<65).map { String($0) }.joined(separator: " ")
        #expect(throws: WebRTCOfferError.tooManyPayloadTypes(line: 9)) {
            try WebRTCOffer.parse(WebRTCOfferTests.minimal(sections: ["m=video 9 UDP/TLS/RTP/SAVPF \(formats)"], bundle: "0"))
        }
    }

    @Test func controlBytesAndUnicodeTricksAreErrorsOrIgnored() {
        for hostile in [
            "v=0\r\no=- 1 1 IN IP4 0.0.0.0\u{0}\r\n",
            "v=0\ra=ice-lite",
            "\u{FEFF}v=0\n",
            "v=0\n\u{301}=x",
            "v=0\na=\u{301}rtpmap:96 H264/90000",
            "v=0\na=rtpmap:\u{301}96 H264/90000",
            "v=0\nm=video\u{0301} 9 UDP/TLS/RTP/SAVPF 96",
            "v=0\nm=video 99999999999999999999999 UDP/TLS/RTP/SAVPF 96",
            "v=0\nt=18446744073709551616 0",
        ] {
            #expect(throws: WebRTCOfferError.self, "\(Array(hostile.utf8))") { try WebRTCOffer.parse(hostile) }
        }
        // A tab is refused too: it would otherwise be echoed in the answer's a=fmtp (found by FuzzWebRTCOffer).
        let tabbed = Fixtures.webrtcbin.replacingFirst("profile-level-id", with: "profile-level-i\td")
        #expect(throws: WebRTCOfferError.malformed(line: 20, expected: "printable text")) { try WebRTCOffer.parse(tabbed) }
        #expect(throws: WebRTCOfferError.notSDP) { try WebRTCOffer.parse("") }
        #expect(throws: WebRTCOfferError.notSDP) { try WebRTCOffer.parse("<html><body>hello</body></html>") }
    }

    @Test func mangledOffersNeverTrap() {
        var generator = SeededGenerator(seed: 0x5d9_2024)
        let mutations = 2000
        var answered = 0
        for round in 0..<mutations {
            let (_, text) = Fixtures.all[round % Fixtures.all.count]
            if Self.survive(Self.mangle(text, using: &generator)) { answered += 1 }
        }
        // Most single changes leave an answerable offer: the mutations reach the answer writer, not only the reader.
        #expect(answered > mutations / 10)
    }

    @Test func randomBytesNeverTrap() {
        var generator = SeededGenerator(seed: 77)
        let alphabet = Array("v=0\r\nmoast:;/ 0123456789ABCDEFHabcdefgilnprsuxyz=-*.\u{0}\u{7f}".utf8)
        for _ in 0..<2000 {
            let count = Int.random(in: 0..<600, using: &generator)
            let bytes = (0..<count).map { _ in alphabet.randomElement(using: &generator) ?? 0 }
            Self.survive("v=0\n" + String(decoding: bytes, as: UTF8.self))
        }
    }

    @Test func repeatedAttributesStayBounded() throws {
        // 1900 a=ssrc lines and 1900 candidates fit the line limit: kept as values, no quadratic blow-up.
        let ssrcs = (0..<1900).map { "a=ssrc:\($0) cname:x" }.joined(separator: "\r\n")
        let text = Fixtures.webrtcbin.replacingFirst("a=mid:video0", with: "a=mid:video0\r\n" + ssrcs)
        let offer = try WebRTCOffer.parse(text)
        #expect(offer.media[0].sources.count == 1902)
        #expect(try WebRTCAnswer.make(for: offer, local: Fixtures.local, codecs: [.h264]).media.remoteSSRC == 3_484_078_950)
    }

    /// One random change to an offer's lines: drop, duplicate, swap, truncate, or overwrite a byte.
    static func mangle(_ text: String, using generator: inout SeededGenerator) -> String {
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false).map { Array($0.utf8) }
        let index = Int.random(in: 0..<lines.count, using: &generator)
        switch Int.random(in: 0..<5, using: &generator) {
        case 0: lines.remove(at: index)
        case 1: lines.insert(lines[index], at: index)
        case 2: lines.swapAt(index, Int.random(in: 0..<lines.count, using: &generator))
        case 3: lines[index] = Array(lines[index].prefix(Int.random(in: 0...lines[index].count, using: &generator)))
        default:
            guard !lines[index].isEmpty else { break }
            let at = Int.random(in: 0..<lines[index].count, using: &generator)
            lines[index][at] = Array(" :/=0123456789*\u{0}".utf8).randomElement(using: &generator) ?? 0
        }
        return lines.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "\r\n")
    }
}
