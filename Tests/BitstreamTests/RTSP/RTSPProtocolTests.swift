import Bitstream
import Testing

/// The RTSP client's framing: responses, requests and interleaved frames out of the connection's bytes.
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
}
