import Foundation
import Glibc
@testable import Pipeline
import StreamrecvTestSupport
import Testing

/// WHIP bearer tokens that can be guessed: the demo token shipped in the examples is refused wherever another host
/// can reach the endpoint (warned about on loopback), a low-entropy token is warned about, and neither message
/// repeats the token.
struct TokenStrengthTests {
    /// A base64url token of `bytes` random bytes, as `head -c N /dev/urandom | base64 | tr '+/' '-_'` makes one.
    static func randomToken(bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        let raw = (0..<bytes).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Data(raw).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    }

    @Test(arguments: [
        String(repeating: "a", count: 16), "aaaaaaaabbbbbbbb", "0123456789abcdef", "password1234567890",
        "abcXYZ12abcXYZ12abcXYZ12", "deadbeefdeadbeefdeadbeef", "letmeinletmeinletmein", "qwertyuiopasdfghjkl",
        String(repeating: "Ab1-", count: 64),
    ])
    func patternedOrShortTokensAreGuessable(token: String) {
        #expect(TokenStrength.isGuessable(token), "\(token): \(TokenStrength.estimatedBits(token)) bits")
    }

    @Test func randomTokensOf128BitsPassAndOf96BitsDoNot() {
        for _ in 0..<500 {
            let strong = Self.randomToken(bytes: 24)  // the command the docs and messages give
            #expect(!TokenStrength.isGuessable(strong), "\(TokenStrength.estimatedBits(strong)) bits")
            #expect(!TokenStrength.isGuessable(UUID().uuidString.lowercased()))
            let weak = Self.randomToken(bytes: 12)
            #expect(TokenStrength.isGuessable(weak), "\(TokenStrength.estimatedBits(weak)) bits")
        }
        #expect(!TokenStrength.isGuessable("3f2b8c1e9d4a4e7b8a6f2c5d1e0b9a74"))  // 128 bits as hex
    }

    @Test func theDemoTokenIsTheShippedOne() throws {
        let shipped = try String(contentsOf: TestEnvironment.repositoryRoot.appendingPathComponent(TokenStrength.demoTokenPath), encoding: .utf8)
        #expect(shipped.trimmingCharacters(in: .newlines) == TokenStrength.demoToken)
    }

    /// `[webrtc]` with HTTPS on `host` and one whip stream whose token file holds `token`; the text and its folder.
    static func configuration(token: String, host: String) throws -> (text: String, folder: String) {
        let (folder, name) = try WebRTCConfigurationTests.tokenFile(token)
        _ = try TestCertificate.make(in: URL(fileURLWithPath: folder))
        let text = "[webrtc]\nlisten = \"\(host):8443\"\nmedia = \"127.0.0.1:8189\"\ncertificate = \"server.pem\"\nkey = \"server.key\"\n"
            + "[[stream]]\nname = \"screen\"\nlisten = \"whip\"\ntoken_file = \"\(name)\"\n"
        return (text, folder)
    }

    @Test(arguments: ["0.0.0.0", "::", "192.0.2.1"])
    func theDemoTokenIsRefusedBeyondLoopbackOnItsLine(host: String) throws {
        let (text, folder) = try Self.configuration(token: TokenStrength.demoToken, host: host)
        let error = expectRefused(text, file: folder + "/c.toml", line: 9,
                                  message: "the demo token from etc/streamrecvd/examples/whip.token is published with streamrecvd; write your own: head -c 24")
        #expect(error.map { !$0.description.contains(TokenStrength.demoToken) } == true)
    }

    @Test(arguments: ["127.0.0.1", "localhost", "::1"])
    func theDemoTokenOnLoopbackIsWarnedAbout(host: String) throws {
        let (text, folder) = try Self.configuration(token: TokenStrength.demoToken, host: host)
        let configuration = try ConfigurationLoader.parse(text, file: folder + "/c.toml")
        #expect(configuration.warnings.contains { $0.contains("is published with streamrecvd: any local user can post video to stream 'screen'") },
                "\(configuration.warnings)")
        #expect(!configuration.warnings.contains { $0.contains("guessable") || $0.contains(TokenStrength.demoToken) })
    }

    @Test func aGuessableTokenIsWarnedAboutWithoutRepeatingIt() throws {
        let token = String(repeating: "a", count: 16)
        let (text, folder) = try Self.configuration(token: token, host: "0.0.0.0")
        let configuration = try ConfigurationLoader.parse(text, file: folder + "/c.toml")
        let warning = configuration.warnings.first { $0.contains("the token looks guessable") }
        #expect(warning?.contains("about 4 bits") == true && warning?.contains("head -c 24 /dev/urandom") == true, "\(configuration.warnings)")
        #expect(!configuration.warnings.contains { $0.contains(token) })
        // A hundred streams behind one token file: one warning, not a hundred.
        let shared = text + (1...100).map { "[[stream]]\nname = \"screen\($0)\"\nlisten = \"whip\"\ntoken_file = \"whip.token\"\n" }.joined()
        let sharing = try ConfigurationLoader.parse(shared, file: folder + "/c.toml")
        #expect(sharing.warnings.filter { $0.contains("the token looks guessable") }.count == 1, "\(sharing.warnings)")
        let (good, goodFolder) = try Self.configuration(token: Self.randomToken(bytes: 24), host: "0.0.0.0")
        #expect(!(try ConfigurationLoader.parse(good, file: goodFolder + "/c.toml")).warnings.contains { $0.contains("guessable") })
    }

    /// The names socket activation passes `[webrtc]`'s sockets under cannot be a stream's.
    @Test(arguments: ["whip-http", "whip-media"])
    func aStreamMayNotTakeAReservedName(name: String) {
        _ = expectRefused("[[stream]]\nname = \"\(name)\"\nlisten = \"tcp://127.0.0.1:1\"\n", line: 2, message: "the name '\(name)' is reserved")
    }
}
