import Bitstream
import Testing

/// The RTSP client's framing (RFC 2326 §4, §10.12; RFC 7826 §8, §14): responses, requests and interleaved frames
/// out of the connection's bytes.
@Suite struct RTSPMessageTests {
    /// Every event in `bytes`, or the error they end with.
    static func events(_ bytes: [UInt8]) throws(RTSPParseError) -> [RTSPStreamEvent] {
        var parser = RTSPStreamParser()
        parser.append(bytes)
        var events: [RTSPStreamEvent] = []
        while let event = try parser.next() { events.append(event) }
        return events
    }

    static func response(_ text: String) throws -> RTSPResponse {
        let events = try Self.events(Array(text.utf8))
        guard events.count == 1, case .response(let response) = events[0] else {
            throw ExpectedOneResponse(events: events)
        }
        return response
    }

    struct ExpectedOneResponse: Error { var events: [RTSPStreamEvent] }

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

    // MARK: Responses

    @Test func headerNamesMatchWhateverTheirCaseAndRepeatsAreKept() throws {
        // Header names are case-insensitive (RFC 2326 §4.2, RFC 7826 §5.2); a 401 may offer several challenges.
        let response = try Self.response("RTSP/1.0 401 Unauthorized\r\nCSeq: 3\r\nWWW-Authenticate: Digest realm=\"a\"\r\n"
                                         + "www-authenticate: Basic realm=\"a\"\r\n\r\n")
        #expect(response.statusCode == 401 && response.reason == "Unauthorized")
        #expect(response.header("WWW-AUTHENTICATE") == "Digest realm=\"a\"")
        #expect(response.headers(named: "Www-Authenticate") == ["Digest realm=\"a\"", "Basic realm=\"a\""])
        #expect(response.headers.map(\.name) == ["CSeq", "WWW-Authenticate", "www-authenticate"], "names as sent")
        #expect(response.header("Session") == nil)
    }

    @Test func spacesAroundAValueAreNotPartOfIt() throws {
        let response = try Self.response("RTSP/1.0 200 OK\r\nSession:   12345678;timeout=60 \t\r\nCSeq:7\r\n\r\n")
        #expect(response.header("session") == "12345678;timeout=60")
        #expect(response.header("cseq") == "7")
    }

    @Test func aFoldedLineContinuesThePreviousValue() throws {
        // Obsolete line folding (RFC 2616 §2.2, which RFC 2326 inherits): a line that starts with a space or tab.
        let response = try Self.response("RTSP/1.0 200 OK\r\nPublic: OPTIONS,\r\n DESCRIBE,\r\n\tSETUP\r\nCSeq: 1\r\n\r\n")
        #expect(response.header("public") == "OPTIONS, DESCRIBE, SETUP")
        #expect(response.header("cseq") == "1")
        // A fold with nothing before it to continue.
        #expect(throws: RTSPParseError.malformedHeader) { try Self.events(Array("RTSP/1.0 200 OK\r\n folded\r\n\r\n".utf8)) }
        #expect(throws: RTSPParseError.malformedHeader) { try Self.events(Array("RTSP/1.0 200 OK\r\n: empty name\r\n\r\n".utf8)) }
    }

    @Test func bareLineFeedsEndLinesAndTheHeaderBlock() throws {
        // Lenient servers send LF alone; the body starts right after the empty line.
        let response = try Self.response("RTSP/1.0 200 OK\nCSeq: 1\nContent-Length: 2\n\nhi")
        #expect(response.header("cseq") == "1" && response.body == Array("hi".utf8))
    }

    @Test func theReasonPhraseMayBeAbsentOrHoldSpaces() throws {
        #expect(try Self.response("RTSP/1.0 200\r\n\r\n").reason == "")
        #expect(try Self.response("RTSP/1.0 454 Session  Not Found\r\n\r\n").reason == "Session  Not Found")
        // RTSP/2.0 (RFC 7826) frames the same way.
        #expect(try Self.response("RTSP/2.0 200 OK\r\n\r\n").statusCode == 200)
    }

    @Test(arguments: ["RTSP/1.0 099 Low\r\n\r\n", "RTSP/1.0 20 OK\r\n\r\n", "RTSP/1.0 2x0 OK\r\n\r\n", "RTSP/1.0\r\n\r\n",
                      "OPTIONS *\r\n\r\n", "PLAY rtsp://cam/x HTTP/1.1\r\n\r\n"])
    func aStartLineWithoutAThreeDigitStatusOrAnRTSPVersionIsRefused(text: String) {
        // Status-Code is 3DIGIT (RFC 2326 §7.1.1); a Request-Line is Method SP Request-URI SP RTSP-Version (§6.1).
        #expect(throws: RTSPParseError.malformedStartLine) { try Self.events(Array(text.utf8)) }
    }

