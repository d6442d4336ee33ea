@testable import Pipeline
import Testing

/// Issue 31, item 8: DNS rebinding. A page whose name was made to resolve to this machine sends its own name as
/// `Host:`; only names the endpoint serves and address literals are answered.
@Suite struct ServedHostNamesTests {
    static let served = ServedHostNames(["127.0.0.1", "receiver.example.org"])

    @Test(arguments: ["127.0.0.1:8889", "127.0.0.1", "[::1]:8889", "[::1]", "198.51.100.7", "localhost:8889", "LOCALHOST",
                      "localhost.", "receiver.example.org", "Receiver.Example.Org.:443"])
    func servedNamesAndAddressLiteralsAreAnswered(host: String) {
        #expect(Self.served.accepts(host) { _ in false })
    }

    @Test(arguments: ["rebind.attacker.example", "rebind.attacker.example:8889", "localhost.attacker.example", "127.0.0.1.nip.io",
                      "", ":8889", "[::1", "[::1]x", "localhost:port", "localhost:123456", "user@localhost", "local host", "a/b"])
    func otherNamesAndMalformedValuesAreNot(host: String) {
        #expect(!Self.served.accepts(host) { _ in false })
    }

    @Test func theCertificatesNamesAreAskedLast() {
        var asked: [String] = []
        #expect(Self.served.accepts("Share.Example.net:8443") { asked.append($0); return $0 == "share.example.net" })
        #expect(asked == ["share.example.net"])
        #expect(Self.served.accepts("10.0.0.1") { _ in Issue.record("a literal needs no certificate"); return false })
    }

    @Test func aConfigurationsNamesAreServed() throws {
        var configuration = WebRTCServerConfiguration(http: ListenAddress(transport: .tcp, host: "0.0.0.0", port: 8889), media: ListenAddress(transport: .udp, host: "192.0.2.1", port: 8189))
        configuration.serverNames = ["desk.lan"]
        let names = ServedHostNames(configuration: configuration)
        #expect(names.accepts("desk.lan:8889") { _ in false })
        #expect(!names.accepts("desk.lan.attacker.example") { _ in false })
    }
}
