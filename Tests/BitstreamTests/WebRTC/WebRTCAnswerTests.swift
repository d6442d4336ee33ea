import Bitstream
import Testing

/// The answers a receive-only, ICE-lite WHIP endpoint gives the senders' offers.
@Suite struct WebRTCAnswerTests {
    typealias Fixtures = WebRTCOfferFixtures

    static func answer(_ text: String, codecs: Set<VideoCodec> = Fixtures.bothCodecs,
                       local: WebRTCAnswer.LocalParameters = Fixtures.local) throws -> (sdp: String, media: WebRTCAnswer.NegotiatedVideo) {
        try WebRTCAnswer.make(for: WebRTCOffer.parse(text), local: local, codecs: codecs)
    }

    static func lines(_ sdp: String) -> [String] {
        sdp.split(separator: "\r\n").map(String.init)
    }

    @Test func webrtcbinGetsThisExactAnswer() throws {
        let (sdp, media) = try Self.answer(Fixtures.webrtcbin)
        #expect(sdp == """
            v=0\r
            o=- 7301234567890 2 IN IP4 127.0.0.1\r
            s=-\r
            t=0 0\r
            a=group:BUNDLE video0\r
            a=ice-lite\r
            a=ice-ufrag:srv1\r
            a=ice-pwd:0123456789abcdefABCDEF+/\r
            a=fingerprint:sha-256 00:07:0E:15:1C:23:2A:31:38:3F:46:4D:54:5B:62:69:70:77:7E:85:8C:93:9A:A1:A8:AF:B6:BD:C4:CB:D2:D9\r
            m=video 8189 UDP/TLS/RTP/SAVPF 96\r
            c=IN IP4 192.0.2.10\r
            a=mid:video0\r
            a=setup:passive\r
            a=recvonly\r
            a=rtcp-mux\r
            a=rtpmap:96 H264/90000\r
            a=fmtp:96 packetization-mode=1;profile-level-id=42c01f;level-asymmetry-allowed=1\r
            a=rtcp-fb:96 nack\r
            a=rtcp-fb:96 nack pli\r
            a=rtcp-fb:96 ccm fir\r
            a=rtcp-fb:96 goog-remb\r
            a=candidate:1 1 udp 2130706431 192.0.2.10 8189 typ host\r
            a=candidate:2 1 udp 2130706175 2001:db8::10 8189 typ host\r
            a=end-of-candidates\r

            """)
        var expected = WebRTCAnswer.NegotiatedVideo(
            mid: "video0", payloadType: 96, codec: .h264, packetizationMode: 1, clockRate: 90000,
            formatParameters: "packetization-mode=1;profile-level-id=42c01f;level-asymmetry-allowed=1",
            remoteSSRC: 3_484_078_950, feedback: [.nack, .pli, .fir, .remb], absSendTimeID: nil, transportWideCCID: nil)
        expected.transportMid = "video0"
        #expect(media == expected)
    }

    @Test func chromiumGetsH264ModeOneWithoutRepairFormatsAndItsAudioIsTakenToBeDropped() throws {
        let (sdp, media) = try Self.answer(Fixtures.chromium)
        // 104 (mode 0) comes first in the m-line, but mode 1 is preferred: 102, the first mode 1.
        #expect(media.payloadType == 102 && media.packetizationMode == 1 && media.mid == "0")
        // Transport-cc (its feedback and its header extension, id 4) is answered; REMB then is not: the sender's
        // own delay-based estimate drives it, and a REMB would only cap it.
        #expect(media.remoteSSRC == 2_231_627_014 && media.feedback == Set(WebRTCAnswer.NegotiatedVideo.Feedback.allCases).subtracting([.remb]))
        #expect(media.absSendTimeID == 2 && media.transportWideCCID == 4)
        let lines = Self.lines(sdp)
        #expect(lines.contains("a=group:BUNDLE 0 1") && lines.contains("m=video 8189 UDP/TLS/RTP/SAVPF 102 103"))
        #expect(lines.contains("a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f"))
        #expect(lines.filter { $0.hasPrefix("a=rtcp-fb:102 ") } == ["nack", "nack pli", "ccm fir", "transport-cc"].map { "a=rtcp-fb:102 \($0)" })
        #expect(lines.filter { $0.hasPrefix("a=extmap:") } == ["a=extmap:2 \(WebRTCAnswer.absSendTimeURI)", "a=extmap:4 \(WebRTCAnswer.transportWideCCURI)"])
        #expect(!lines.contains { $0.hasPrefix("b=") })
        // The RTX of the chosen type (apt=102) comes with it: NACK's retransmissions arrive there. Never RED or FEC.
        #expect(lines.filter { $0.hasPrefix("a=rtpmap:") } == ["a=rtpmap:102 H264/90000", "a=rtpmap:103 rtx/90000", "a=rtpmap:111 opus/48000/2"])
        #expect(lines.contains("a=fmtp:103 apt=102") && media.retransmissionPayloadType == 103)
        #expect(!sdp.contains("red/") && !sdp.contains("ulpfec") && !sdp.contains("rtcp-rsize"))
        // The audio, bundled and receive only, with Opus alone (no RED, no comfort noise, no feedback): its packets
        // are authenticated and dropped.
        let audio = try #require(lines.firstIndex(of: "m=audio 8189 UDP/TLS/RTP/SAVPF 111"))
        #expect(Array(lines[audio...]) == ["m=audio 8189 UDP/TLS/RTP/SAVPF 111", "c=IN IP4 192.0.2.10", "a=mid:1", "a=setup:passive", "a=recvonly",
                                           "a=rtcp-mux", "a=rtpmap:111 opus/48000/2", "a=candidate:1 1 udp 2130706431 192.0.2.10 8189 typ host", "a=candidate:2 1 udp 2130706175 2001:db8::10 8189 typ host", "a=end-of-candidates"])
        #expect(media.acceptedAudio == .init(mid: "1", payloadType: 111, encoding: "opus/48000/2", name: "opus"))
    }

    @Test func obsAndAiortcGetTheirVideoAccepted() throws {
        let (obs, obsMedia) = try Self.answer(Fixtures.obs)
        #expect(obsMedia.mid == "1" && obsMedia.payloadType == 96 && obsMedia.remoteSSRC == 3_339_016_935)
        #expect(obsMedia.feedback == [.nack, .pli, .remb] && obsMedia.absSendTimeID == nil)
        let lines = Self.lines(obs)
        // OBS's Opus, first in its BUNDLE group, stays first: taken, to be dropped.
        #expect(lines.contains("a=group:BUNDLE 0 1") && Array(lines[9...18]) == ["m=audio 8189 UDP/TLS/RTP/SAVPF 111", "c=IN IP4 192.0.2.10", "a=mid:0",
                "a=setup:passive", "a=recvonly", "a=rtcp-mux", "a=rtpmap:111 opus/48000/2", "a=candidate:1 1 udp 2130706431 192.0.2.10 8189 typ host", "a=candidate:2 1 udp 2130706175 2001:db8::10 8189 typ host", "a=end-of-candidates"])
        #expect(lines[19] == "m=video 8189 UDP/TLS/RTP/SAVPF 96")
        #expect(obsMedia.acceptedAudio?.payloadType == 111)
        let (_, aiortc) = try Self.answer(Fixtures.aiortc)
        // VP8 first, then H.264 99: the first H.264 mode 1; its RTX source (FID) is not the remote SSRC.
        #expect(aiortc.payloadType == 99 && aiortc.remoteSSRC == 1_828_893_402 && aiortc.absSendTimeID == 2)
        #expect(aiortc.feedback == [.nack, .pli, .remb] && aiortc.transportWideCCID == nil)
    }

    /// `remb = false`: the answer neither offers nor promises REMB, whatever the offer allowed.
    @Test func feedbackTheServerWillNotSendIsNotAnswered() throws {
        let offer = try WebRTCOffer.parse(Fixtures.obs)
        let (sdp, media) = try WebRTCAnswer.make(for: offer, local: Fixtures.local, codecs: Fixtures.bothCodecs, feedback: [.nack, .pli, .fir])
        #expect(media.feedback == [.nack, .pli])
        #expect(!sdp.contains("goog-remb") && sdp.contains("a=rtcp-fb:96 nack pli"), "\(sdp)")
    }

    /// `transport_cc = false`: REMB instead, no transport-wide extension; `max_bitrate` as TIAS and AS.
    @Test func withoutTransportCCREMBIsAnsweredAndACeilingIsWritten() throws {
        let offer = try WebRTCOffer.parse(Fixtures.chromium)
        let (sdp, media) = try WebRTCAnswer.make(for: offer, local: Fixtures.local, codecs: Fixtures.bothCodecs,
                                                 feedback: [.nack, .pli, .fir, .remb], maximumBitrate: 12_345_678)
        #expect(media.feedback == [.nack, .pli, .fir, .remb] && media.transportWideCCID == nil)
        let lines = Self.lines(sdp)
        #expect(!sdp.contains("transport-cc") && !sdp.contains(WebRTCAnswer.transportWideCCURI))
        let video = try #require(lines.firstIndex { $0.hasPrefix("m=video") })
        // RFC 4566 §5: c= then b= then the attributes.
        #expect(Array(lines[video + 1...video + 3]) == ["c=IN IP4 192.0.2.10", "b=AS:12345", "b=TIAS:12345678"])
    }

    /// An offer with transport-cc feedback but not its header extension (or the reverse) gets REMB: feedback
    /// without sequence numbers to report is nothing.
    @Test func transportCCNeedsItsExtensionToo() throws {
        let withoutExtension = Fixtures.chromium.replacingOccurrences(of: "a=extmap:4 \(WebRTCAnswer.transportWideCCURI)\r\n", with: "")
            .replacingOccurrences(of: "a=extmap:4 \(WebRTCAnswer.transportWideCCURI)\n", with: "")
        #expect(!withoutExtension.contains(WebRTCAnswer.transportWideCCURI))
        let (_, media) = try Self.answer(withoutExtension)
        #expect(media.feedback.contains(.remb) && !media.feedback.contains(.transportCC) && media.transportWideCCID == nil)
    }

    /// Simulcast (RFC 8853) as Chromium with `sendEncodings` rids and OBS 32 offer it: read, and declined in the
    /// answer (no `a=simulcast`, no RID extensions), so that the sender sends one stream, its first.
    @Test func simulcastIsReadAndDeclined() throws {
        let simulcast = Fixtures.chromium.replacingFirst("a=mid:0\r\n", with: """
            a=mid:0\r\na=rid:h send\r\na=rid:m send\r\n\
            a=rid:l send\r\na=simulcast:send h;~m,x;l\r\n
            """)
        let offer = try WebRTCOffer.parse(simulcast)
        #expect(offer.media[0].simulcastSendStreams == ["h", "m", "l"])
        let (sdp, media) = try Self.answer(simulcast)
        #expect(media.declinedSimulcast == ["h", "m", "l"] && media.bandwidthFeedback == "transport-cc")
        #expect(!sdp.contains("simulcast") && !sdp.contains("a=rid") && !sdp.contains("rtp-stream-id"))
        for bad in ["a=simulcast:send \r\n", "a=simulcast:send h;;l\r\n", "a=simulcast:send h recv\r\n",
                    "a=simulcast:send " + (0..<17).map { "r\($0)" }.joined(separator: ";") + "\r\n"] {
            #expect(throws: WebRTCOfferError.self, "\(bad)") {
                try WebRTCOffer.parse(Fixtures.chromium.replacingFirst("a=mid:0\r\n", with: "a=mid:0\r\n" + bad))
            }
        }
        // Receiving simulcast is the offerer's business, not ours.
        let receiving = try WebRTCOffer.parse(Fixtures.chromium.replacingFirst("a=mid:0\r\n", with: "a=mid:0\r\na=simulcast:recv a;b\r\n"))
        #expect(receiving.media[0].simulcastSendStreams.isEmpty)
    }

    @Test func aBundleOnlyVideoBehindARejectedTagIsAccepted() throws {
        // webrtcbin's audio is the offerer-tagged m-section; the answer takes it (to drop its packets) and keeps it
        // first in the BUNDLE group, the video bundled behind it.
        let (sdp, media) = try Self.answer(Fixtures.webrtcbinAudioVideo)
        #expect(media.mid == "video1" && media.payloadType == 96 && media.remoteSSRC == 1_807_518_368)
        #expect(media.feedback == [.pli, .fir] && media.formatParameters?.contains("sprop-parameter-sets=Z0LA") == true)
        let lines = Self.lines(sdp)
        #expect(lines.contains("a=group:BUNDLE audio0 video1") && lines.contains("m=audio 8189 UDP/TLS/RTP/SAVPF 111"))
        #expect(lines.contains("a=rtpmap:111 OPUS/48000/2") && media.acceptedAudio?.mid == "audio0")
        #expect(lines.contains("m=video 8189 UDP/TLS/RTP/SAVPF 96") && !sdp.contains("bundle-only"))
    }

    /// Audio that cannot be taken is rejected as before: not bundled with the video, receive only, without rtcp-mux,
    /// or with nothing but comfort noise, repair formats, or payload types the video or RTCP use.
    @Test(arguments: [
        ("a=group:BUNDLE 0 1", "a=group:BUNDLE 1"),
        ("a=rtpmap:111 opus/48000/2", "a=rtpmap:111 CN/8000"),
    ])
    func audioThatCannotBeTakenIsRejected(from: String, to: String) throws {
        let offer = Fixtures.obs.replacingFirst(from, with: to)
        let (sdp, media) = try WebRTCAnswer.make(for: try WebRTCOffer.parse(offer), local: Fixtures.local, codecs: Fixtures.bothCodecs)
        #expect(media.acceptedAudio == nil)
        #expect(Self.lines(sdp).contains("m=audio 0 UDP/TLS/RTP/SAVPF 111"), "\(sdp)")
    }

    /// Audio tagged first in the BUNDLE would carry the session's transport: without what the video's section must
    /// have (a SHA-256 fingerprint, a setup that leaves us the DTLS server) it is rejected, and the video carries it.
    @Test func taggedAudioWithoutAUsableTransportIsRejected() throws {
        let sha1 = (0..<20).map { String(format: "%02X", $0) }.joined(separator: ":")
        let audioFingerprint = "a=fingerprint:sha-256 06:5A:D9:47:DD:5D:A6:CB:5F:7D:CC:C4:05:83:3A:56:60:2D:86:B0:3F:94:F5:BD:08:B2:22:97:68:A9:C7:6D\r\na=rtcp-mux-only\r\nm=video"
        for offer in [Fixtures.webrtcbinAudioVideo.replacingFirst(audioFingerprint, with: "a=fingerprint:sha-1 \(sha1)\r\na=rtcp-mux-only\r\nm=video"),
                      Fixtures.webrtcbinAudioVideo.replacingFirst("a=setup:actpass", with: "a=setup:passive")] {
            #expect(offer != Fixtures.webrtcbinAudioVideo)
            let (sdp, media) = try WebRTCAnswer.make(for: try WebRTCOffer.parse(offer), local: Fixtures.local, codecs: Fixtures.bothCodecs)
            #expect(media.acceptedAudio == nil && media.transportMid == "video1", "\(sdp)")
            #expect(Self.lines(sdp).contains("a=group:BUNDLE video1") && Self.lines(sdp).contains("m=audio 0 UDP/TLS/RTP/SAVPF 111"))
        }
    }

    @Test func anAudioSectionThatOnlyReceivesIsRejected() throws {
        let offer = Fixtures.obs.replacingFirst("a=mid:0\r\na=sendonly", with: "a=mid:0\r\na=recvonly")
        let (sdp, media) = try WebRTCAnswer.make(for: try WebRTCOffer.parse(offer), local: Fixtures.local, codecs: Fixtures.bothCodecs)
        #expect(media.acceptedAudio == nil && Self.lines(sdp).contains("a=group:BUNDLE 1"))
    }

    @Test func everyAnswerReadsBackAsWellFormedSDP() throws {
        for (name, text) in Fixtures.all {
            let offer = try WebRTCOffer.parse(text)
            let (sdp, media) = try WebRTCAnswer.make(for: offer, local: Fixtures.local, codecs: Fixtures.bothCodecs)
            let answer = try WebRTCOffer.parse(sdp)
            // The video and the audio taken beside it, in the offer's BUNDLE order; the first is the transport's.
            let taken = Set([media.mid] + (media.acceptedAudio.map { [$0.mid] } ?? []))
            let group = offer.bundleGroup(containing: media.mid)?.filter(taken.contains) ?? []
            #expect(answer.iceLite && answer.bundleGroups == [group] && media.transportMid == group.first && answer.session.setup == nil, "\(name)")
            #expect(answer.media.map(\.mid) == offer.media.map(\.mid) && answer.media.map(\.kind) == offer.media.map(\.kind))
            for section in answer.media {
                #expect(section.transport.iceUsernameFragment == "srv1" && section.transport.setup == .passive)
                #expect(taken.contains(section.mid ?? "") ? section.direction == .recvonly && section.port == 8189 : section.isRejected)
            }
            #expect(sdp.hasSuffix("\r\n") && !sdp.contains("\n\n") && !sdp.contains("\r\r"))
        }
    }

    @Test func codecPreferenceIsModeOneThenModeZeroThenH265() throws {
        func offer(_ formats: [(UInt8, String, String?)]) -> String {
            let attributes = formats.map { pt, map, fmtp in "a=rtpmap:\(pt) \(map)" + (fmtp.map { "\na=fmtp:\(pt) \($0)" } ?? "") }
            let section = "m=video 9 UDP/TLS/RTP/SAVPF \(formats.map { String($0.0) }.joined(separator: " "))\na=mid:v\na=sendonly\na=rtcp-mux\n"
            return WebRTCOfferTests.minimal(sections: [section + attributes.joined(separator: "\n")], bundle: "v")
        }
        let h265 = (UInt8(100), "H265/90000", String?.none)
        let mode0 = (UInt8(101), "H264/90000", String?("profile-level-id=42e01f"))
        let mode1 = (UInt8(102), "h264/90000", String?("packetization-mode=1"))
        #expect(try Self.answer(offer([h265, mode0, mode1])).media.payloadType == 102)
        #expect(try Self.answer(offer([h265, mode0])).media.payloadType == 101)
        #expect(try Self.answer(offer([h265, mode0])).media.packetizationMode == 0)
        #expect(try Self.answer(offer([h265, mode0, mode1]), codecs: [.h265]).media.codec == .h265)
        #expect(try Self.answer(offer([(96, "H264/9000", nil), h265])).media.payloadType == 100)
        #expect(throws: WebRTCAnswerError.noUsableCodec(accepted: [.h264], offered: ["H264"])) {
            try Self.answer(offer([(96, "H264/90000", "packetization-mode=2"), (97, "rtx/90000", "apt=96")]), codecs: [.h264])
        }
        #expect(throws: WebRTCAnswerError.noUsableCodec(accepted: [], offered: ["H265", "H264"])) {
            try Self.answer(offer([h265, mode0]), codecs: [])
        }
        // H.265 with decoding order numbers is not depacketized: another H.265 type, or none.
        let withDON = (UInt8(103), "H265/90000", String?("sprop-max-don-diff=2"))
        #expect(try Self.answer(offer([withDON, h265]), codecs: [.h265]).media.payloadType == 100)
        #expect(try Self.answer(offer([(103, "H265/90000", "sprop-max-don-diff=0")]), codecs: [.h265]).media.payloadType == 103)
        #expect(throws: WebRTCAnswerError.noUsableCodec(accepted: [.h265], offered: ["H265"])) {
            try Self.answer(offer([withDON]), codecs: [.h265])
        }
    }

    @Test func aVP8OnlyOfferIsRefusedNamingWhatWasOffered() throws {
        let vp8Only = Fixtures.chromium.replacingFirst(" 104 105 102 103 106 107 108 109 127 125 39 40", with: "")
            .replacingFirst(" 112 113", with: "")
        let error = #expect(throws: WebRTCAnswerError.self) { try Self.answer(vp8Only) }
        #expect(error == .noUsableCodec(accepted: [.h264, .h265], offered: ["VP8", "AV1", "VP9"]))
        #expect(error?.description == "no H.264 or H.265 video in the offer (offered: VP8, AV1, VP9)")
        let h265Only = #expect(throws: WebRTCAnswerError.self) { try Self.answer(Fixtures.chromium, codecs: [.h265]) }
        #expect(h265Only?.description == "no H.265 video in the offer (offered: VP8, H264, AV1, VP9)")
    }

    @Test(arguments: [
        (WebRTCOfferFixtures.chromium, "a=setup:actpass\r\na=mid:0", "a=setup:passive\r\na=mid:0", WebRTCAnswerError.passiveSetup(line: 8)),
        (WebRTCOfferFixtures.chromium, "a=rtcp-mux\r\na=rtcp-rsize", "a=rtcp-rsize", .noRTCPMux(line: 8)),
        (WebRTCOfferFixtures.chromium, "a=sendonly\r\na=msid:3f1c0d9e-8a57-4c2f-9b1e-6d2a7c3e4f50 b7", "a=recvonly\r\na=msid:3f1c0d9e-8a57-4c2f-9b1e-6d2a7c3e4f50 b7", .noSendingVideo),
        (WebRTCOfferFixtures.obs, "a=group:BUNDLE 0 1", "a=group:BUNDLE 0", .videoNotBundled(line: 26)),
        (WebRTCOfferFixtures.webrtcbin, "m=video 9 UDP/TLS/RTP/SAVPF 96", "m=video 9 RTP/AVP 96", .notDTLSSRTP(line: 7)),
        (WebRTCOfferFixtures.aiortc, "a=fingerprint:sha-256 \(WebRTCOfferFixtures.fingerprint)\r\n", "", .noSHA256Fingerprint(line: 7)),
        (WebRTCOfferFixtures.webrtcbin, "m=video 9 UDP", "m=video 0 UDP", .noSendingVideo),
    ])
    func offersWithoutAnAnswerableVideoAreRefused(text: String, find: String, replacement: String, expected: WebRTCAnswerError) throws {
        let changed = text.replacingFirst(find, with: replacement)
        #expect(changed != text)
        #expect(throws: expected) { try Self.answer(changed) }
    }

    @Test func setupActiveAndAbsentAreAnsweredPassive() throws {
        for setup in ["a=setup:active", ""] {
            let (sdp, _) = try Self.answer(Fixtures.webrtcbin.replacingFirst("a=setup:actpass", with: setup))
            #expect(sdp.contains("a=setup:passive\r\n"))
        }
    }

    @Test func dataChannelsAndSecondVideosAreRejectedInPlace() throws {
        let text = Fixtures.obs.replacingFirst("a=group:BUNDLE 0 1", with: "a=group:BUNDLE 0 1 2 3")
            + "m=video 9 UDP/TLS/RTP/SAVPF 96\r\na=mid:2\r\na=sendonly\r\na=rtcp-mux\r\na=rtpmap:96 H264/90000\r\n"
            + "m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:3\r\na=sctp-port:5000\r\n"
        let (sdp, media) = try Self.answer(text)
        #expect(media.mid == "1")
        let lines = Self.lines(sdp)
        #expect(lines.contains("a=group:BUNDLE 0 1"))
        let tail = Array(lines.suffix(9))
        #expect(tail == ["m=video 0 UDP/TLS/RTP/SAVPF 96", "c=IN IP4 192.0.2.10", "a=mid:2", "a=setup:passive", "a=rtcp-mux",
                         "m=application 0 UDP/DTLS/SCTP webrtc-datachannel", "c=IN IP4 192.0.2.10", "a=mid:3", "a=setup:passive"])
    }

    @Test func theFirstCandidateGivesTheConnectionAddressAndPort() throws {
        var local = Fixtures.local
        local.candidates = [("2001:db8::1", 40000), ("198.51.100.2", 40002)]
        let lines = Self.lines(try Self.answer(Fixtures.webrtcbin, local: local).sdp)
        #expect(lines.contains("c=IN IP6 2001:db8::1") && lines.contains("m=video 40000 UDP/TLS/RTP/SAVPF 96"))
        #expect(lines.contains("a=candidate:2 1 udp 2130706175 198.51.100.2 40002 typ host"))
    }

    @Test func localParametersThatAreNotSDPAreRefused() {
        var cases: [WebRTCAnswer.LocalParameters] = []
        for change in 0..<7 {
            var local = Fixtures.local
            switch change {
            case 0: local.iceUsernameFragment = "ab"
            case 1: local.icePassword = "short"
            case 2: local.fingerprintSHA256.removeLast()
            case 3: local.candidates = []
            case 4: local.candidates = [("10.0.0.256", 1)]
            case 5: local.candidates = [("192.0.2.1\r\na=evil", 1)]
            default: local.candidates = [("192.0.2.1", 0)]
            }
            cases.append(local)
        }
        for local in cases {
            #expect(throws: WebRTCAnswerError.self) { try Self.answer(Fixtures.webrtcbin, local: local) }
        }
    }

    /// Issue 31, item 7: H.264 offered as payload type 72 was answered, and then its packets were taken for RTCP
    /// (type 200, a sender report) under rtcp-mux and nothing decoded. 64-95 is refused with the reason, a usable
    /// type outside it is preferred, and RTX in that range is not answered.
    @Test func payloadTypesThatRTCPShadowsAreNeverAnswered() throws {
        func renumbered(_ offer: String, _ pairs: [(String, String)]) -> String {
            pairs.reduce(offer) { $0.replacingOccurrences(of: $1.0, with: $1.1) }
        }
        let only72 = renumbered(Fixtures.webrtcbin, [("SAVPF 96", "SAVPF 72"), (":96 ", ":72 ")])
        #expect(throws: WebRTCAnswerError.payloadTypeCollidesWithRTCP(payloadType: 72, line: 7)) { try Self.answer(only72) }
        #expect("\(WebRTCAnswerError.payloadTypeCollidesWithRTCP(payloadType: 72, line: 7))".contains("RFC 5761"))
        for type in [63, 96] {
            let fine = renumbered(Fixtures.webrtcbin, [("SAVPF 96", "SAVPF \(type)"), (":96 ", ":\(type) ")])
            #expect(try Self.answer(fine).media.payloadType == UInt8(type))
        }
        // Mode 1 at 72 and mode 0 at 97: the usable 97 wins although mode 1 ranks first elsewhere.
        let both = renumbered(only72, [("SAVPF 72", "SAVPF 72 97"),
                                       ("a=rtpmap:72 H264/90000", "a=rtpmap:72 H264/90000\r\na=rtpmap:97 H264/90000\r\na=fmtp:97 packetization-mode=0")])
        #expect(try Self.answer(both).media.payloadType == 97)
        let rtxInRange = renumbered(Fixtures.webrtcbin, [("SAVPF 96", "SAVPF 96 90"),
                                                         ("a=rtpmap:96 H264/90000", "a=rtpmap:96 H264/90000\r\na=rtpmap:90 rtx/90000\r\na=fmtp:90 apt=96")])
        #expect(try Self.answer(rtxInRange).media.retransmissionPayloadType == nil)
    }
}
