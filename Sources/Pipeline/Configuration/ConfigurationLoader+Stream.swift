import Bitstream
import Decoding
import Glibc
import TOMLKit

/// One `[[stream]]` table, read key by key: typed values, and every error on its key's line.
struct StreamEntry {
    let table: TOMLTable
    let error: (String?, String) -> ConfigurationError

    subscript(key: String) -> TOMLValueConvertible? { table[key] }

    func string(_ key: String) throws(ConfigurationError) -> String? {
        guard let value = table[key] else { return nil }
        guard let text = value.string else { throw error(key, "\(key) must be a string") }
        // Values reach C (shm_open, getaddrinfo, libsrt) and log lines: a NUL would cut one short there. (source
        // has checks of its own, whose messages never repeat a password.)
        // Nor an endless one: a 4 MB group name aborts inside glibc's NSS lookup (systemd's module asserts).
        let limit = ConfigurationLoader.maximumStringBytes
        guard text.utf8.count <= limit else { throw error(key, "\(key) is longer than \(limit) bytes") }
        guard key == "source" || !text.containsControlCharacters else { throw error(key, "\(key) must not contain control characters") }
        return text
    }

    func integer(_ key: String, _ range: ClosedRange<Int>) throws(ConfigurationError) -> Int? {
        guard let value = table[key] else { return nil }
        guard let number = value.int, range.contains(number) else {
            throw error(key, "\(key) must be an integer in \(range.lowerBound)...\(range.upperBound)")
        }
        return number
    }

    func boolean(_ key: String) throws(ConfigurationError) -> Bool? {
        guard let value = table[key] else { return nil }
        guard let flag = value.bool else { throw error(key, "\(key) must be true or false") }
        return flag
    }

    /// One of an enum's raw values; `message` says which are allowed.
    func choice<Value: RawRepresentable>(_ key: String, _ message: String) throws(ConfigurationError) -> Value?
    where Value.RawValue == String {
        guard let text = try string(key) else { return nil }
        guard let value = Value(rawValue: text) else { throw error(key, message) }
        return value
    }

    /// A number of seconds (integer or not) that `valid` accepts.
    func seconds(_ key: String, _ message: String, valid: (Double) -> Bool) throws(ConfigurationError) -> Double? {
        guard let value = table[key] else { return nil }
        guard let seconds = value.double ?? value.int.map(Double.init), valid(seconds) else { throw error(key, message) }
        return seconds
    }

    /// A size in bytes (`ConfigurationLoader.byteSize`) within `range`.
    func size(_ key: String, _ range: ClosedRange<Int>, _ message: String) throws(ConfigurationError) -> Int? {
        guard let value = table[key] else { return nil }
        guard let bytes = ConfigurationLoader.byteSize(value), range.contains(bytes) else { throw error(key, message) }
        return bytes
    }
}

extension ConfigurationLoader {
    static func parseStream(
        _ table: TOMLTable, index: Int, warnings: inout [String], directory: String = ".",
        fail: @escaping (String, String?, Int?, String?) -> ConfigurationError
    ) throws(ConfigurationError) -> StreamConfiguration {
        let entry = StreamEntry(table: table) { key, message in fail(message, "stream", index, key) }
        for key in table.keys where !streamKeys.contains(key) {
            throw entry.error(key, "unknown key '\(key)' in [[stream]] (known: \(streamKeys.sorted().joined(separator: ", ")))")
        }
        guard let name = try entry.string("name") else { throw entry.error(nil, "stream has no name") }
        guard !name.isEmpty, name.count <= 32,
              name.unicodeScalars.allSatisfy({ ("0"..."9").contains($0) || ("a"..."z").contains($0) || ("A"..."Z").contains($0) || $0 == "-" || $0 == "_" }) else {
            throw entry.error("name", "name must be 1-32 characters of letters, digits, '-' and '_'")
        }
        guard !InheritedWebRTCSockets.reservedNames.contains(name) else {
            throw entry.error("name", "the name '\(name)' is reserved: socket activation passes [webrtc]'s own sockets under it (FileDescriptorName=)")
        }
        let source = try parseSource(entry, name: name, warnings: &warnings, directory: directory)
        for key in table.keys.sorted() {
            if let refusal = refusal(of: key, for: source) { throw entry.error(key, refusal) }
        }
        var stream = StreamConfiguration(name: name, source: source)
        try parseDecoding(entry, into: &stream)
        try parseDelivery(entry, into: &stream)
        // The early close on a quiet transport is gone: it guessed, and a wrong guess damaged frames. Old files
        // still load (a reload must not fail over a key that now does nothing); the values are not checked.
        for key in ["idle_flush", "idle_flush_minimum_ms"] where table[key] != nil { stream.retiredKeys.append(key) }
        return stream
    }

    // MARK: - The source: one parser per transport

