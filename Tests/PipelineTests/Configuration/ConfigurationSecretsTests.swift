import Foundation
import Glibc
@testable import Pipeline
import StreamrecvTestSupport
import Testing

/// What a configuration must refuse or warn about beyond its syntax: secrets cut short by C or readable by every
/// user, credentials printed from URLs, sockets spelt two ways, errors that name no line.
struct ConfigurationSecretsTests {
    @Test(arguments: [
        // IPv4-mapped IPv6 addresses are their IPv4 address: the second bind would fail at start.
        ("[[stream]]\nname = \"a\"\nlisten = \"udp://127.0.0.1:5000\"\n[[stream]]\nname = \"b\"\nlisten = \"udp://[::ffff:127.0.0.1]:5000\"\n", 6, "same UDP port"),
        ("[[stream]]\nname = \"a\"\nlisten = \"srt://[::ffff:127.0.0.1]:5000\"\n[[stream]]\nname = \"b\"\nlisten = \"rtp://127.0.0.1:5000\"\ncodec = \"h264\"\n", 6, "same UDP port"),
        ("[[stream]]\nname = \"a\"\nlisten = \"tcp://[::ffff:0.0.0.0]:5000\"\n[[stream]]\nname = \"b\"\nlisten = \"tcp://127.0.0.1:5000\"\n", 6, "same TCP port"),
        // A NUL would cut the passphrase where libsrt reads it: a caller knowing the prefix would get in.
        ("[[stream]]\nname = \"a\"\nlisten = \"srt://127.0.0.1:5000\"\npassphrase = \"long-enough\\u0000tail\"\n", 4, "NUL character"),
        ("[[stream]]\nname = \"a\"\nlisten = \"srt://127.0.0.1:5000\"\npassphrase = \"long-enough\\u0007tail\"\n", 4, "without control characters"),
        ("[[stream]]\nname = \"a\"\nlisten = \"tcp://127.0.0.1:1\"\nshm_name = \"ring\\u001Bx\"\n", 4, "must not contain control characters"),
        ("[[stream]]\nname = \"a\"\nlisten = \"tcp://127.0.0.1:1\"\nshm_name = \"ring\\U00000000x\"\n", 4, "NUL character"),
        ("[daemon]\nmetrics = \"127.0.0.1:9464\\u000A\"\n[[stream]]\nname = \"a\"\nlisten = \"tcp://127.0.0.1:1\"\n", 2, "metrics must be"),
        // C1 controls drive a terminal as C0 ones do (CSI is U+009B).
        ("[[stream]]\nname = \"a\"\nlisten = \"tcp://127.0.0.1:1\"\nshm_name = \"ring\\u009B31m\"\n", 4, "must not contain control characters"),
        // A 4 MB group name aborted inside glibc's NSS lookup (at a reload: the whole daemon).
        ("[[stream]]\nname = \"a\"\nlisten = \"tcp://127.0.0.1:1\"\nshm_group = \"" + String(repeating: "g", count: 5000) + "\"\n", 4, "longer than 4096 bytes"),
        // Inline tables name their line too.
        ("stream = [{ name = \"a\", listen = \"tcp://127.0.0.1:1\" },\n\n  { name = \"b\", listen = \"tcp://127.0.0.1:2\", slots = 1 }]\n", 3, "slots must be"),
        ("stream = [\n  { name = \"a\", listen = \"tcp://127.0.0.1:1\" }, # the first\n  { name = \"b\", listen = \"tcp://127.0.0.1:2\", \"bogus\" = { x = 1 } }]\n", 3, "unknown key 'bogus'"),
        ("# a comment with = and { in it\nstream = [{ name = \"a\", listen = \"tcp://127.0.0.1:1\", codec = \"vp8\" }]\n", 2, "codec must be"),
        ("stream = [{ name = \"x#y\", listen = \"tcp://127.0.0.1:1\" },\n  { name = \"b\", listen = 'tcp://127.0.0.1:1}' }]\n[daemon]\nlog_level = \"info\"\n", 1, "name must be"),
        ("daemon = { log_level = \"x\" }\n[[stream]]\nname = \"a\"\nlisten = \"tcp://127.0.0.1:1\"\n", 1, "log_level must be"),
        // Credentials outside the URL.
        ("[[stream]]\nname = \"a\"\nlisten = \"tcp://127.0.0.1:1\"\nrtsp_password = \"x\"\n", 4, "source = \"rtsp://…\" streams only"),
        ("[[stream]]\nname = \"a\"\nsource = \"rtsp://u:p@127.0.0.1/x\"\nrtsp_password = \"x\"\n", 4, "give the password once"),
        ("[[stream]]\nname = \"a\"\nsource = \"rtsp://127.0.0.1/x\"\nrtsp_password = \"x\"\n", 4, "needs a user"),
        ("[[stream]]\nname = \"a\"\nsource = \"rtsp://u@127.0.0.1/x\"\nrtsp_user = \"v\"\n", 4, "name the user once"),
        ("[[stream]]\nname = \"a\"\nsource = \"rtsp://u@127.0.0.1/x\"\nrtsp_password_file = \"/nonexistent/password\"\n", 4, "cannot read"),
        ("[[stream]]\nname = \"a\"\nsource = \"rtsp://u@127.0.0.1/x\"\nrtsp_password = \"a\\u0007b\"\n", 4, "control characters"),
    ] as [(String, Int?, String)])
    func refusedWithTheirLine(text: String, line: Int?, message: String) {
        guard let error = expectRefused(text, line: line, message: message) else { return }
        #expect(!error.description.contains("tail") && !error.description.contains("a\u{7}b"), "a secret repeated: \(error)")
    }

