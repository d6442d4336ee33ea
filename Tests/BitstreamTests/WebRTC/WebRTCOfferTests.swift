import Bitstream
import Testing

/// What the offer reader keeps from the senders' offers, and the errors for offers no WHIP endpoint can answer.
@Suite struct WebRTCOfferTests {
    typealias Fixtures = WebRTCOfferFixtures

    @Test func chromiumsScreenShareOfferIsReadWhole() throws {
        let offer = try WebRTCOffer.parse(Fixtures.chromium)
        #expect(offer.origin.sessionID == "4611731400430051336" && offer.sessionName == "-" && offer.stopTime == 0)
        #expect(offer.bundleGroups == [["0", "1"]] && !offer.iceLite)
        #expect(offer.media.map(\.kind) == [.video, .audio] && offer.media.map(\.mid) == ["0", "1"])
        let video = offer.media[0]
        #expect(video.line == 8 && video.port == 9 && video.proto == "UDP/TLS/RTP/SAVPF" && video.direction == .sendonly)
        #expect(video.rtcpMux && video.rtcpReducedSize && video.candidateCount == 2 && !video.endOfCandidates)
        #expect(video.payloads.count == 25 && video.payloads.map(\.payloadType).prefix(4) == [96, 97, 104, 105])
        let h264 = try #require(video.payload(102))
        #expect(h264.encodingName == "H264" && h264.clockRate == 90000 && h264.channels == nil)
        #expect(h264.parameters == ["level-asymmetry-allowed": "1", "packetization-mode": "1", "profile-level-id": "42001f"])
        #expect(h264.feedback == ["goog-remb", "transport-cc", "ccm fir", "nack", "nack pli"])
        #expect(video.payload(97)?.parameters["apt"] == "96" && video.payload(118)?.encodingName == "ulpfec")
        #expect(video.extensions.count == 11 && video.extensions[1] == .init(id: 2, direction: nil, uri: WebRTCAnswer.absSendTimeURI))
        #expect(video.sourceGroups == [.init(semantics: "FID", ssrcs: [2_231_627_014, 632_943_048])])
        #expect(video.sources.count == 4 && video.sources[0] == .init(ssrc: 2_231_627_014, attribute: "cname:4TOk42mSjXCkVIa6"))
        #expect(video.transport.iceUsernameFragment == "Gx4j" && video.transport.icePassword == "9JzVQ0QyR4wB5nQ2s3mC7LkE")
        #expect(video.transport.setup == .actpass && video.transport.iceOptions == ["trickle"])
        #expect(video.transport.sha256Fingerprint?.prefix(3) == [0x7b, 0x8b, 0xf0] && video.transport.sha256Fingerprint?.count == 32)
        let audio = offer.media[1]
        #expect(audio.payload(111)?.channels == 2 && audio.payload(111)?.feedback == ["transport-cc"])
        #expect(audio.payload(0)?.encodingName == "PCMU" && audio.payloads.count == 8)
    }

    @Test func sessionLevelTransportAttributesApplyToEverySection() throws {
        // libdatachannel (OBS) writes ICE, DTLS role and fingerprint once, at session level.
        let offer = try WebRTCOffer.parse(Fixtures.obs)
        #expect(offer.session.iceUsernameFragment == "kZB3" && offer.session.iceOptions == ["ice2", "trickle"])
        for media in offer.media {
            #expect(media.transport.iceUsernameFragment == "kZB3" && media.transport.icePassword == "+3tA7S8XazuKs+j2mu4rfU")
            #expect(media.transport.setup == .actpass && media.transport.fingerprints.count == 1)
        }
        #expect(offer.media[0].endOfCandidates && offer.media[0].candidateCount == 2 && !offer.media[1].endOfCandidates)
        // A media-level value overrides the session's.
        let overridden = try WebRTCOffer.parse(Fixtures.obs.replacingFirst("a=mid:1\r\n", with: "a=mid:1\r\na=ice-ufrag:ovr1\r\n"))
        #expect(overridden.media[1].transport.iceUsernameFragment == "ovr1" && overridden.media[0].transport.iceUsernameFragment == "kZB3")
    }