    @Test(arguments: ["-1", "ten", "", "1.5"])
    func aContentLengthThatIsNotANumberIsRefused(value: String) {
        let text = "RTSP/1.0 200 OK\r\nContent-Length: \(value)\r\n\r\n"
        #expect(throws: RTSPParseError.malformedHeader) { try Self.events(Array(text.utf8)) }
    }

    @Test func theLargestBodyIsAwaitedAndOneByteMoreIsRefused() throws {
        let header = "RTSP/1.0 200 OK\r\nContent-Length: \(RTSPStreamParser.maximumBodyBytes)\r\n\r\n"
        var parser = RTSPStreamParser()
        parser.append(Array(header.utf8))
        #expect(try parser.next() == nil, "waits for the body")
        parser.append([UInt8](repeating: 0x61, count: RTSPStreamParser.maximumBodyBytes))
        guard case .response(let response) = try parser.next() else { Issue.record("no response"); return }
        #expect(response.body.count == RTSPStreamParser.maximumBodyBytes && parser.pendingBytes == 0)
        let over = "RTSP/1.0 200 OK\r\nContent-Length: \(RTSPStreamParser.maximumBodyBytes + 1)\r\n\r\n"
        #expect(throws: RTSPParseError.bodyTooLong) { try Self.events(Array(over.utf8)) }
    }

    // MARK: Pieces and framing

    @Test func aPartialMessageIsHeldUntilItIsWhole() throws {
        var parser = RTSPStreamParser()
        let head = Array("RTSP/1.0 200 OK\r\nCSeq: 4\r\nContent-Length: 3\r\n\r\nab".utf8)
        parser.append(head)
        #expect(try parser.next() == nil)
        #expect(parser.pendingBytes == head.count, "nothing is consumed until the body is complete")
        parser.append(Array("c\r\n".utf8))
        guard case .response(let response) = try parser.next() else { Issue.record("no response"); return }
        #expect(response.body == Array("abc".utf8))
        // The blank line after the body is tolerated, and is all that is left.
        #expect(try parser.next() == nil && parser.pendingBytes == 0)
    }

    @Test func anInterleavedFrameWaitsForItsWholeLength() throws {
        // "$", channel, 16-bit length (RFC 2326 §10.12): 256 bytes announced.
        var parser = RTSPStreamParser()
        parser.append([0x24, 3, 0x01])
        #expect(try parser.next() == nil)
        parser.append([0x00] + [UInt8](repeating: 0x80, count: 255))
        #expect(try parser.next() == nil)
        parser.append([0x80, 0x24])
        #expect(try parser.next() == .interleaved(channel: 3, payload: [UInt8](repeating: 0x80, count: 256)[...]))
        #expect(parser.pendingBytes == 1, "the next frame's first byte")
    }

    @Test func aRequestFromTheServerCarriesItsMethodAndCSeq() throws {
        let events = try Self.events(Array("\r\nOPTIONS * RTSP/1.0\r\ncseq: 12\r\n\r\nANNOUNCE rtsp://c/x RTSP/1.0\r\n\r\n".utf8))
        #expect(events == [.request(method: "OPTIONS", cseq: "12"), .request(method: "ANNOUNCE", cseq: nil)])
    }

    @Test func aBeginningThatCannotBecomeRTSPIsRefusedBeforeItEnds() throws {
        // Incomplete, but already not "RTSP/" nor an upper-case method token and a space.
        #expect(throws: RTSPParseError.notRTSP) { try Self.events(Array("Rtsp/1.0 200".utf8)) }
        #expect(throws: RTSPParseError.notRTSP) { try Self.events(Array("SSH-2.0-OpenSSH".utf8)) }
        #expect(throws: RTSPParseError.notRTSP) { try Self.events(Array(String(repeating: "A", count: 40).utf8)) }
        // Incomplete and still plausible: wait.
        #expect(try Self.events(Array("RTSP/1.".utf8)).isEmpty)
        #expect(try Self.events(Array("SET_PARAMETER".utf8)).isEmpty)
        #expect(try Self.events(Array("TEARDOWN rtsp://cam/x RTSP/1.0\r\n".utf8)).isEmpty)
    }
}
