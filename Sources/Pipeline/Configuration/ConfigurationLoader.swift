import Bitstream
import Decoding
import Glibc
import TOMLKit

/// A configuration problem, with the line it is on when it can be placed.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public var file: String
    public var line: Int?
    public var message: String

    public var description: String {
        line.map { "\(file):\($0): \(message)" } ?? "\(file): \(message)"
    }
}

/// Reads and validates the TOML configuration. Unknown keys are errors (a typo must not silently fall back to a
/// default); every error names its line.
public enum ConfigurationLoader {
    static let daemonKeys: Set<String> = ["log_level", "metrics"]
    static let streamKeys: Set<String> = [
        "name", "listen", "codec", "hwaccel", "output", "slots", "max_width", "max_height", "shm_name", "shm_mode",
        "shm_group", "second_sender", "idle_timeout", "decoder_linger", "idle_flush", "idle_flush_minimum_ms", "threads", "threading", "max_access_unit_bytes", "rtp_payload_type",
        "rtp_reorder_window", "loss_policy", "keyframe_request", "keyframe_request_interval", "rtcp_mux", "allow",
        "max_connections_per_second", "rtp_clock_rate", "ring_size_limit", "receive_buffer",
        "srt_delivery", "latency_ms", "passphrase", "source", "rtsp_transport", "rtsp_auth", "rtsp_user", "rtsp_password",
        "rtsp_password_file", "token_file", "remb", "transport_cc", "max_bitrate",
    ]

    /// The longest string value, and the largest file, accepted.
    static let maximumStringBytes = 4096
    static let maximumFileBytes = 1 << 20

    public static func load(path: String) throws(ConfigurationError) -> DaemonConfiguration {
        guard let file = fopen(path, "r") else {
            throw ConfigurationError(file: path, line: nil, message: "cannot read: \(String(cString: strerror(errno)))")
        }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while case let count = fread(&buffer, 1, buffer.count, file), count > 0 {
            bytes += buffer[0..<count]
            guard bytes.count <= maximumFileBytes else {
                fclose(file)
                throw ConfigurationError(file: path, line: nil, message: "larger than \(maximumFileBytes >> 20) MiB: not a configuration file")
            }
        }
        var status = stat()
        let mode = fstat(fileno(file), &status) == 0 ? status.st_mode : 0
        fclose(file)
        var configuration = try parse(String(decoding: bytes, as: UTF8.self), file: path)
        if configuration.holdsSecrets, let warning = SecretFile.exposure(path: path, mode: mode, what: "holds passwords or passphrases") {
            configuration.warnings.append(warning)
        }
        return configuration
    }

    public static func parse(_ text: String, file: String) throws(ConfigurationError) -> DaemonConfiguration {
        let table: TOMLTable
        do {
            table = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw ConfigurationError(file: file, line: error.source.begin.line, message: error.description)
        } catch {
            throw ConfigurationError(file: file, line: nil, message: "\(error)")
        }
        if let line = nulLine(text) {
            // TOMLKit hands strings over as C strings: the value would be cut at the NUL, silently.
            throw ConfigurationError(file: file, line: line, message: "a NUL character (\\u0000) in a value: a secret or name cut there would be another one")
        }
        let lines = KeyLines(text)
        func fail(_ message: String, _ section: String? = nil, _ index: Int? = nil, _ key: String? = nil) -> ConfigurationError {
            ConfigurationError(file: file, line: lines.line(section: section, index: index, key: key), message: message)
        }

        var configuration = DaemonConfiguration()
        for key in table.keys where !["daemon", "stream", "webrtc"].contains(key) {
            throw fail("unknown top-level key '\(key)' (expected [daemon], [webrtc] and [[stream]] tables)", nil, nil, key)
        }
        if let value = table["webrtc"] { configuration.webrtc = try parseWebRTC(value, directory: directory(of: file), warnings: &configuration.warnings, fail: fail) }
        if let daemonValue = table["daemon"] {
            guard let daemon = daemonValue.table else { throw fail("'daemon' must be a table: [daemon]", nil, nil, "daemon") }
            for key in daemon.keys where !daemonKeys.contains(key) {
                throw fail("unknown key '\(key)' in [daemon]", "daemon", nil, key)
            }
            if let value = daemon["log_level"] {
                guard let text = value.string, let level = DaemonConfiguration.LogLevel(rawValue: text) else {
                    throw fail("log_level must be one of \(DaemonConfiguration.LogLevel.allCases.map(\.rawValue).joined(separator: ", "))",
                               "daemon", nil, "log_level")
                }
                configuration.logLevel = level
            }
            if let value = daemon["metrics"] {
                guard let text = value.string, !text.containsControlCharacters, text.utf8.count <= maximumStringBytes else {
                    throw fail("metrics must be a string \"HOST:PORT\"", "daemon", nil, "metrics")
                }
                configuration.metrics = try parseListen("tcp://" + text) { message in
                    fail("metrics must look like \"127.0.0.1:9464\" (HOST:PORT)", "daemon", nil, "metrics")
                }
            }
        }
        guard let streamValue = table["stream"] else { throw fail("no [[stream]] configured") }
        guard let streams = streamValue.array else { throw fail("'stream' must be an array of tables: [[stream]]", nil, nil, "stream") }
        for (index, element) in streams.enumerated() {
            guard let entry = element.table else { throw fail("each stream must be a table", "stream", index, nil) }
            var stream = try parseStream(entry, index: index, warnings: &configuration.warnings, directory: directory(of: file), fail: fail)
            stream.lines = lines.places(section: "stream", index: index)
            if stream.webrtc != nil && configuration.webrtc == nil {
                throw fail("stream '\(stream.name)' has listen = \"whip\" but there is no [webrtc] table (listen = \"127.0.0.1:8889\", media = \"127.0.0.1:8189\")", "stream", index, "listen")
            }
            if let webrtc = configuration.webrtc {
                try checkDemoToken(stream, webrtc: webrtc, index: index, warnings: &configuration.warnings, fail: fail)
            }
            configuration.streams.append(stream)
        }
        try validateUnique(configuration, fail: fail)
        configuration.warnings += sharedCameraWarnings(configuration.streams)
        // Streams sharing one token file would repeat its warning once each: say it once.
        var said = Set<String>()
        configuration.warnings = configuration.warnings.filter { said.insert($0).inserted }
        return configuration
    }