    @Test func otherFingerprintsAreRecordedBesideSHA256() throws {
        let offer = try WebRTCOffer.parse(Fixtures.aiortc)
        let transport = offer.media[0].transport
        #expect(transport.fingerprints.map(\.algorithm) == ["sha-256", "sha-384", "sha-512"])
        #expect(transport.fingerprints.map(\.bytes.count) == [32, 48, 64] && transport.sha256Fingerprint?.last == 0x08)
        #expect(offer.media[0].endOfCandidates && offer.media[0].port == 50505)
    }

    @Test func bundleOnlySectionsTakeTheTaggedSectionsTransport() throws {
        // RFC 8843 §7.2: a bundle-only m-section has port 0 and no transport attributes of its own.
        let offer = try WebRTCOffer.parse(Self.minimal(sections: [
            "m=audio 9 UDP/TLS/RTP/SAVPF 111\na=mid:a\na=ice-ufrag:tag1\na=ice-pwd:0123456789012345678901\na=fingerprint:sha-256 \(Fixtures.fingerprint)\na=setup:active\na=rtpmap:111 opus/48000/2",
            "m=video 0 UDP/TLS/RTP/SAVPF 96\na=mid:v\na=bundle-only\na=rtcp-mux\na=rtpmap:96 H264/90000",
        ], bundle: "a v", sessionAttributes: ""))
        #expect(!offer.media[1].isRejected && offer.media[1].transport.iceUsernameFragment == "tag1")
        #expect(offer.media[1].transport.setup == .active && offer.media[1].direction == .sendrecv)
    }

    @Test func lineEndsMayBeCRLFOrLF() throws {
        for (name, text) in Fixtures.all {
            let lf = text.split(separator: "\r\n", omittingEmptySubsequences: false).joined(separator: "\n")
            #expect(try WebRTCOffer.parse(lf) == WebRTCOffer.parse(text), "\(name)")
        }
    }

    @Test(arguments: [
        ("a=ice-ufrag:Gx4j\r\n", "", WebRTCOfferError.missingICECredentials(line: 8)),
        ("a=fingerprint:sha-256 \(WebRTCOfferFixtures.fingerprint)\r\n", "", .missingFingerprint(line: 8)),
        ("a=group:BUNDLE 0 1\r\n", "", .noBundleGroup),
        ("a=group:BUNDLE 0 1\r\n", "a=group:BUNDLE 0 7\r\n", .unknownBundleMid(line: 5)),
        // Found by FuzzWebRTCOffer: a mid named twice was answered in a group of two.
        ("a=group:BUNDLE 0 1\r\n", "a=group:BUNDLE 0 0\r\n", .malformed(line: 5, expected: "a=group:BUNDLE naming each mid once, in one group")),
        ("a=group:BUNDLE 0 1\r\n", "a=group:BUNDLE 0\r\na=group:BUNDLE 1 0\r\n", .malformed(line: 6, expected: "a=group:BUNDLE naming each mid once, in one group")),
        ("a=mid:1\r\n", "", .missingMid(line: 103)),
        ("a=mid:1\r\n", "a=mid:0\r\n", .duplicateMid(line: 103)),
        ("v=0\r\n", "", .notSDP),
        ("o=- 4611731400430051336 2 IN IP4 127.0.0.1\r\n", "", .missingSessionLine("o=")),
        ("a=rtpmap:102 H264/90000\r\n", "a=rtpmap:102 H264\r\n", .malformed(line: 51, expected: "a=rtpmap:<payload type> <encoding name>/<clock rate>[/<channels>]")),
        ("a=setup:actpass\r\na=mid:0", "a=setup:holdconn\r\na=mid:0", .malformed(line: 17, expected: "one a=setup:actpass, active or passive")),
        ("a=extmap:3 ", "a=extmap:0 ", .malformed(line: 21, expected: "a=extmap:<id 1 to 255>[/<direction>] <URI>, one per id")),
        ("a=ice-pwd:9JzVQ0QyR4wB5nQ2s3mC7LkE\r\na=ice-options", "a=ice-pwd:short\r\na=ice-options", .malformed(line: 14, expected: "one a=ice-pwd of 22 to 256 ICE characters")),
        ("a=sendonly\r\na=msid:3f1c0d9e-8a57-4c2f-9b1e-6d2a7c3e4f50 b7", "a=sendonly\r\na=inactive\r\na=msid:3f1c0d9e-8a57-4c2f-9b1e-6d2a7c3e4f50 b7", .malformed(line: 31, expected: "one direction attribute per m-section")),
        ("a=ssrc:2231627014 cname", "a=ssrc:4294967296 cname", .malformed(line: 99, expected: "a=ssrc:<ssrc> <attribute>[:<value>]")),
        ("a=rtcp-mux\r\na=rtcp-rsize", "a=rtcp-mux\r\nbogus\r\na=rtcp-rsize", .malformed(line: 33, expected: "<type letter>=<value>")),
    ])
    func offersThatCannotBeAnsweredNameTheirLine(find: String, replacement: String, expected: WebRTCOfferError) {
        let text = Fixtures.chromium.replacingFirst(find, with: replacement)
        #expect(text != Fixtures.chromium)
        #expect(throws: expected) { try WebRTCOffer.parse(text) }
    }

