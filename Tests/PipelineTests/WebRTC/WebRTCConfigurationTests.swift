import Foundation
import Glibc
@testable import Pipeline
import StreamrecvTestSupport
import Testing

/// `[webrtc]` and `listen = "whip"`: what loads, what is refused (on its line, saying why), and that the token is
/// read from its file, never shown, and compared whole.
@Suite struct WebRTCConfigurationTests {
    static let webrtc = "[webrtc]\nlisten = \"127.0.0.1:8889\"\nmedia = \"127.0.0.1:8189\"\n"

    /// A token file in a fresh folder; returns the folder and the file's name.
    static func tokenFile(_ token: String = "a-good-token-of-32-characters-00", mode: mode_t = 0o600) throws -> (folder: String, name: String) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("whipconf-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try (token + "\n").write(toFile: folder + "/whip.token", atomically: true, encoding: .utf8)
        chmod(folder + "/whip.token", mode)
        return (folder, "whip.token")
    }

    @Test func aWhipStreamLoadsWithItsTokenReadBesideTheFile() throws {
        let (folder, name) = try Self.tokenFile()
        let text = Self.webrtc + "[[stream]]\nname = \"screen\"\nlisten = \"whip\"\ntoken_file = \"\(name)\"\nkeyframe_request = \"fir\"\n"
        let configuration = try ConfigurationLoader.parse(text, file: folder + "/streamrecvd.toml")
        let stream = try #require(configuration.streams.first)
        let settings = try #require(stream.webrtc)
        #expect(settings.token.matches(Array("a-good-token-of-32-characters-00".utf8)))
        #expect(!settings.token.matches(Array("a-good-token-of-32-characters-0".utf8)))
        #expect(!settings.token.matches(Array("a-good-token-of-32-characters-000".utf8)))
        #expect(!"\(settings)".contains("a-good-token"), "the token must never be printed")
        #expect(settings.rtp.keyframeRequest == .fir && settings.rtp.rtcpMux)
        #expect(settings.remb && settings.feedback.contains(.remb))
        #expect(configuration.webrtc?.url(of: "screen") == "http://127.0.0.1:8889/whip/screen")
        #expect(configuration.warnings.isEmpty, "\(configuration.warnings)")
        #expect(ConfigurationReport(configuration).lines.first?.contains("WHIP http://127.0.0.1:8889/whip/screen") == true)
    }

    @Test func rembCanBeTurnedOffOnAWhipStreamOnly() throws {
        let (folder, name) = try Self.tokenFile()
        let configuration = try ConfigurationLoader.parse(
            Self.webrtc + "[[stream]]\nname = \"s\"\nlisten = \"whip\"\ntoken_file = \"\(name)\"\nremb = false\n", file: folder + "/c.toml")
        let settings = try #require(configuration.streams.first?.webrtc)
        #expect(!settings.remb && !settings.feedback.contains(.remb) && settings.feedback.contains(.nack))
        _ = expectRefused(Self.webrtc + "[[stream]]\nname = \"s\"\nlisten = \"tcp://127.0.0.1:1\"\nremb = false\n", line: 7, message: "remb applies to listen = \"whip\" streams only")
        _ = expectRefused(Self.webrtc + "[[stream]]\nname = \"s\"\nlisten = \"whip\"\ntoken_file = \"\(folder)/\(name)\"\nremb = \"no\"\n", line: 8, message: "remb must be true or false")
    }

