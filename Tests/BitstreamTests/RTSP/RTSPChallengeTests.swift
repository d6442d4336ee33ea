import Bitstream
import Testing

@Suite struct RTSPChallengeTests {
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
