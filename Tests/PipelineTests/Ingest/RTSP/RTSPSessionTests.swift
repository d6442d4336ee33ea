import Bitstream
@testable import Pipeline
import Testing

/// The RTSP session's plain parts: Digest answers (RFC 2617's own example), control URLs, Transport and Session
/// parameters.
@Suite struct RTSPSessionTests {
    @Test func digestAnswersMatchRFC2617() {
        #expect(RTSPSession.md5([]).map { String($0, radix: 16) }.joined() == "d41d8cd98f0b24e980998ecf8427e")
        let challenge = RTSPChallenge(headers: [
            "Digest realm=\"testrealm@host.com\", qop=\"auth,auth-int\", nonce=\"dcd98b7102dd2f0e8b11d0f600bfb0c093\", opaque=\"5ccc069c403ebaf9f0171e9517f40e41\"",
        ])!
        let header = challenge.authorization(user: "Mufasa", password: "Circle Of Life", method: "GET", uri: "/dir/index.html",
                                             count: 1, clientNonce: "0a4f113b", md5: RTSPSession.md5)
        #expect(header.contains("response=\"6629fae49393a05397450978507c4ef1\""), "\(header)")
        #expect(header.contains("nc=00000001") && header.contains("cnonce=\"0a4f113b\"") && header.contains("qop=auth"))
        #expect(header.contains("opaque=\"5ccc069c403ebaf9f0171e9517f40e41\""))
        // Without qop (RFC 2069, what many cameras send): MD5(HA1:nonce:HA2).
        let plain = RTSPChallenge(headers: ["Digest realm=\"testrealm@host.com\", nonce=\"dcd98b7102dd2f0e8b11d0f600bfb0c093\""])!
        let answer = plain.authorization(user: "Mufasa", password: "Circle Of Life", method: "GET", uri: "/dir/index.html",
                                         count: 1, clientNonce: "x", md5: RTSPSession.md5)
        #expect(answer.contains("response=\"670fd8c2df070c60b045671b8b24ff02\"") && !answer.contains("qop"), "\(answer)")
    }

    @Test func controlURLsResolveAgainstTheContentBase() {
        let base = "rtsp://127.0.0.1:8554/cam/"
        #expect(RTSPSession.resolve("stream=0", base: base) == "rtsp://127.0.0.1:8554/cam/stream=0")
        #expect(RTSPSession.resolve("trackID=1", base: "rtsp://cam/live") == "rtsp://cam/live/trackID=1")
        #expect(RTSPSession.resolve("rtsp://other/x", base: base) == "rtsp://other/x")
        #expect(RTSPSession.resolve("*", base: base) == base && RTSPSession.resolve(nil, base: base) == base)
        let response = RTSPResponse(statusCode: 200, reason: "OK", headers: [("Content-Base", base)], body: [])
        #expect(RTSPSession.contentBase(response, requestURL: "rtsp://127.0.0.1:8554/cam") == base)
    }

    @Test func transportAndSessionParameters() {
        let transport = "RTP/AVP;unicast;client_port=50000-50001;server_port=6970-6971;ssrc=1234"
        #expect(RTSPSession.transportParameter("server_port", in: transport).map { [$0.first, $0.second] } == [6970, 6971])
        #expect(RTSPSession.transportParameter("interleaved", in: "RTP/AVP/TCP;interleaved=2-3").map { [$0.first, $0.second] } == [2, 3])
        #expect(RTSPSession.transportParameter("interleaved", in: "RTP/AVP/TCP;interleaved=4").map { [$0.first, $0.second] } == [4, 5])
        #expect(RTSPSession.transportParameter("server_port", in: "RTP/AVP;unicast") == nil)
        #expect(RTSPSession.sessionTimeout("1234ABCD;timeout=30") == 30)
        #expect(RTSPSession.sessionTimeout("1234ABCD") == 60)
    }

    @Test func redirectsKeepCredentialsOnlyForTheConfiguredServer() throws {
        guard case .success(let configured) = RTSPSource.parse("rtsp://viewer:secret@cam.local:554/live") else {
            Issue.record("source")
            return
        }
        let same = try RTSPSession.redirectTarget("rtsp://cam.local:554/other", from: configured, configured: configured)
        #expect(same.path == "/other" && same.user == "viewer" && same.password == Secret("secret"))
        let other = try RTSPSession.redirectTarget("rtsp://evil:x@other.local:8554/live", from: configured, configured: configured)
        #expect(other.host == "other.local" && other.user == nil && other.password == nil)
        #expect(throws: RTSPFailure.redirectRefused("a redirect to another scheme (http) is not followed; only rtsp:// is")) {
            try RTSPSession.redirectTarget("http://cam.local/live", from: configured, configured: configured)
        }
    }

    @Test func theIntakeBudgetThrottlesWhatDoesNotBecomeVideo() {
        var budget = InterleavedIntakeBudget()
        let start: UInt64 = 5_000_000_000
        #expect(budget.note(unproductive: 4 << 20, now: start) == nil)
        #expect(budget.note(unproductive: 4 << 20, now: start + 1) == nil)
        #expect(budget.note(unproductive: 1, now: start + 2) == start + 1_000_000_000)
        // A new window, a new budget.
        #expect(budget.note(unproductive: 1 << 20, now: start + 1_000_000_000) == nil)
    }

    @Test func aPlayAndEndCycleIsLoggedOnceAndDoesNotResetTheBackoff() {
        var policy = RTSPReconnectPolicy()
        #expect(policy.isNews(playing: "h264 over interleaved TCP"))
        var waits: [Double] = []
        var news: [Bool] = []
        for _ in 0..<6 {
            let (wait, isNews) = policy.ended(.closed, played: "h264 over interleaved TCP", lasted: false)
            waits.append(wait)
            news.append(isNews)
        }
        #expect(waits == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0] && news == [true, false, false, false, false, false])
        #expect(!policy.isNews(playing: "h264 over interleaved TCP") && policy.isNews(playing: "h264 over UDP"))
        // A session that lasted: the backoff starts over, and its end is news again.
        let after = policy.ended(.closed, played: "h264 over interleaved TCP", lasted: true)
        #expect(after == (0.1, true) && policy.attempt == 1 && policy.isNews(playing: "h264 over interleaved TCP"))
        // A refused password waits at least 5 s.
        #expect(policy.ended(.unauthorized(credentialsSent: true), played: nil, lasted: false).seconds == 5)
    }
}
