import Bitstream
@testable import Pipeline
import Testing

/// The decode session's framing: chosen once per connection from the stream's source, and its RTP and MPEG-TS
/// state kept across packets when changed in place.
@Suite struct DecodeSessionFramingTests {
    static func stream(_ text: String) throws -> StreamConfiguration {
        try ConfigurationLoader.parse("[[stream]]\nname = \"a\"\n\(text)\n", file: "t.toml").streams[0]
    }

    @Test func eachSourceStartsWithItsFraming() throws {
        let cases: [(String, String)] = [
            ("listen = \"tcp://127.0.0.1:1\"", "annexB"), ("listen = \"udp://127.0.0.1:1\"", "annexB"),
            ("listen = \"rtp://127.0.0.1:1\"\ncodec = \"h265\"\nrtp_payload_type = 100\nrtp_reorder_window = 32", "rtp"),
            ("listen = \"srt://127.0.0.1:1\"", "transportStream"), ("source = \"rtsp://cam/x\"", "awaitingSessionDescription"),
        ]
        for (text, expected) in cases {
            let framing = DecodeSession.Framing.initial(for: try Self.stream(text))
            let name = switch framing {
            case .annexB: "annexB"
            case .rtp: "rtp"
            case .awaitingSessionDescription: "awaitingSessionDescription"
            case .transportStream: "transportStream"
            }
            #expect(name == expected, "\(text)")
        }
        let rtp = try #require(DecodeSession.Framing.initial(for: try Self.stream(cases[2].0)).rtp)
        #expect(rtp.codec == .h265 && rtp.payloadType == 100)
    }

    /// What `withRTP` and `withTransportStream` change stays: the source of the packets depacketized, the PTS
    /// extended across calls.
    @Test func stateChangedInPlaceStays() throws {
        var framing = DecodeSession.Framing.initial(for: try Self.stream("listen = \"rtp://127.0.0.1:1\"\ncodec = \"h264\""))
        for sequence: UInt16 in 1...2 {
            let packet = RTPPacket(marker: true, payloadType: 96, sequenceNumber: sequence, timestamp: 0, ssrc: 42, payload: [0x41, 1][...])
            framing.withRTP { $0.push(packet) { _ in } }
        }
        #expect(framing.rtp?.ssrc == 42)
        #expect(framing.withTransportStream { _ in 1 } == nil, "not MPEG-TS")
        var transport = DecodeSession.Framing.initial(for: try Self.stream("listen = \"srt://127.0.0.1:1\""))
        let period: Int64 = 1 << 33
        let before = transport.withTransportStream { $0.unwrap(period - 10) }
        let after = transport.withTransportStream { $0.unwrap(5) }
        #expect(before == period - 10)
        #expect(after == period + 5, "extended from where the previous call left it")
        #expect(transport.withRTP { _ in 1 } == nil, "not RTP")
    }
}