    @Test func fingerprintsMustBeWellFormed() {
        for bad in ["sha-256 7B:8B", "sha-256 7B:8B:", "sha-256 7G:8B", "sha-256", "sha-1 ABC:00", "sha-256 \(Fixtures.fingerprint) x"] {
            let text = Fixtures.obs.replacingFirst("a=fingerprint:sha-256 \(Fixtures.fingerprint)", with: "a=fingerprint:\(bad)")
            #expect(throws: WebRTCOfferError.self, "\(bad)") { try WebRTCOffer.parse(text) }
        }
    }

    @Test func errorsDescribeTheLineWithoutEchoingThePeer() {
        #expect(WebRTCOfferError.missingFingerprint(line: 8).description == "line 8: the m-section has no a=fingerprint")
        #expect(WebRTCOfferError.malformed(line: 3, expected: "t=<start time> <stop time>").description == "line 3: expected t=<start time> <stop time>")
        #expect(WebRTCOfferError.noBundleGroup.description.contains("RFC 9725"))
        let hostile = Fixtures.chromium.replacingFirst("a=rtpmap:102 H264/90000", with: "a=rtpmap:102 <script>/x")
        #expect(throws: WebRTCOfferError.malformed(line: 51, expected: "a=rtpmap:<payload type> <encoding name>/<clock rate>[/<channels>]")) {
            try WebRTCOffer.parse(hostile)
        }
    }

    /// A minimal offer around `sections` (LF line ends, session-level transport unless overridden).
    static func minimal(sections: [String], bundle: String, sessionAttributes: String? = nil) -> String {
        let session = sessionAttributes ?? "a=ice-ufrag:abcd\na=ice-pwd:0123456789012345678901\na=fingerprint:sha-256 \(Fixtures.fingerprint)\n"
        return "v=0\no=- 1 1 IN IP4 0.0.0.0\ns=-\nt=0 0\na=group:BUNDLE \(bundle)\n\(session)" + sections.map { $0 + "\n" }.joined()
    }
}

extension String {
    /// The text with the first occurrence of `target` replaced (unchanged when absent); standard library only.
    func replacingFirst(_ target: String, with replacement: String) -> String {
        let bytes = Array(utf8), pattern = Array(target.utf8)
        guard !pattern.isEmpty, bytes.count >= pattern.count else { return self }
        for start in 0...(bytes.count - pattern.count) where bytes[start..<(start + pattern.count)].elementsEqual(pattern) {
            return String(decoding: bytes[..<start] + Array(replacement.utf8) + bytes[(start + pattern.count)...], as: UTF8.self)
        }
        return self
    }
}
