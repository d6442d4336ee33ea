import Bitstream
import Testing

/// The RTSP client's pure parts: the connection's framing, the SDP, the authentication challenge, the RTCP
/// receiver report.
@Suite struct RTSPProtocolTests {
    @Test func responsesAndInterleavedFramesAreSplitWhereverTheBytesBreak() throws {
        let describe = "RTSP/1.0 200 OK\r\nCSeq: 2\r\nContent-Type: application/sdp\r\nContent-Length: 5\r\n\r\nv=0\r\n"
        let frame: [UInt8] = [0x24, 0, 0, 3, 0xaa, 0xbb, 0xcc]
        let request = "GET_PARAMETER rtsp://cam/x RTSP/1.0\r\nCSeq: 7\r\n\r\n"
        let stream = Array(describe.utf8) + frame + Array(request.utf8) + [0x24, 1, 0, 0]
        // Every split point: the events do not depend on how TCP cut the bytes.
        for cut in 0...stream.count {
            var parser = RTSPStreamParser()
            var events: [RTSPStreamEvent] = []
            for part in [stream[..<cut], stream[cut...]] {
                parser.append(part)
                while let event = try parser.next() { events.append(event) }
            }
            #expect(events.count == 4, "cut at \(cut)")
            guard events.count == 4, case .response(let response) = events[0] else { continue }
            #expect(response.statusCode == 200 && response.header("content-length") == "5" && response.body == Array("v=0\r\n".utf8))
            #expect(events[1] == .interleaved(channel: 0, payload: [0xaa, 0xbb, 0xcc][...]))
            #expect(events[2] == .request(method: "GET_PARAMETER", cseq: "7"))
            #expect(events[3] == .interleaved(channel: 1, payload: [][...]))
        }
    }

    @Test(arguments: [
        (Array("HTTP/1.1 400 Bad Request\r\n\r\n".utf8), RTSPParseError.malformedStartLine),
        ([0x01, 0x02, 0x7f] + Array("garbage".utf8), .notRTSP),
        (Array("RTSP/1.0 200 OK\r\nCSeq: 1\r\nContent-Length: 999999999\r\n\r\n".utf8), .bodyTooLong),
        (Array("RTSP/1.0 2000 OK\r\n\r\n".utf8), .malformedStartLine),
        (Array("RTSP/1.0 200 OK\r\nno colon here\r\n\r\n".utf8), .malformedHeader),
        (Array("RTSP/1.0 200 OK\r\nCSeq: 1\u{0}\r\n\r\n".utf8), .notRTSP),
        (Array("lowercase".utf8), .notRTSP),
    ])
    func bytesThatAreNotRTSPAreAnError(bytes: [UInt8], expected: RTSPParseError) {
        var parser = RTSPStreamParser()
        parser.append(bytes)
        #expect(throws: expected) { while try parser.next() != nil {} }
    }

    @Test func headersThatNeverEndAreAnErrorNotAGrowingBuffer() {
        var parser = RTSPStreamParser()
        parser.append(Array("RTSP/1.0 200 OK\r\n".utf8))
        let line = Array("X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n".utf8)
        var thrown: RTSPParseError?
        for _ in 0..<1000 where thrown == nil {
            parser.append(line)
            do { _ = try parser.next() } catch { thrown = error }
        }
        #expect(thrown == .headerTooLong)
    }

