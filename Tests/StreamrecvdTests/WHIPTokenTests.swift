import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

/// The two cases through the real binary: the example's HTTPS lines uncommented on 0.0.0.0 with its demo
/// whip.token kept, and a token of 16 × `a`. The first is refused by `--check-config` and at start, on the
/// token_file line; the second is warned about by both. No output repeats a token.
@Suite(.serialized) struct WHIPTokenTests {
    static let example = TestEnvironment.repositoryRoot.appendingPathComponent("etc/streamrecvd/examples")

    /// The example whip.toml in a fresh folder, with `token` in whip.token beside it; `https` uncomments its HTTPS
    /// lines (listen on 0.0.0.0 at a free port) with a test certificate. Returns the configuration's path.
    static func exampleCopy(token: String?, https: Bool) throws -> String {
        let folder = try TestEnvironment.temporaryDirectory()
        var text = try String(contentsOf: example.appendingPathComponent("whip.toml"), encoding: .utf8)
        text = text.replacingOccurrences(of: "127.0.0.1:8889", with: "127.0.0.1:\(freePort())")
            .replacingOccurrences(of: "127.0.0.1:8189", with: "127.0.0.1:\(freePort())")
        if https {
            let (certificate, key) = try TestCertificate.make(in: folder)
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false).compactMap { line -> String? in
                if line.hasPrefix("listen = \"127.0.0.1:") { return nil }  // the HTTPS listen replaces it
                if line.hasPrefix("# listen = \"0.0.0.0:8443\"") { return "listen = \"0.0.0.0:\(freePort())\"" }
                if line.hasPrefix("# certificate = ") { return "certificate = \"\(certificate)\"" }
                if line.hasPrefix("# key = ") { return "key = \"\(key)\"" }
                return String(line)
            }
            text = lines.joined(separator: "\n")
        }
        let path = folder.appendingPathComponent("whip.toml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let tokenPath = folder.appendingPathComponent("whip.token").path
        if let token {
            try (token + "\n").write(toFile: tokenPath, atomically: true, encoding: .utf8)
        } else {
            try FileManager.default.copyItem(atPath: example.appendingPathComponent("whip.token").path, toPath: tokenPath)
        }
        chmod(tokenPath, 0o600)
        return path
    }

    /// The line `token_file = …` is on in `path`.
    static func tokenFileLine(_ path: String) throws -> Int {
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        return try #require(lines.firstIndex { $0.hasPrefix("token_file") }) + 1
    }

    @Test func theDemoTokenOnAPublicHTTPSListenerIsRefused() throws {
        let path = try Self.exampleCopy(token: nil, https: true)
        let demo = try String(contentsOf: Self.example.appendingPathComponent("whip.token"), encoding: .utf8).trimmingCharacters(in: .newlines)
        let expected = "\(path):\(try Self.tokenFileLine(path)): token_file \(URL(fileURLWithPath: path).deletingLastPathComponent().path)/whip.token: the demo token from etc/streamrecvd/examples/whip.token is published with streamrecvd; write your own: head -c 24 /dev/urandom"
        let check = try runProcess(tool("streamrecvd"), ["--check-config", path])
        #expect(check.status == 1 && check.standardError.contains(expected), "\(check.text)\(check.standardError)")
        // The daemon itself does not start on it either.
        let run = try runWatched(tool("streamrecvd"), ["--config", path])
        #expect(run.status == 1 && !run.crashed && run.errors.contains("the demo token from etc/streamrecvd/examples/whip.token"), "\(run.errors)")
        #expect(!(check.text + check.standardError + run.errors).contains(demo))
    }

    /// The example as shipped (loopback) still runs, with a warning that every local user has its token.
    @Test func theDemoTokenOnLoopbackIsWarnedAbout() throws {
        let path = try Self.exampleCopy(token: nil, https: false)
        let check = try runProcess(tool("streamrecvd"), ["--check-config", path])
        #expect(check.status == 0, "\(check.text)\(check.standardError)")
        #expect(check.text.contains("warning: token_file") && check.text.contains("is published with streamrecvd: any local user can post video to stream 'screen'"),
                "\(check.text)")
    }

    @Test func aGuessableTokenIsWarnedAboutByCheckConfigAndAtStart() throws {
        let token = String(repeating: "a", count: 16)
        let path = try Self.exampleCopy(token: token, https: true)
        let check = try runProcess(tool("streamrecvd"), ["--check-config", path])
        #expect(check.status == 0, "\(check.text)\(check.standardError)")
        let warning = "whip.token: the token looks guessable (about 4 bits by the estimate in docs/configuration.md, under 100); write your own"
        #expect(check.text.contains("warning: token_file ") && check.text.contains(warning), "\(check.text)")
        let log = try TestEnvironment.temporaryDirectory().appendingPathComponent("daemon.log").path
        let daemon = try spawn(tool("streamrecvd"), ["--config", path], log: log)
        defer { endProcess(daemon) }
        let deadline = Date().addingTimeInterval(20)
        var text = ""
        while !text.contains("ready:") && Date() < deadline {
            usleep(50_000)
            text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        }
        #expect(text.contains("warning") && text.contains(warning), "\(text)")
        #expect(!(check.text + check.standardError + text).contains(token))
    }
}