    @Test func transportCCAndACeilingAreSetOnAWhipStreamOnly() throws {
        let (folder, name) = try Self.tokenFile()
        let defaults = try #require(try ConfigurationLoader.parse(
            Self.webrtc + "[[stream]]\nname = \"s\"\nlisten = \"whip\"\ntoken_file = \"\(name)\"\n", file: folder + "/c.toml").streams.first?.webrtc)
        #expect(defaults.transportCC && defaults.feedback.contains(.transportCC) && defaults.maximumBitrate == nil)
        #expect(defaults.startBitrate == ReceiverBitrateAllowance.initial)
        let settings = try #require(try ConfigurationLoader.parse(
            Self.webrtc + "[[stream]]\nname = \"s\"\nlisten = \"whip\"\ntoken_file = \"\(name)\"\ntransport_cc = false\nmax_bitrate = 1500000\n",
            file: folder + "/c.toml").streams.first?.webrtc)
        #expect(!settings.transportCC && !settings.feedback.contains(.transportCC) && settings.feedback.contains(.remb))
        // A ceiling under REMB's start is where a sender starts.
        #expect(settings.maximumBitrate == 1_500_000 && settings.startBitrate == 1_500_000)
        _ = expectRefused(Self.webrtc + "[[stream]]\nname = \"s\"\nlisten = \"tcp://127.0.0.1:1\"\ntransport_cc = false\n", line: 7,
                          message: "transport_cc applies to listen = \"whip\" streams only")
        _ = expectRefused(Self.webrtc + "[[stream]]\nname = \"s\"\nlisten = \"whip\"\ntoken_file = \"\(folder)/\(name)\"\nmax_bitrate = 5\n", line: 8,
                          message: "max_bitrate")
    }

    @Test func aTokenReadableByEveryoneIsWarnedAbout() throws {
        let (folder, name) = try Self.tokenFile(mode: 0o644)
        let configuration = try ConfigurationLoader.parse(
            Self.webrtc + "[[stream]]\nname = \"s\"\nlisten = \"whip\"\ntoken_file = \"\(name)\"\n", file: folder + "/c.toml")
        #expect(configuration.warnings.contains { $0.contains("WHIP bearer token") && $0.contains("readable by every user") })
    }

    @Test(arguments: [
        // (the text after [webrtc]'s keys or the stream, the line, what the message says)
        (webrtc + "[[stream]]\nname = \"s\"\nlisten = \"whip\"\n", 6, "needs token_file"),
        (webrtc + "[[stream]]\nname = \"s\"\nlisten = \"whip\"\ntoken_file = \"/nonexistent/t\"\n", 7, "cannot read"),
        (webrtc + "[[stream]]\nname = \"s\"\nlisten = \"tcp://127.0.0.1:1\"\ntoken_file = \"t\"\n", 7, "token_file applies to listen = \"whip\""),
        (webrtc + "[[stream]]\nname = \"s\"\nlisten = \"whip://127.0.0.1:1\"\n", 6, "WebRTC streams are written listen = \"whip\""),
        ("[webrtc]\nlisten = \"0.0.0.0:8889\"\nmedia = \"127.0.0.1:8189\"\n[[stream]]\nname = \"s\"\nlisten = \"tcp://127.0.0.1:1\"\n", 2, "loopback"),
        ("[webrtc]\nlisten = \"127.0.0.1:8889\"\nmedia = \"localhost:8189\"\n[[stream]]\nname = \"s\"\nlisten = \"tcp://127.0.0.1:1\"\n", 3, "not a numeric address or a wildcard"),
        ("[webrtc]\nlisten = \"127.0.0.1:8889\"\nmedia = \"127.0.0.1:8189\"\nannounce = [\"example.com\"]\n[[stream]]\nname = \"s\"\nlisten = \"tcp://127.0.0.1:1\"\n", 4, "numeric"),
        ("[webrtc]\nlisten = \"127.0.0.1:8889\"\nmedia = \"127.0.0.1:8189\"\nport = 1\n[[stream]]\nname = \"s\"\nlisten = \"tcp://127.0.0.1:1\"\n", 4, "unknown key 'port' in [webrtc]"),
        ("[webrtc]\nlisten = \"127.0.0.1:8889\"\nmedia = \"127.0.0.1:8189\"\n[[stream]]\nname = \"s\"\nlisten = \"udp://127.0.0.1:8189\"\n", 6, "same UDP port as [webrtc] media"),
    ])
    func mistakesAreRefusedOnTheirLine(text: String, line: Int, message: String) {
        _ = expectRefused(text, line: line, message: message)
    }

    /// A wildcard `media` needs no `announce`: answers name the interfaces' addresses (HostCandidates).
    @Test(arguments: ["0.0.0.0:8189", "[::]:8189"])
    func aWildcardMediaIsTakenWithoutAnnounce(media: String) throws {
        let configuration = try ConfigurationLoader.parse(
            "[webrtc]\nlisten = \"127.0.0.1:8889\"\nmedia = \"\(media)\"\n[[stream]]\nname = \"s\"\nlisten = \"tcp://127.0.0.1:1\"\n", file: "/tmp/c.toml")
        #expect(configuration.webrtc?.mediaIsWildcard == true)
        #expect(configuration.webrtc?.announce == [])
    }

    @Test func aShortOrOddTokenIsRefusedWithoutRepeatingIt() throws {
        for token in ["short", "has space inside it here", "quote\"inside-the-token-00"] {
            let (folder, name) = try Self.tokenFile(token)
            let text = Self.webrtc + "[[stream]]\nname = \"s\"\nlisten = \"whip\"\ntoken_file = \"\(folder)/\(name)\"\n"
            let error = expectRefused(text, line: 7, message: "16 to 512 characters")
            #expect(error.map { !$0.description.contains(token) } ?? false)
        }
    }

    @Test func aWhipStreamWithoutAWebRTCTableIsRefused() throws {
        let (folder, name) = try Self.tokenFile()
        _ = expectRefused("[[stream]]\nname = \"s\"\nlisten = \"whip\"\ntoken_file = \"\(folder)/\(name)\"\n", line: 3, message: "no [webrtc] table")
    }

    /// `[webrtc]` with HTTPS on every interface, its files beside the configuration; returns the text and folder.
    static func httpsConfiguration(days: Int = 30, keyMode: mode_t = 0o600, keyPassword: String? = nil,
                                   keyOf other: Bool = false) throws -> (text: String, folder: String) {
        let (folder, name) = try tokenFile()
        let directory = URL(fileURLWithPath: folder)
        let (_, key) = try TestCertificate.make(in: directory, days: days, keyPassword: keyPassword)
        if other { _ = try TestCertificate.make(in: directory, name: "other") }
        chmod(key, keyMode)
        let text = "[webrtc]\nlisten = \"0.0.0.0:8889\"\nmedia = \"127.0.0.1:8189\"\ncertificate = \"server.pem\"\n"
            + "key = \"\(other ? "other" : "server").key\"\n[[stream]]\nname = \"screen\"\nlisten = \"whip\"\ntoken_file = \"\(name)\"\n"
        return (text, folder)
    }

    @Test func aCertificateAndItsKeyServeHTTPSOnAnyAddress() throws {
        let (text, folder) = try Self.httpsConfiguration()
        let configuration = try ConfigurationLoader.parse(text, file: folder + "/c.toml")
        #expect(configuration.webrtc?.tls == .init(certificate: folder + "/server.pem", key: folder + "/server.key"))
        #expect(configuration.webrtc?.url(of: "screen") == "https://0.0.0.0:8889/whip/screen")
        #expect(configuration.warnings.isEmpty, "\(configuration.warnings)")
    }

    @Test func aKeyOfAnotherCertificateIsRefusedOnTheCertificateLine() throws {
        let (text, folder) = try Self.httpsConfiguration(keyOf: true)
        let error = expectRefused(text, file: folder + "/c.toml", line: 4, message: "does not belong to the certificate")
        #expect(error.map { !$0.description.contains("BEGIN") } ?? false, "no key material in the message")
    }

    /// OpenSSL would ask for an encrypted key's passphrase on the terminal; the daemon refuses it instead.
    @Test func anEncryptedKeyIsRefusedWithoutAskingForAPassphrase() throws {
        let (text, folder) = try Self.httpsConfiguration(keyPassword: "a-passphrase")
        _ = expectRefused(text, file: folder + "/c.toml", line: 4, message: "cannot read the private key")
    }

    @Test func aCertificateWithoutKeyOrAMissingFileIsRefused() throws {
        let (text, folder) = try Self.httpsConfiguration()
        _ = expectRefused(text.replacingOccurrences(of: "key = \"server.key\"\n", with: ""), file: folder + "/c.toml", line: 4, message: "needs both certificate and key")
        _ = expectRefused(text.replacingOccurrences(of: "server.pem", with: "missing.pem"), file: folder + "/c.toml", line: 4, message: "cannot read the certificate")
    }

    @Test func anExpiringCertificateAndAKeyReadableByEveryoneAreWarnedAbout() throws {
        let (text, folder) = try Self.httpsConfiguration(days: 2, keyMode: 0o644)
        let configuration = try ConfigurationLoader.parse(text, file: folder + "/c.toml")
        #expect(configuration.warnings.contains { $0.contains("expires in 1 days") || $0.contains("expires in 2 days") }, "\(configuration.warnings)")
        #expect(configuration.warnings.contains { $0.contains("HTTPS private key") && $0.contains("readable by every user") }, "\(configuration.warnings)")
    }

    /// A socket of `type` bound to a free loopback port and kept open; the descriptor and the port.
    static func occupiedPort(_ type: Int32) -> (descriptor: Int32, port: Int) {
        // Close-on-exec: a child another test starts meanwhile must not keep the port held after the close below.
        let descriptor = socket(AF_INET, type | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                _ = bind(descriptor, $0, length)
                _ = getsockname(descriptor, $0, &length)
            }
        }
        if type == Int32(SOCK_STREAM.rawValue) { listen(descriptor, 1) }
        return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// --check-config warns when another program holds `[webrtc]`'s ports (the daemon would exit at start).
    @Test func portsHeldByAnotherProgramAreWarnedAbout() throws {
        let (folder, name) = try Self.tokenFile()
        let (http, media) = (Self.occupiedPort(Int32(SOCK_STREAM.rawValue)), Self.occupiedPort(Int32(SOCK_DGRAM.rawValue)))
        let text = "[webrtc]\nlisten = \"127.0.0.1:\(http.port)\"\nmedia = \"127.0.0.1:\(media.port)\"\n[[stream]]\nname = \"s\"\nlisten = \"whip\"\ntoken_file = \"\(name)\"\n"
        let loaded = try? ConfigurationLoader.parse(text, file: folder + "/c.toml")
        var report = loaded.map { ConfigurationReport($0, shm: nil) }
        if let loaded { report?.checkPorts(loaded) }
        close(http.descriptor)
        close(media.descriptor)
        let warnings = report?.warnings ?? ["the configuration did not load"]
        #expect(warnings.contains { $0.contains("listen = \"127.0.0.1:\(http.port)\" cannot be bound now") }, "\(warnings)")
        #expect(warnings.contains { $0.contains("media = \"127.0.0.1:\(media.port)\" cannot be bound now") }, "\(warnings)")
        let configuration = try #require(loaded)
        var free = ConfigurationReport(configuration, shm: nil)
        free.checkPorts(configuration)
        #expect(!free.warnings.contains { $0.contains("cannot be bound now") }, "\(free.warnings)")
    }
}

