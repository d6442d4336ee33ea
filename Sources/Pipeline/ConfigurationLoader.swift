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
        "shm_group", "second_sender", "idle_timeout", "idle_flush", "idle_flush_minimum_ms", "threads", "threading", "max_access_unit_bytes", "rtp_payload_type",
        "rtp_reorder_window", "loss_policy", "keyframe_request", "keyframe_request_interval", "rtcp_mux", "allow",
        "max_connections_per_second", "rtp_clock_rate", "ring_size_limit", "receive_buffer",
        "srt_delivery", "latency_ms", "passphrase", "source", "rtsp_transport", "rtsp_auth", "rtsp_user", "rtsp_password",
        "rtsp_password_file",
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
        for key in table.keys where key != "daemon" && key != "stream" {
            throw fail("unknown top-level key '\(key)' (expected [daemon] and [[stream]] tables)", nil, nil, key)
        }
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
            var stream = try parseStream(entry, index: index, warnings: &configuration.warnings, fail: fail)
            stream.lines = lines.places(section: "stream", index: index)
            configuration.streams.append(stream)
        }
        try validateUnique(configuration, fail: fail)
        configuration.warnings += sharedCameraWarnings(configuration.streams)
        return configuration
    }

    private static func parseStream(
        _ entry: TOMLTable, index: Int, warnings: inout [String],
        fail: (String, String?, Int?, String?) -> ConfigurationError
    ) throws(ConfigurationError) -> StreamConfiguration {
        func error(_ key: String?, _ message: String) -> ConfigurationError { fail(message, "stream", index, key) }
        for key in entry.keys where !streamKeys.contains(key) {
            throw error(key, "unknown key '\(key)' in [[stream]] (known: \(streamKeys.sorted().joined(separator: ", ")))")
        }
        func string(_ key: String) throws(ConfigurationError) -> String? {
            guard let value = entry[key] else { return nil }
            guard let text = value.string else { throw error(key, "\(key) must be a string") }
            // Values reach C (shm_open, getaddrinfo, libsrt) and log lines: a NUL would cut one short there. (source
            // has checks of its own, whose messages never repeat a password.)
            // Nor an endless one: a 4 MB group name aborts inside glibc's NSS lookup (systemd's module asserts).
            guard text.utf8.count <= maximumStringBytes else { throw error(key, "\(key) is longer than \(maximumStringBytes) bytes") }
            guard key == "source" || !text.containsControlCharacters else { throw error(key, "\(key) must not contain control characters") }
            return text
        }
        func integer(_ key: String, _ range: ClosedRange<Int>) throws(ConfigurationError) -> Int? {
            guard let value = entry[key] else { return nil }
            guard let number = value.int, range.contains(number) else {
                throw error(key, "\(key) must be an integer in \(range.lowerBound)...\(range.upperBound)")
            }
            return number
        }
        guard let name = try string("name") else { throw error(nil, "stream has no name") }
        guard !name.isEmpty, name.count <= 32,
              name.unicodeScalars.allSatisfy({ ("0"..."9").contains($0) || ("a"..."z").contains($0) || ("A"..."Z").contains($0) || $0 == "-" || $0 == "_" }) else {
            throw error("name", "name must be 1-32 characters of letters, digits, '-' and '_'")
        }
        var stream: StreamConfiguration
        if let sourceText = try string("source") {
            guard entry["listen"] == nil else { throw error("source", "a stream has either listen (a sender pushes) or source (the daemon pulls), not both") }
            let source: RTSPSource
            switch RTSPSource.parse(sourceText) {
            case .success(let parsed): source = parsed
            case .failure(let problem): throw error("source", problem.message)
            }
            stream = StreamConfiguration(name: name, listen: ListenAddress(transport: .rtsp, host: source.host, port: source.port))
            stream.rtsp = source
            // A sender's settings: the server is the only sender, and it is the daemon that connects.
            for key in ["allow", "max_connections_per_second", "second_sender", "rtp_payload_type", "rtp_clock_rate", "rtcp_mux"]
            where entry[key] != nil {
                throw error(key, "\(key) does not apply to a source = \"rtsp://…\" stream (the session description says what the server sends)")
            }
            if let transport = try string("rtsp_transport") {
                guard let value = RTSPTransport(rawValue: transport) else { throw error("rtsp_transport", "rtsp_transport must be tcp or udp") }
                stream.rtsp?.transport = value
            }
            if let auth = try string("rtsp_auth") {
                guard let value = RTSPAuthenticationPolicy(rawValue: auth) else {
                    throw error("rtsp_auth", "rtsp_auth must be digest (the password never in clear) or basic (Basic allowed when it is all the camera offers)")
                }
                stream.rtsp?.authentication = value
            }
            try readCredentials(into: &stream.rtsp!, user: string("rtsp_user"), password: string("rtsp_password"),
                                passwordFile: string("rtsp_password_file"), warnings: &warnings, error: error)
        } else {
            guard let listenText = try string("listen") else { throw error(nil, "stream '\(name)' has neither listen nor source") }
            for key in ["rtsp_transport", "rtsp_auth", "rtsp_user", "rtsp_password", "rtsp_password_file"] where entry[key] != nil {
                throw error(key, "\(key) applies to source = \"rtsp://…\" streams only")
            }
            stream = StreamConfiguration(name: name, listen: try parseListen(listenText, error: { error("listen", $0) }))
        }
        if let codec = try string("codec"), codec != "auto" {
            guard let known = VideoCodec(rawValue: codec) else { throw error("codec", "codec must be h264, h265 or auto") }
            stream.codec = known
        }
        if let hwaccel = try string("hwaccel") {
            guard let preference = HardwarePreference(configValue: hwaccel) else {
                throw error("hwaccel", "hwaccel must be auto, none, \(HardwareAccelerator.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            stream.decoder.hardware = preference
        }
        if let output = try string("output") {
            guard let mode = DecoderConfiguration.OutputMode(rawValue: output) else { throw error("output", "output must be auto or native") }
            stream.decoder.output = mode
        }
        if let threading = try string("threading") {
            guard let mode = DecoderConfiguration.Threading(rawValue: threading) else { throw error("threading", "threading must be slice or frame") }
            stream.decoder.threading = mode
        }
        if let threads = try integer("threads", 0...64) { stream.decoder.threads = threads }
        if let slots = try integer("slots", 2...4096) { stream.slots = slots }
        let dimensions = 16...ParameterSetLimits.maximumDimension
        if let width = try integer("max_width", dimensions) { stream.maxWidth = width }
        if let height = try integer("max_height", dimensions) { stream.maxHeight = height }
        stream.maxAccessUnitBytes = stream.defaultMaxAccessUnitBytes
        if let bytes = try integer("max_access_unit_bytes", 4096...(1 << 30)) { stream.maxAccessUnitBytes = bytes }
        if let payloadType = try integer("rtp_payload_type", 0...127) { stream.rtpPayloadType = UInt8(payloadType) }
        if let window = try integer("rtp_reorder_window", 1...1024) { stream.rtpReorderWindow = window }
        if let rate = try integer("rtp_clock_rate", 1000...10_000_000) { stream.rtpClockRate = UInt32(rate) }
        if let policy = try string("loss_policy") {
            guard let value = LossPolicy(rawValue: policy) else { throw error("loss_policy", "loss_policy must be conceal or keyframe") }
            stream.lossPolicy = value
        }
        if let request = try string("keyframe_request") {
            guard let value = KeyframeRequest(rawValue: request) else { throw error("keyframe_request", "keyframe_request must be none, pli or fir") }
            stream.keyframeRequest = value
        }
        if let value = entry["keyframe_request_interval"] {
            guard let seconds = value.double ?? value.int.map(Double.init), seconds >= 0.05, seconds <= 3600 else {
                throw error("keyframe_request_interval", "keyframe_request_interval must be a number of seconds in 0.05...3600")
            }
            stream.keyframeRequestInterval = seconds
        }
        if let value = entry["rtcp_mux"] {
            guard let flag = value.bool else { throw error("rtcp_mux", "rtcp_mux must be true or false") }
            stream.rtcpMux = flag
        }
        if stream.keyframeRequest != .none && stream.listen.transport != .rtp && stream.listen.transport != .rtsp {
            throw error("keyframe_request", "keyframe_request needs an rtp:// or rtsp:// stream (RTCP feedback)")
        }
        if let value = entry["allow"] {
            guard let list = value.array else { throw error("allow", "allow must be a list of networks, e.g. [\"192.168.1.0/24\", \"::1\"]") }
            for item in list {
                guard let text = item.string, let range = AddressRange(text) else {
                    throw error("allow", "allow entry \(item.string.map { "'\($0)'" } ?? "(not a string)") is not an address or CIDR network")
                }
                stream.allow.append(range)
            }
        }
        if let rate = try integer("max_connections_per_second", 1...10000) { stream.maxConnectionsPerSecond = rate }
        if stream.listen.transport == .rtp && stream.codec == nil {
            // The depacketizer must know the payload format before the first parameter set can be seen.
            throw error("codec", "rtp:// needs codec = \"h264\" or \"h265\" (the RTP payload format depends on it)")
        }
        if let shmName = try string("shm_name") {
            guard !shmName.isEmpty, shmName.count <= 200, !shmName.contains("/"), shmName != ".", shmName != ".." else {
                throw error("shm_name", "shm_name must be a plain name (no '/'), as under /dev/shm")
            }
            stream.shmName = shmName
        }
        if let mode = try string("shm_mode") {
            guard let value = mode_t(mode, radix: 8), value <= 0o666 else {
                throw error("shm_mode", "shm_mode must be an octal mode string such as \"0640\" (no execute bits)")
            }
            stream.shmMode = value
        }
        if let group = try string("shm_group") {
            guard getgrnam(group) != nil else { throw error("shm_group", "shm_group '\(group)' does not exist") }
            stream.shmGroup = group
        }
        if let policy = try string("second_sender") {
            guard let value = SecondSenderPolicy(rawValue: policy) else { throw error("second_sender", "second_sender must be refuse or takeover") }
            stream.secondSender = value
        }
        if let value = entry["idle_timeout"] {
            // Below half a second a sender between two frames would be taken for gone.
            guard let seconds = value.double ?? value.int.map(Double.init), seconds == 0 || (seconds >= 0.5 && seconds <= 86400) else {
                throw error("idle_timeout", "idle_timeout must be 0 (never) or a number of seconds in 0.5...86400")
            }
            stream.idleTimeout = seconds
        }
        if let value = entry["ring_size_limit"] {
            guard let bytes = byteSize(value), bytes >= 1 << 20, bytes <= 1 << 40 else {
                throw error("ring_size_limit", "ring_size_limit must be a size from 1M to 1T, e.g. \"256M\" (bytes, or K, M, G, T)")
            }
            stream.ringSizeLimit = bytes
        }
        if let delivery = try string("srt_delivery") {
            guard stream.listen.transport == .srt else { throw error("srt_delivery", "srt_delivery applies to srt:// streams only") }
            guard let value = SRTDelivery(rawValue: delivery) else { throw error("srt_delivery", "srt_delivery must be arrival or timed") }
            stream.srt.delivery = value
        }
        if let latency = try integer("latency_ms", 20...10_000) {
            guard stream.listen.transport == .srt, stream.srt.delivery == .timed else {
                throw error("latency_ms", "latency_ms applies to srt:// streams with srt_delivery = \"timed\" (arrival delivery hands bytes over at once, and drops none)")
            }
            stream.srt.latencyMilliseconds = latency
        }
        if entry["passphrase"] != nil {
            guard stream.listen.transport == .srt else { throw error("passphrase", "passphrase applies to srt:// streams only") }
            // The value itself is never repeated in a message: the file's errors reach the journal.
            guard let text = entry["passphrase"]?.string, let passphrase = SRTPassphrase(text) else {
                throw error("passphrase", "passphrase must be a string of \(SRTPassphrase.lengths.lowerBound) to \(SRTPassphrase.lengths.upperBound) bytes (SRT's limits), without control characters")
            }
            stream.srt.passphrase = passphrase
        }
        if let value = entry["receive_buffer"] {
            guard stream.listen.transport == .udp || stream.listen.transport == .rtp || stream.rtsp?.transport == .udp else {
                throw error("receive_buffer", "receive_buffer applies to udp://, rtp:// and rtsp_transport = \"udp\" streams only")
            }
            guard let bytes = byteSize(value), bytes >= 64 << 10, bytes <= 1 << 30 else {
                throw error("receive_buffer", "receive_buffer must be a size from 64K to 1G, e.g. \"8M\"")
            }
            stream.receiveBufferBytes = bytes
        }
        // The early close on a quiet transport is gone: it guessed, and a wrong guess damaged frames. Old files
        // still load (a reload must not fail over a key that now does nothing); the values are not checked.
        for key in ["idle_flush", "idle_flush_minimum_ms"] where entry[key] != nil { stream.retiredKeys.append(key) }
        return stream
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
