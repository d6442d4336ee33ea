import Bitstream
import Decoding
import Glibc
import SharedFrames
import TOMLKit

/// The keys every stream has (decoding, the ring, senders), and which keys belong to some transports only.
extension ConfigurationLoader {
    /// Why `key` cannot be in a stream with `source`, or nil when it can: one place that says which keys belong
    /// to which transports (their parsers read only their own).
    static func refusal(of key: String, for source: StreamSource) -> String? {
        let pulled = " does not apply to a source = \"rtsp://…\" stream (the session description says what the server sends)"
        switch key {
        case "rtp_payload_type", "rtp_clock_rate", "rtcp_mux":
            if case .rtp = source { return nil }
            if source.transport == .whip { return "\(key) does not apply to a whip stream (the session negotiates it)" }
            return source.transport == .rtsp ? key + pulled : "\(key) applies to rtp:// streams only"
        case "allow", "max_connections_per_second", "second_sender":
            return source.transport == .rtsp ? key + pulled : nil
        case "rtp_reorder_window":
            return [.rtp, .rtsp, .whip].contains(source.transport) ? nil : "rtp_reorder_window applies to rtp://, rtsp:// and whip streams only"
        case "keyframe_request", "keyframe_request_interval":
            return [.rtp, .rtsp, .whip].contains(source.transport) ? nil : "\(key) needs an rtp://, rtsp:// or whip stream (RTCP feedback)"
        case "token_file", "remb", "transport_cc", "max_bitrate":
            return source.transport == .whip ? nil : "\(key) applies to listen = \"whip\" streams only"
        case "receive_buffer":
            switch source {
            case .udp, .rtp: return nil
            case .rtsp(let settings) where settings.camera.transport == .udp: return nil
            case .tcp, .srt, .rtsp, .webrtc:
                return "receive_buffer applies to udp://, rtp:// and rtsp_transport = \"udp\" streams only"
            }
        case "srt_delivery", "latency_ms", "passphrase":
            return source.transport == .srt ? nil : "\(key) applies to srt:// streams only"
        case "rtsp_transport", "rtsp_auth", "rtsp_user", "rtsp_password", "rtsp_password_file":
            return source.transport == .rtsp ? nil : "\(key) applies to source = \"rtsp://…\" streams only"
        default:
            return nil
        }
    }

    /// The codec, the decoder and the limits of what it is given.
    static func parseDecoding(_ entry: StreamEntry, into stream: inout StreamConfiguration) throws(ConfigurationError) {
        if let codec = try entry.string("codec"), codec != "auto" {
            guard let known = VideoCodec(rawValue: codec) else { throw entry.error("codec", "codec must be h264, h265 or auto") }
            stream.codec = known
        }
        if case .rtp = stream.source, stream.codec == nil {
            // The depacketizer must know the payload format before the first parameter set can be seen.
            throw entry.error("codec", "rtp:// needs codec = \"h264\" or \"h265\" (the RTP payload format depends on it)")
        }
        if let hwaccel = try entry.string("hwaccel") {
            guard let preference = HardwarePreference(configValue: hwaccel) else {
                throw entry.error("hwaccel", "hwaccel must be auto, none, \(HardwareAccelerator.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            stream.decoder.hardware = preference
        }
        if let output: DecoderConfiguration.OutputMode = try entry.choice("output", "output must be auto or native") {
            stream.decoder.output = output
        }
        if let threading: DecoderConfiguration.Threading = try entry.choice("threading", "threading must be slice or frame") {
            stream.decoder.threading = threading
        }
        if let threads = try entry.integer("threads", 0...64) { stream.decoder.threads = threads }
        if let slots = try entry.integer("slots", 2...4096) { stream.slots = slots }
        let dimensions = 16...ParameterSetLimits.maximumDimension
        if let width = try entry.integer("max_width", dimensions) { stream.maxWidth = width }
        if let height = try entry.integer("max_height", dimensions) { stream.maxHeight = height }
        stream.maxAccessUnitBytes = stream.defaultMaxAccessUnitBytes
        if let bytes = try entry.integer("max_access_unit_bytes", 4096...(1 << 30)) { stream.maxAccessUnitBytes = bytes }
    }

    /// Senders, losses and the ring.
    static func parseDelivery(_ entry: StreamEntry, into stream: inout StreamConfiguration) throws(ConfigurationError) {
        if let policy: LossPolicy = try entry.choice("loss_policy", "loss_policy must be conceal or keyframe") { stream.lossPolicy = policy }
        if let value = entry["allow"] {
            guard let list = value.array else { throw entry.error("allow", "allow must be a list of networks, e.g. [\"192.168.1.0/24\", \"::1\"]") }
            for item in list {
                guard let text = item.string, let range = AddressRange(text) else {
                    throw entry.error("allow", "allow entry \(item.string.map { "'\($0)'" } ?? "(not a string)") is not an address or CIDR network")
                }
                stream.allow.append(range)
            }
        }
        if let rate = try entry.integer("max_connections_per_second", 1...10000) { stream.maxConnectionsPerSecond = rate }
        if let policy: SecondSenderPolicy = try entry.choice("second_sender", "second_sender must be refuse or takeover") {
            stream.secondSender = policy
        }
        // Below half a second a sender between two frames would be taken for gone.
        if let seconds = try entry.seconds("idle_timeout", "idle_timeout must be 0 (never) or a number of seconds in 0.5...86400",
                                           valid: { $0 == 0 || ($0 >= 0.5 && $0 <= 86400) }) {
            stream.idleTimeout = seconds
        }
        if let seconds = try entry.seconds("decoder_linger", "decoder_linger must be a number of seconds in 0...86400",
                                           valid: { $0 >= 0 && $0 <= 86400 }) {
            stream.decoderLinger = seconds
        }
        if let shmName = try entry.string("shm_name") {
            guard shmName.count <= 200, SharedMemoryDirectory.isPlainName(shmName) else {
                throw entry.error("shm_name", "shm_name must be a plain name (no '/'), as under /dev/shm")
            }
            stream.shmName = shmName
        }
        if let mode = try entry.string("shm_mode") {
            // Readers map the ring read-only: write permission for anyone but the daemon would only let them
            // forge frames, or truncate the object under readers that look at frames where they lie.
            guard let value = mode_t(mode, radix: 8), value & ~0o644 == 0, value & 0o600 == 0o600 else {
                throw entry.error("shm_mode", "shm_mode must be an octal mode string such as \"0640\": read and write for the daemon, read at most for group and others (readers never write; a group that may write could forge frames), no execute bits")
            }
            stream.shmMode = value
        }
        if let group = try entry.string("shm_group") {
            guard getgrnam(group) != nil else { throw entry.error("shm_group", "shm_group '\(group)' does not exist") }
            stream.shmGroup = group
        }
        if let bytes = try entry.size("ring_size_limit", (1 << 20)...(1 << 40),
                                      "ring_size_limit must be a size from 1M to 1T, e.g. \"256M\" (bytes, or K, M, G, T)") {
            stream.ringSizeLimit = bytes
        }
    }
}
