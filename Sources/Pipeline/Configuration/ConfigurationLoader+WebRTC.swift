import Glibc
import MediaSecurity
import TOMLKit

/// `[webrtc]` and `listen = "whip"` streams.
extension ConfigurationLoader {
    static let webrtcKeys: Set<String> = ["listen", "media", "announce", "max_sessions", "certificate", "key", "server_names"]

    /// The `[webrtc]` table. Plain HTTP only on loopback: elsewhere the bearer token would cross the network in
    /// clear, and browsers allow screen capture only on https:// or http://localhost pages.
    static func parseWebRTC(
        _ value: TOMLValueConvertible, directory: String, warnings: inout [String],
        fail: (String, String?, Int?, String?) -> ConfigurationError
    ) throws(ConfigurationError) -> WebRTCServerConfiguration {
        guard let table = value.table else { throw fail("'webrtc' must be a table: [webrtc]", nil, nil, "webrtc") }
        for key in table.keys where !webrtcKeys.contains(key) {
            throw fail("unknown key '\(key)' in [webrtc] (known: \(webrtcKeys.sorted().joined(separator: ", ")))", "webrtc", nil, key)
        }
        func address(_ key: String, _ transport: String, example: String) throws(ConfigurationError) -> ListenAddress {
            guard let text = table[key]?.string, !text.containsControlCharacters, text.utf8.count <= maximumStringBytes else {
                throw fail("[webrtc] needs \(key) = \"HOST:PORT\" (e.g. \"\(example)\")", "webrtc", nil, table[key] == nil ? nil : key)
            }
            let parsed = try parseListen(transport + "://" + text) { _ in fail("\(key) must look like \"\(example)\" (HOST:PORT)", "webrtc", nil, key) }
            guard BindAddress.resolve(parsed.host) != nil else {
                throw fail("\(key) host '\(parsed.host)' does not resolve to an address", "webrtc", nil, key)
            }
            return parsed
        }
        var server = WebRTCServerConfiguration(http: try address("listen", "tcp", example: "127.0.0.1:8889"),
                                               media: try address("media", "udp", example: "127.0.0.1:8189"))
        server.tls = try parseTLSFiles(table, directory: directory, warnings: &warnings, fail: fail)
        guard server.tls != nil || BindAddress.resolve(server.http.host)?.allSatisfy(\.isLoopback) == true else {
            throw fail("[webrtc] listen = \"\(server.http.host):\(server.http.port)\" is not loopback: set certificate and key for HTTPS (plain HTTP would send the bearer token in clear, and browsers share screens only with https:// pages)", "webrtc", nil, "listen")
        }
        if let value = table["announce"] {
            guard let array = value.array, array.count <= 8 else { throw fail("announce must be a list of up to 8 IP addresses", "webrtc", nil, "announce") }
            for element in array {
                guard let text = element.string, let addresses = BindAddress.resolveNumeric(text), !addresses.isWildcard else {
                    throw fail("announce must list IP addresses (numeric, not wildcards): \(element.string ?? "not a string")", "webrtc", nil, "announce")
                }
                server.announce.append(text)
            }
        }
        // A wildcard names the interfaces' addresses in answers (HostCandidates); a host name names nothing a client
        // could send to before it is resolved, and may resolve to another address than the socket is bound to.
        if server.announce.isEmpty, BindAddress.resolveNumeric(server.media.host) == nil {
            throw fail("media = \"\(server.media.host):\(server.media.port)\" is not a numeric address or a wildcard: clients must be told where to send; use an address, \"0.0.0.0:PORT\" or \"[::]:PORT\", or set announce = [\"ADDRESS\", …]", "webrtc", nil, "media")
        }
        if let value = table["server_names"] {
            // Names beside the certificate's that the endpoint answers to (ServedHostNames: DNS rebinding).
            guard let array = value.array, array.count <= 16 else { throw fail("server_names must be a list of up to 16 host names", "webrtc", nil, "server_names") }
            for element in array {
                guard let text = element.string, !text.contains(":"), let host = ServedHostNames.host(of: text) else {
                    throw fail("server_names must list host names without ports (e.g. \"receiver.example.org\"): \(element.string ?? "not a string")", "webrtc", nil, "server_names")
                }
                server.serverNames.append(host)
            }
        }
        if let value = table["max_sessions"] {
            guard let count = value.int, (1...1024).contains(count) else { throw fail("max_sessions must be an integer in 1...1024", "webrtc", nil, "max_sessions") }
            server.maximumSessions = count
        }
        return server
    }