    private static func parseSource(_ entry: StreamEntry, name: String, warnings: inout [String], directory: String) throws(ConfigurationError) -> StreamSource {
        if let sourceText = try entry.string("source") {
            guard entry["listen"] == nil else {
                throw entry.error("source", "a stream has either listen (a sender pushes) or source (the daemon pulls), not both")
            }
            return .rtsp(try parseRTSP(entry, sourceText: sourceText, warnings: &warnings))
        }
        guard let listenText = try entry.string("listen") else { throw entry.error(nil, "stream '\(name)' has neither listen nor source") }
        if listenText == "whip" { return .webrtc(try parseWHIPStream(entry, warnings: &warnings, directory: directory)) }
        let address = try parseListen(listenText) { entry.error("listen", $0) }
        switch address.transport {
        case .tcp: return .tcp(address)
        case .udp: return .udp(address, receiveBufferBytes: try receiveBuffer(entry) ?? StreamSource.defaultReceiveBufferBytes)
        case .rtp: return .rtp(address, try parseRTP(entry, fixedBySender: true))
        case .srt: return .srt(address, try parseSRT(entry))
        case .rtsp: throw entry.error("listen", "the daemon pulls rtsp:// streams: write source = \"rtsp://HOST/PATH\" instead of listen")
        case .whip: throw entry.error("listen", "WebRTC streams are written listen = \"whip\"")
        }
    }

    private static func parseRTSP(_ entry: StreamEntry, sourceText: String, warnings: inout [String]) throws(ConfigurationError) -> RTSPSettings {
        var camera: RTSPSource
        switch RTSPSource.parse(sourceText) {
        case .success(let parsed): camera = parsed
        case .failure(let problem): throw entry.error("source", problem.message)
        }
        if let transport: RTSPTransport = try entry.choice("rtsp_transport", "rtsp_transport must be tcp or udp") {
            camera.transport = transport
        }
        if let policy: RTSPAuthenticationPolicy = try entry.choice(
            "rtsp_auth", "rtsp_auth must be digest (the password never in clear) or basic (Basic allowed when it is all the camera offers)") {
            camera.authentication = policy
        }
        try readCredentials(into: &camera, user: entry.string("rtsp_user"), password: entry.string("rtsp_password"),
                            passwordFile: entry.string("rtsp_password_file"), warnings: &warnings, error: entry.error)
        var settings = RTSPSettings(camera: camera)
        // The refusal of receive_buffer over interleaved TCP comes after, with the other keys of other transports.
        settings.rtp = try parseRTP(entry, fixedBySender: false)
        return settings
    }

    /// `fixedBySender`: rtp://, whose payload type, clock rate and RTCP port the sender decided out of band (for
    /// rtsp:// the session description says them).
    private static func parseRTP(_ entry: StreamEntry, fixedBySender: Bool) throws(ConfigurationError) -> RTPSettings {
        var settings = RTPSettings()
        if let window = try entry.integer("rtp_reorder_window", 1...1024) { settings.reorderWindow = window }
        if let request: KeyframeRequest = try entry.choice("keyframe_request", "keyframe_request must be none, pli or fir") {
            settings.keyframeRequest = request
        }
        if let seconds = try entry.seconds("keyframe_request_interval", "keyframe_request_interval must be a number of seconds in 0.05...3600",
                                           valid: { $0 >= 0.05 && $0 <= 3600 }) {
            settings.keyframeRequestInterval = seconds
        }
        if let bytes = try receiveBuffer(entry) { settings.receiveBufferBytes = bytes }
        guard fixedBySender else { return settings }
        if let payloadType = try entry.integer("rtp_payload_type", 0...127) { settings.payloadType = UInt8(payloadType) }
        if let rate = try entry.integer("rtp_clock_rate", 1000...10_000_000) { settings.clockRate = UInt32(rate) }
        if let value = entry["rtcp_mux"] {
            guard let flag = value.bool else { throw entry.error("rtcp_mux", "rtcp_mux must be true or false") }
            settings.rtcpMux = flag
        }
        return settings
    }

    private static func parseSRT(_ entry: StreamEntry) throws(ConfigurationError) -> SRTSettings {
        var settings = SRTSettings()
        if let delivery: SRTDelivery = try entry.choice("srt_delivery", "srt_delivery must be arrival or timed") {
            settings.delivery = delivery
        }
        if let latency = try entry.integer("latency_ms", 20...10_000) {
            guard settings.delivery == .timed else {
                throw entry.error("latency_ms", "latency_ms applies to srt:// streams with srt_delivery = \"timed\" (arrival delivery hands bytes over at once, and drops none)")
            }
            settings.latencyMilliseconds = latency
        }
        if entry["passphrase"] != nil {
            // The value itself is never repeated in a message: the file's errors reach the journal.
            guard let text = entry["passphrase"]?.string, let passphrase = SRTPassphrase(text) else {
                throw entry.error("passphrase", "passphrase must be a string of \(SRTPassphrase.lengths.lowerBound) to \(SRTPassphrase.lengths.upperBound) bytes (SRT's limits), without control characters")
            }
            settings.passphrase = passphrase
        }
        return settings
    }

    private static func receiveBuffer(_ entry: StreamEntry) throws(ConfigurationError) -> Int? {
        try entry.size("receive_buffer", (64 << 10)...(1 << 30), "receive_buffer must be a size from 64K to 1G, e.g. \"8M\"")
    }
}