    /// The SDP gst-rtsp-server and cameras send: the first H.264/H.265 video, its control and parameter sets.
    @Test func sessionDescriptionsGiveTheVideoItsControlAndParameterSets() throws {
        let h264 = try SessionDescription(parsing: """
            v=0\r
            o=- 1 1 IN IP4 127.0.0.1\r
            s=Session\r
            a=control:*\r
            m=audio 0 RTP/AVP 0\r
            a=control:stream=0\r
            m=video 0 RTP/AVP 96\r
            a=rtpmap:96 H264/90000\r
            a=fmtp:96 packetization-mode=1;profile-level-id=64001e;sprop-parameter-sets=Z2QAHqzZQUH7ARAAAAMAEAAAAwMg8WLZYA==,aOvjyyLA\r
            a=control:stream=1\r

            """)
        #expect(h264.control == "*")
        #expect(h264.video.codec == .h264 && h264.video.payloadType == 96 && h264.video.clockRate == 90000)
        #expect(h264.video.control == "stream=1" && h264.video.packetizationMode == 1)
        #expect(h264.video.parameterSets.count == 2 && h264.video.parameterSets[0].first == 0x67 && h264.video.parameterSets[1] == [0x68, 0xeb, 0xe3, 0xcb, 0x22, 0xc0])
        let h265 = try SessionDescription(parsing: """
            v=0
            m=video 0 RTP/AVP 97 96
            a=rtpmap:96 H265/90000
            a=rtpmap:97 VP8/90000
            a=fmtp:96 sprop-vps=QAEMAf//; sprop-sps=QgEB; sprop-pps=RAHA
            """)
        #expect(h265.video.codec == .h265 && h265.video.payloadType == 96 && h265.video.control == nil)
        #expect(h265.video.parameterSets.map { $0[0] >> 1 & 0x3f } == [32, 33, 34])
        #expect(throws: SessionDescription.ParseError.unsupportedVideo(["VP8"])) {
            try SessionDescription(parsing: "v=0\nm=video 0 RTP/AVP 97\na=rtpmap:97 VP8/90000\n")
        }
        // What a hostile server offers is bounded in the error: each name once, printable, at most 8.
        let formats = (0..<100).map { String(96 + $0 % 32) }.joined(separator: " ")
        let names = (0..<32).map { "a=rtpmap:\(96 + $0) X\u{1b}\($0 % 12)/90000" }.joined(separator: "\n")
        #expect(throws: SessionDescription.ParseError.unsupportedVideo((0..<8).map { "X\($0)" })) {
            try SessionDescription(parsing: "v=0\nm=video 0 RTP/AVP \(formats)\n\(names)\n")
        }
        #expect(throws: SessionDescription.ParseError.noVideo) { try SessionDescription(parsing: "v=0\nm=audio 0 RTP/AVP 0\n") }
        #expect(throws: SessionDescription.ParseError.notSDP) { try SessionDescription(parsing: "<html>") }
    }

    @Test func base64RoundTrips() {
        for length in 0..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(Base64.decode(Base64.encode(bytes)) == bytes)
        }
        #expect(Base64.encode(Array("Aladdin:open sesame".utf8)) == "QWxhZGRpbjpvcGVuIHNlc2FtZQ==")
        #expect(Base64.decode("not base64!") == nil)
    }

    @Test func challengesPreferDigestAndReadQuotedParameters() {
        let challenge = RTSPChallenge(headers: [
            "Basic realm=\"cam\"",
            "Digest realm=\"Login to \\\"cam\\\"\", nonce=\"abc, def\", qop=\"auth,auth-int\", opaque=\"xyz\", stale=FALSE",
        ])
        #expect(challenge?.scheme == .digest(realm: "Login to \"cam\"", nonce: "abc, def", opaque: "xyz",
                                             qualityOfProtection: true, sessionAlgorithm: false))
        #expect(challenge?.stale == false)
        #expect(RTSPChallenge(headers: ["Digest realm=\"x\", nonce=\"y\", stale=TRUE"])?.stale == true)
        // Quoted values go back escaped, as they came.
        let answer = challenge!.authorization(user: "u", password: "p", method: "DESCRIBE", uri: "rtsp://cam/", count: 1,
                                              clientNonce: "n") { _ in [UInt8](repeating: 0, count: 16) }
        #expect(answer.contains("realm=\"Login to \\\"cam\\\"\"") && answer.contains("nonce=\"abc, def\""), "\(answer)")
        #expect(RTSPChallenge(headers: ["Basic realm=\"cam\""])?.scheme == .basic)
        // A quote followed by a combining mark is one Character but still a quote to escape.
        let combining = RTSPChallenge(headers: ["Digest realm=\"a\\\"\u{301}b\", nonce=\"n\""])!
        let escapedAnswer = combining.authorization(user: "u", password: "p", method: "DESCRIBE", uri: "rtsp://cam/", count: 1,
                                                    clientNonce: "n") { _ in [UInt8](repeating: 0, count: 16) }
        #expect(escapedAnswer.contains("realm=\"a\\\"\u{301}b\""), "\(escapedAnswer)")
        #expect(RTSPChallenge(headers: ["Digest realm=\"x\", nonce=\"y\", algorithm=SHA-256"]) == nil)
        #expect(RTSPChallenge(headers: ["Negotiate"]) == nil)
        let basic = RTSPChallenge(headers: ["Basic realm=\"cam\""])!
        let header = basic.authorization(user: "Aladdin", password: "open sesame", method: "DESCRIBE", uri: "rtsp://cam/",
                                         count: 1, clientNonce: "n") { _ in [] }
        #expect(header == "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==")
    }

    /// RFC 3550 §6.4.2's layout: RR with one report block, then SDES CNAME; loss and highest sequence counted
    /// across a sequence number wrap.
    @Test func receiverReportsCountLossAcrossTheWrap() {
        var statistics = RTPReceptionStatistics(clockRate: 90000)
        var arrival: UInt64 = 1_000_000_000
        for sequence in [65530, 65531, 65533, 65534, 0, 1, 3] as [UInt16] {
            statistics.record(ssrc: 0x1234_5678, sequenceNumber: sequence, timestamp: 3600 * UInt32(sequence &- 65530), arrival: arrival)
            arrival += 40_000_000
        }
        #expect(statistics.cumulativeLost == 3 && statistics.extendedHighestSequence == 65536 + 3)
        let report = statistics.report(senderSSRC: 0xdead_beef, cname: "streamrecvd", now: arrival)
        #expect(report[0] == 0x81 && report[1] == 201 && report[3] == 7)
        #expect(Array(report[8..<12]) == [0x12, 0x34, 0x56, 0x78])
        #expect(Int(report[12]) == 3 * 256 / 10 && Array(report[13..<16]) == [0, 0, 3])  // fraction lost 3/10, cumulative 3
        #expect(Array(report[16..<20]) == [0, 1, 0, 3])
        #expect(report[32] == 0x81 && report[33] == 202 && report.count % 4 == 0)
        #expect(String(decoding: report[42..<53], as: UTF8.self) == "streamrecvd")
        // Nothing new lost since: the next fraction is zero.
        let next = statistics.report(senderSSRC: 0xdead_beef, cname: "streamrecvd", now: arrival)
        #expect(next[12] == 0)
        let goodbye: [UInt8] = [0x81, 203, 0, 1, 0x12, 0x34, 0x56, 0x78]
        #expect(goodbye.withUnsafeBytes { RTPReceptionStatistics.news(in: $0) }.goodbye)
    }

    @Test func rtcpNewsNameTheirSources() {
        let goodbye: [UInt8] = [0x82, 203, 0, 2, 0x12, 0x34, 0x56, 0x78, 0, 0, 0, 9]
        #expect(goodbye.withUnsafeBytes { RTPReceptionStatistics.news(in: $0) }.goodbyeSources == [0x1234_5678, 9])
        // A count larger than the packet holds: only what it holds.
        let short: [UInt8] = [0x9f, 203, 0, 1, 0, 0, 0, 7]
        #expect(short.withUnsafeBytes { RTPReceptionStatistics.news(in: $0) }.goodbyeSources == [7])
        var report: [UInt8] = [0x80, 200, 0, 6, 0xaa, 0xbb, 0xcc, 0xdd] + [1, 2, 3, 4, 5, 6, 7, 8] + [UInt8](repeating: 0, count: 12)
        report += goodbye
        let news = report.withUnsafeBytes { RTPReceptionStatistics.news(in: $0) }
        #expect(news.senderReport == .init(ssrc: 0xaabb_ccdd, ntpTimestamp: 0x0102_0304_0506_0708) && news.goodbye)
    }

    @Test func theMediaGateTakesOnlyTheServersPortsAndSource() {
        func rtp(_ ssrc: UInt32) -> [UInt8] { [0x80, 96, 0, 1, 0, 0, 0, 0] + (0..<4).map { UInt8(truncatingIfNeeded: ssrc >> (24 - 8 * $0)) } }
        var named = RTSPMediaGate(serverPorts: (6970, 6971), ssrc: 0x5354_524d)
        #expect(rtp(0x5354_524d).withUnsafeBytes { named.admitRTP($0, fromPort: 6972) } == .foreignPort(6972))
        #expect(rtp(0x5354_524d).withUnsafeBytes { named.admitRTP($0, fromPort: 6970) } == .accepted)
        #expect(rtp(0x4556_494c).withUnsafeBytes { named.admitRTP($0, fromPort: 6970) } == .foreignSource(0x4556_494c))
        #expect([0x40, 96].withUnsafeBytes { named.admitRTP($0, fromPort: 6970) } == .malformed)
        #expect(named.admitsRTCP(fromPort: 6971) && !named.admitsRTCP(fromPort: 6970))
        #expect(named.owns(0x5354_524d) && !named.owns(0x4556_494c))
        // A camera that names one SSRC and sends another from its named port: that one is taken, then held.
        var misnamed = RTSPMediaGate(serverPorts: (6970, 6971), ssrc: 1)
        #expect(rtp(2).withUnsafeBytes { misnamed.admitRTP($0, fromPort: 6972) } == .foreignPort(6972))
        #expect(rtp(2).withUnsafeBytes { misnamed.admitRTP($0, fromPort: 6970) } == .acceptedOtherThanNamed(named: 1))
        #expect(rtp(1).withUnsafeBytes { misnamed.admitRTP($0, fromPort: 6970) } == .foreignSource(1) && misnamed.ssrc == 2)
        // Nothing named: the first valid packet's port and SSRC are the server's from then on.
        var learning = RTSPMediaGate(serverPorts: nil, ssrc: nil)
        #expect(!learning.admitsRTCP(fromPort: 5001) && !learning.owns(7))
        #expect(rtp(7).withUnsafeBytes { learning.admitRTP($0, fromPort: 5000) } == .accepted)
        #expect(rtp(7).withUnsafeBytes { learning.admitRTP($0, fromPort: 5002) } == .foreignPort(5002))
        #expect(rtp(8).withUnsafeBytes { learning.admitRTP($0, fromPort: 5000) } == .foreignSource(8))
        #expect(learning.admitsRTCP(fromPort: 5001) && learning.ssrc == 7)
        // Interleaved: no ports, the SSRC rule holds.
        var interleaved = RTSPMediaGate(serverPorts: nil, interleaved: true, ssrc: nil)
        #expect(rtp(1).withUnsafeBytes { interleaved.admitRTP($0, fromPort: nil) } == .accepted)
        #expect(rtp(2).withUnsafeBytes { interleaved.admitRTP($0, fromPort: nil) } == .foreignSource(2))
    }

    @Test func transportHeadersAreRead() {
        let header = RTSPTransportHeader(parsing: "RTP/AVP;unicast;client_port=5000-5001;server_port=6970-6971;ssrc=5354524D;source=\"10.0.0.9\"")
        #expect(!header.isInterleaved && header.serverPorts == .init(first: 6970, second: 6971))
        #expect(header.ssrc == 0x5354_524d && header.source == "10.0.0.9")
        let tcp = RTSPTransportHeader(parsing: "RTP/AVP/TCP;unicast;interleaved=2;ssrc=123456789")
        #expect(tcp.isInterleaved && tcp.interleaved == .init(first: 2, second: 3) && tcp.ssrc == nil)
    }

    @Test func basicIsNeverChosenWhenDigestIsOfferedInAnyForm() {
        let sha = ["Digest realm=\"cam\", nonce=\"n\", algorithm=SHA-256", "Basic realm=\"cam\""]
        #expect(RTSPChallenge(headers: sha) == nil)
        #expect(RTSPChallenge.offer(in: sha, allowingBasic: true) == .digestUnsupported(algorithms: ["SHA-256"]))
        #expect(RTSPChallenge.offer(in: ["Basic realm=\"cam\""], allowingBasic: false) == .basicNotAllowed)
        #expect(RTSPChallenge.offer(in: ["Basic realm=\"cam\""], allowingBasic: true) == .usable(RTSPChallenge(scheme: .basic)))
        #expect(RTSPChallenge.offer(in: ["Negotiate"], allowingBasic: true) == RTSPChallenge.Offer.none)
        guard case .usable(let digest) = RTSPChallenge.offer(in: sha + ["Digest realm=\"cam\", nonce=\"m\""], allowingBasic: false),
              case .digest = digest.scheme else {
            Issue.record("Digest MD5 next to SHA-256 is not taken")
            return
        }
    }
}