    /// `certificate` and `key`: both or neither, read and checked against each other now (so `--check-config` and a
    /// reload say what is wrong), a relative path read from the configuration file's folder.
    static func parseTLSFiles(
        _ table: TOMLTable, directory: String, warnings: inout [String], fail: (String, String?, Int?, String?) -> ConfigurationError
    ) throws(ConfigurationError) -> WebRTCServerConfiguration.TLSFiles? {
        func path(_ key: String) throws(ConfigurationError) -> String? {
            guard let value = table[key] else { return nil }
            guard let text = value.string, !text.isEmpty, !text.containsControlCharacters, text.utf8.count <= maximumStringBytes else {
                throw fail("[webrtc] \(key) must be the path of a PEM file", "webrtc", nil, key)
            }
            return text.hasPrefix("/") ? text : directory + "/" + text
        }
        let (certificate, key) = (try path("certificate"), try path("key"))
        guard let certificate, let key else {
            if certificate == nil && key == nil { return nil }
            throw fail("[webrtc] needs both certificate and key (PEM files) for HTTPS, or neither", "webrtc", nil, certificate == nil ? "key" : "certificate")
        }
        let loaded: TLSServerCertificate
        do {
            loaded = try TLSServerCertificate(certificatePath: certificate, keyPath: key)
        } catch {
            throw fail("[webrtc] certificate \(certificate), key \(key): \(error)", "webrtc", nil, "certificate")
        }
        let days = loaded.secondsUntilExpiry / 86400
        if loaded.secondsUntilExpiry <= 0 {
            warnings.append("[webrtc] certificate \(certificate) (\(loaded.subject)) has expired: browsers will refuse the share page and WHIP")
        } else if days < 14 {
            warnings.append("[webrtc] certificate \(certificate) (\(loaded.subject)) expires in \(days) days: renew it and reload")
        }
        var status = stat()
        if stat(key, &status) == 0, let warning = SecretFile.exposure(path: key, mode: status.st_mode, what: "holds the HTTPS private key") {
            warnings.append(warning)
        }
        return .init(certificate: certificate, key: key)
    }

    /// `listen = "whip"`: the token file (a relative path is read from the configuration file's folder), and the
    /// RTP keys that still apply.
    static func parseWHIPStream(_ entry: StreamEntry, warnings: inout [String], directory: String) throws(ConfigurationError) -> WebRTCSettings {
        guard let written = try entry.string("token_file") else {
            throw entry.error("listen", "a listen = \"whip\" stream needs token_file: the file holding the bearer token WHIP clients present")
        }
        let path = written.hasPrefix("/") ? written : directory + "/" + written
        let token: BearerToken
        switch SecretFile.read(path) {
        case .success(let read):
            guard let parsed = BearerToken(read.text) else {
                throw entry.error("token_file", "token_file \(path): the token must be 16 to 512 characters of A-Z a-z 0-9 - . _ ~ + / = (RFC 6750)")
            }
            token = parsed
            if let warning = SecretFile.exposure(path: path, mode: read.mode, what: "holds a WHIP bearer token") { warnings.append(warning) }
            // The demo token has warnings of its own (checkDemoToken). The token itself is never repeated.
            if read.text != TokenStrength.demoToken && TokenStrength.isGuessable(read.text) {
                warnings.append("token_file \(path): the token looks guessable (about \(Int(TokenStrength.estimatedBits(read.text))) bits by the estimate in docs/configuration.md, under \(Int(TokenStrength.warningBits))); \(writeYourOwn(path))")
            }
        case .failure(let problem):
            throw entry.error("token_file", "token_file \(path): \(problem.message)")
        }
        var settings = WebRTCSettings(token: token, tokenFile: path)
        if let remb = try entry.boolean("remb") { settings.remb = remb }
        if let transportCC = try entry.boolean("transport_cc") { settings.transportCC = transportCC }
        if let bitrate = try entry.integer("max_bitrate", 100_000...1_000_000_000) { settings.maximumBitrate = UInt64(bitrate) }
        if let window = try entry.integer("rtp_reorder_window", 1...1024) { settings.rtp.reorderWindow = window }
        if let request: KeyframeRequest = try entry.choice("keyframe_request", "keyframe_request must be none, pli or fir") {
            settings.rtp.keyframeRequest = request
        }
        if let seconds = try entry.seconds("keyframe_request_interval", "keyframe_request_interval must be a number of seconds in 0.05...3600",
                                           valid: { $0 >= 0.05 && $0 <= 3600 }) {
            settings.rtp.keyframeRequestInterval = seconds
        }
        return settings
    }

    /// The demo token (etc/streamrecvd/examples/whip.token) is published with streamrecvd: refused where another
    /// host may reach the WHIP endpoint, warned about on loopback (every local user has it too).
    static func checkDemoToken(
        _ stream: StreamConfiguration, webrtc: WebRTCServerConfiguration, index: Int, warnings: inout [String],
        fail: (String, String?, Int?, String?) -> ConfigurationError
    ) throws(ConfigurationError) {
        guard let settings = stream.webrtc, settings.token.matches(Array(TokenStrength.demoToken.utf8)) else { return }
        let demo = "token_file \(settings.tokenFile): the demo token from \(TokenStrength.demoTokenPath) is published with streamrecvd"
        guard BindAddress.resolve(webrtc.http.host)?.allSatisfy(\.isLoopback) == true else {
            throw fail("\(demo); \(writeYourOwn(settings.tokenFile)) ([webrtc] listen = \"\(webrtc.http.host):\(webrtc.http.port)\" is not loopback: anyone who can reach it could post video)", "stream", index, "token_file")
        }
        warnings.append("\(demo): any local user can post video to stream '\(stream.name)'; \(writeYourOwn(settings.tokenFile))")
    }

    static func writeYourOwn(_ path: String) -> String {
        "write your own: head -c 24 /dev/urandom | base64 | tr '+/' '-_' > \(path); chmod 600 \(path)"
    }
}