    /// The folder of the configuration file: relative paths in it (token_file) are read from there.
    static func directory(of file: String) -> String {
        guard let slash = file.lastIndex(of: "/") else { return "." }
        return slash == file.startIndex ? "/" : String(file[..<slash])
    }

    /// A size in bytes: an integer, or a string with a binary suffix ("512K", "256M", "1G", "1T").
    static func byteSize(_ value: TOMLValueConvertible) -> Int? {
        if let number = value.int { return number }
        guard var text = value.string?.trimmingCharacters(in: " "), !text.isEmpty else { return nil }
        var shift = 0
        switch text.last!.uppercased() {
        case "K": shift = 10
        case "M": shift = 20
        case "G": shift = 30
        case "T": shift = 40
        default: break
        }
        if shift > 0 { text.removeLast() }
        guard let number = Int(text), number >= 0, number <= Int.max >> shift else { return nil }
        return number << shift
    }

    static func parseListen(_ text: String, error: (String) -> ConfigurationError) throws(ConfigurationError) -> ListenAddress {
        guard let schemeEnd = text.firstRange(of: "://") else { throw error("listen must look like tcp://HOST:PORT") }
        let scheme = String(text[..<schemeEnd.lowerBound])
        guard let transport = ListenAddress.Transport(rawValue: scheme), transport != .rtsp else {
            if scheme == "rtsp" { throw error("the daemon pulls rtsp:// streams: write source = \"rtsp://HOST/PATH\" instead of listen") }
            throw error("listen scheme '\(scheme)' is not supported (tcp://, udp://, rtp:// or srt://HOST:PORT)")
        }
        let rest = text[schemeEnd.upperBound...]
        let host: String
        let portText: Substring
        if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            portText = rest[rest.index(after: close)...].dropFirst()
        } else if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            portText = rest[rest.index(after: colon)...]
        } else {
            throw error("listen must name a port: \(scheme)://HOST:PORT")
        }
        guard let port = Int(portText), (1...65535).contains(port) else { throw error("listen port must be 1...65535") }
        guard !host.isEmpty else { throw error("listen must name a host (127.0.0.1 listens on loopback only)") }
        return ListenAddress(transport: transport, host: host, port: port)
    }
}

extension String {
    func trimmingCharacters(in set: String) -> String {
        var scalars = Substring(self)
        while let first = scalars.first, set.contains(first) { scalars = scalars.dropFirst() }
        while let last = scalars.last, set.contains(last) { scalars = scalars.dropLast() }
        return String(scalars)
    }
}

extension Substring {
    func trimmingCharacters(in set: String) -> String { String(self).trimmingCharacters(in: set) }
}