    @Test func inlineStreamsLoadLikeTables() throws {
        let configuration = try ConfigurationLoader.parse(
            "stream = [{ name = \"a\", listen = \"tcp://127.0.0.1:1\", slots = 4 }, { name = \"b\", listen = \"tcp://127.0.0.1:2\" }]\n",
            file: "inline.toml")
        #expect(configuration.streams.map(\.name) == ["a", "b"] && configuration.streams[0].slots == 4)
    }

    /// Every credential-looking parameter of a path or query, whatever its separator, is printed as ***.
    @Test(arguments: [
        ("/user=admin_password=SECRET_channel=1_stream=0.sdp", "/user=***_password=***_channel=1_stream=0.sdp"),
        ("/live?pw=SECRET&channel=2", "/live?pw=***&channel=2"),
        ("/live?token=SECRET", "/live?token=***"),
        ("/cam;password=SECRET/stream", "/cam;password=***/stream"),
        ("/cam?loginPassword=SECRET&api_key=SECRET&Auth=SECRET&secret=SECRET", "/cam?loginPassword=***&api_key=***&Auth=***&secret=***"),
        ("/cam?passwd=SEC=RET&x=1", "/cam?passwd=***&x=1"),
        ("/cam?my_password_=SECRET&pass-word=SECRET&pa%73sword=SECRET&x=1", "/cam?my_password_=***&pass-word=***&pa%73sword=***&x=1"),
        ("/cam?password%3DSECRET&credential=SECRET&sid=SECRET&jsessionid=SECRET", "/cam?password%3D***&credential=***&sid=***&jsessionid=***"),
        ("/Streaming/Channels/101", "/Streaming/Channels/101"),
        ("/live?channel=1&subtype=0", "/live?channel=1&subtype=0"),
    ] as [(String, String)])
    func credentialsInPathsAreRedacted(path: String, printed: String) throws {
        let source = try RTSPSource.parse("rtsp://127.0.0.1:554" + path).get()
        #expect(source.displayURL == "rtsp://127.0.0.1:554" + printed)
        #expect(!source.description.contains("SECRET") && !source.displayURL.contains("RET"))
        #expect(source.url == "rtsp://127.0.0.1:554" + path, "requests carry the path as configured")
    }

