import Bitstream
import Testing

@Suite struct SessionDescriptionTests {
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
}