    @Test func aPasswordFileIsReadAndAnExposedOneIsWarnedAbout() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let passwordPath = directory.appendingPathComponent("cam.password").path
        try "s3cret-from-file\n".write(toFile: passwordPath, atomically: true, encoding: .utf8)
        chmod(passwordPath, 0o600)
        let text = "[[stream]]\nname = \"a\"\nsource = \"rtsp://127.0.0.1/x\"\nrtsp_user = \"viewer\"\nrtsp_password_file = \"\(passwordPath)\"\n"
        let configuration = try ConfigurationLoader.parse(text, file: "ok.toml")
        let source = try #require(configuration.streams[0].rtsp)
        #expect(source.user == "viewer" && source.password?.text == "s3cret-from-file" && configuration.warnings.isEmpty)
        #expect(!configuration.holdsSecrets, "the password is in its own file, not in the configuration")
        chmod(passwordPath, 0o644)
        let exposed = try ConfigurationLoader.parse(text, file: "ok.toml")
        #expect(exposed.warnings.count == 1 && exposed.warnings[0].contains("\(passwordPath) holds an RTSP password and is readable by every user"),
                "\(exposed.warnings)")
        #expect(!exposed.warnings[0].contains("s3cret"))
    }

    /// A configuration file that holds a secret and is readable by every user: a warning (said at --check-config,
    /// start and reload); the same file 0640, or one without secrets, none.
    @Test func aWorldReadableFileWithSecretsIsWarnedAbout() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let path = directory.appendingPathComponent("streamrecvd.toml").path
        let secret = "[[stream]]\nname = \"a\"\nlisten = \"srt://127.0.0.1:5000\"\npassphrase = \"a-long-passphrase\"\n"
        try secret.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o644)
        let warned = try ConfigurationLoader.load(path: path)
        #expect(warned.warnings.contains { $0.contains("\(path) holds passwords or passphrases and is readable by every user (mode 0644)") },
                "\(warned.warnings)")
        #expect(ConfigurationReport(warned, shm: nil).warnings == warned.warnings)
        chmod(path, 0o640)
        #expect(try ConfigurationLoader.load(path: path).warnings.isEmpty)
        try "[[stream]]\nname = \"a\"\nlisten = \"tcp://127.0.0.1:5000\"\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o644)
        #expect(try ConfigurationLoader.load(path: path).warnings.isEmpty)
    }

    @Test func twoStreamsPullingOneCameraAreWarnedAbout() throws {
        let configuration = try ConfigurationLoader.parse("""
            [[stream]]
            name = "a"
            source = "rtsp://u:p@127.0.0.1/live?token=abc"
            [[stream]]
            name = "b"
            source = "rtsp://127.0.0.1:554/live?token=abc"
            """, file: "two.toml")
        #expect(configuration.warnings.count == 1 && configuration.warnings[0].contains("streams 'a' and 'b' both pull rtsp://127.0.0.1:554/live?token=***"),
                "\(configuration.warnings)")
    }

    /// --check-config's errors about a stream's ring name the line of the key to change.
    @Test func aRingLimitTooSmallNamesItsLine() throws {
        let configuration = try ConfigurationLoader.parse(
            "[[stream]]\nname = \"a\"\nlisten = \"tcp://127.0.0.1:1\"\nmax_width = 3840\nmax_height = 2160\nring_size_limit = \"2M\"\n",
            file: "small.toml")
        let report = ConfigurationReport(configuration, shm: nil)
        #expect(report.errors.count == 1 && report.errors[0].line == 6 && report.errors[0].message.contains("ring_size_limit"), "\(report.errors)")
    }

    /// What peers send reaches log lines: a CR would forge a line, an escape sequence drive the terminal.
    @Test func logLinesCarryNoControlCharacters() {
        #expect("404 Not\rFound \u{7f}\u{9b}2J\nFAKE\tok".withoutControlCharacters == "404 Not?Found ??2J?FAKE\tok")
        #expect("plain text, unchanged".withoutControlCharacters == "plain text, unchanged")
    }
}
