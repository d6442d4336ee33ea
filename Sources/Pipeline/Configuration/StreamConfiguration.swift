import Bitstream
import Decoding
import Glibc
import SharedFrames

/// Where a stream listens.
public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    public enum Transport: String, Sendable {
        /// Annex B over a TCP connection.
        case tcp
        /// Annex B in UDP datagrams split anywhere (as `ffmpeg -f h264 udp://` sends it).
        case udp
        /// RTP over UDP: RFC 6184 (H.264) or RFC 7798 (H.265).
        case rtp
        /// SRT (a UDP port) carrying MPEG-TS: what `ffmpeg -f mpegts srt://` and OBS send. The daemon listens.
        case srt
        /// Not a listener: the daemon pulls from an RTSP server (`source = "rtsp://…"`, `StreamConfiguration.rtsp`);
        /// host and port are the server's.
        case rtsp
        /// Not a listener of its own: WebRTC sessions negotiated through the `[webrtc]` WHIP endpoint.
        case whip

        /// Takes a UDP port (ports of the two kinds do not collide).
        var isDatagram: Bool { self != .tcp }
    }
    public var transport: Transport
    public var host: String
    public var port: Int

    public init(transport: Transport, host: String, port: Int) {
        self.transport = transport
        self.host = host
        self.port = port
    }

    public var description: String {
        if transport == .whip { return "whip" }
        return "\(transport.rawValue)://\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }
}

/// What happens when a second sender connects while one is streaming.
public enum SecondSenderPolicy: String, Sendable {
    /// The new connection is closed; the current sender keeps streaming (the default).
    case refuse
    /// The current sender is disconnected and the new one takes over.
    case takeover
}

/// Frames decoded after a loss (RTP sequence gap) until the next random-access point.
public enum LossPolicy: String, Sendable {
    /// Published with the corrupt flag: the decoder's concealment, marked as such.
    case conceal
    /// Withheld: nothing is published until the next keyframe.
    case keyframe
}

/// RTCP feedback asking an RTP sender for a keyframe after a loss.
public enum KeyframeRequest: String, Sendable {
    /// No feedback: the stream recovers at the sender's next keyframe.
    case none
    /// Picture Loss Indication (RFC 4585 §6.3.1).
    case pli
    /// Full Intra Request (RFC 5104 §4.3.1).
    case fir
}

/// An SRT passphrase: kept out of every description, log line, metric and status (`"(set)"` when printed).
public struct SRTPassphrase: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// SRT accepts 10 to 79 characters.
    public static let lengths = 10...79
    let text: String

    public init?(_ text: String) {
        // C takes it up to its first NUL: "secret\0anything" would let in a caller who knows "secret".
        guard Self.lengths.contains(text.utf8.count), !text.containsControlCharacters else { return nil }
        self.text = text
    }

    public var description: String { "(set)" }
    public var debugDescription: String { "(set)" }
}

extension String {
    /// C0 controls, DEL and C1 controls: nothing a configuration value needs, a NUL would cut it where C reads it,
    /// and the others would drive a terminal where the value is printed.
    var containsControlCharacters: Bool { unicodeScalars.contains { $0.value < 0x20 || (0x7f...0x9f).contains($0.value) } }
}

/// When libsrt hands received bytes over.
public enum SRTDelivery: String, Sendable {
    /// As soon as they are in order: a lost packet holds back what follows until its retransmission arrives, and
    /// nothing is dropped for lateness (libsrt's TSBPD off). The frame is there as soon as its bytes are.
    case arrival
    /// libsrt's timed delivery (TSBPD): every packet is held until `latency_ms` after it was sent, and packets later
    /// than that are given up (the frames they damage are flagged). Bounded delay on links that lose a lot.
    case timed
}

/// What an srt:// stream negotiates with its callers.
public struct SRTSettings: Sendable, Equatable {
    public var delivery = SRTDelivery.arrival
    /// Timed delivery's delay, in milliseconds (libsrt's default, 120, suits a LAN; four round trips the internet).
    public var latencyMilliseconds = 120
    /// Nil: callers must not encrypt.
    public var passphrase: SRTPassphrase?

    public init() {}
}

/// One `[[stream]]` entry, validated.
public struct StreamConfiguration: Sendable, Equatable {
    public var name: String
    /// The transport and its own settings.
    public var source: StreamSource
    /// Nil: recognised from the first parameter set (`codec = "auto"`).
    public var codec: VideoCodec?
    public var decoder: DecoderConfiguration
    public var slots: Int
    public var maxWidth: Int
    public var maxHeight: Int
    public var shmName: String
    public var shmMode: mode_t
    public var shmGroup: String?
    public var secondSender: SecondSenderPolicy
    /// Seconds without a byte before a connected sender is considered gone; 0 disables.
    public var idleTimeout: Double
    /// Seconds a decoder is kept once its sender is gone (a sender back at once costs no recreation); then it is
    /// closed and what it held goes back to the system.
    public var decoderLinger: Double = 30
    /// Largest access unit accepted, in bytes; larger ones are dropped before the decoder sees them.
    public var maxAccessUnitBytes: Int
    /// What frames decoded after lost data look like until the next keyframe.
    public var lossPolicy = LossPolicy.conceal
    /// Sources allowed to send (TCP connections, datagrams); empty allows all.
    public var allow: [AddressRange] = []
    /// Keys of earlier versions that are accepted but no longer do anything (`idle_flush`,
    /// `idle_flush_minimum_ms`): `--check-config` and the daemon's start say so.
    public var retiredKeys: [String] = []
    /// TCP connections accepted per second at most from one source address (bursts up to this many); the rest
    /// are closed at once.
    public var maxConnectionsPerSecond = 20
    /// The most bytes the stream's ring may take; nil: room for `slots` frames of max_width × max_height in any
    /// 4:2:0 layout (`FrameRingConfiguration.defaultSizeLimit`). Rings are sized to the frames actually decoded.
    public var ringSizeLimit: Int?
    /// Where the stream's keys are in the file, for messages about them after loading.
    public var lines = KeyPlaces()

    public init(name: String, source: StreamSource) {
        self.name = name
        self.source = source
        codec = nil
        decoder = DecoderConfiguration()
        slots = 8
        maxWidth = 3840
        maxHeight = 2160
        shmName = "streamrecv-" + name
        shmMode = 0o640
        shmGroup = nil
        secondSender = .refuse
        idleTimeout = 10
        maxAccessUnitBytes = 0
        maxAccessUnitBytes = defaultMaxAccessUnitBytes
    }

    /// Twice the raw size of the largest allowed 4:2:0 8-bit picture: no real coded picture is larger.
    var defaultMaxAccessUnitBytes: Int { max(1 << 20, maxWidth * maxHeight * 3) }

    /// How the stream's ring is made.
    public func ring(group: gid_t? = nil) -> FrameRingConfiguration {
        FrameRingConfiguration(
            shmName: shmName, streamName: name, slotCount: slots, maxWidth: maxWidth, maxHeight: maxHeight,
            sizeLimit: ringSizeLimit, mode: shmMode, group: group)
    }
}

/// The lines of a stream's keys in its file (the table's own line when a key is absent). Not part of what a
/// stream is: a reload that only moves lines changes no stream.
public struct KeyPlaces: Sendable, Equatable {
    var table: Int?
    var keys: [String: Int] = [:]

    func line(of key: String) -> Int? { keys[key] ?? table }

    public static func == (_: KeyPlaces, _: KeyPlaces) -> Bool { true }
}

/// The whole configuration file.
public struct DaemonConfiguration: Sendable, Equatable {
    public enum LogLevel: String, Sendable, CaseIterable {
        case trace, debug, info, notice, warning, error
    }
    public var logLevel: LogLevel = .info
    /// Where the Prometheus endpoint listens (`[daemon] metrics = "127.0.0.1:9464"`); nil: no endpoint.
    public var metrics: ListenAddress?
    /// The WHIP endpoint and ICE port of `listen = "whip"` streams (`[webrtc]`); nil: no WebRTC.
    public var webrtc: WebRTCServerConfiguration?
    public var streams: [StreamConfiguration] = []
    /// What the file asks for that works but is likely a mistake: said by --check-config, at start and at reload.
    public var warnings: [String] = []

    /// Whether the file itself holds a secret (a password in a URL or key, an SRT passphrase): then it must not be
    /// readable by every user.
    var holdsSecrets: Bool { streams.contains { $0.srt?.passphrase != nil || $0.rtsp?.passwordInConfiguration == true } }
}

extension StreamConfiguration {
    /// What the stream listens on; for a pulled stream, its server (as `rtsp://HOST:PORT`).
    public var listen: ListenAddress {
        switch source {
        case .tcp(let address), .udp(let address, _), .rtp(let address, _), .srt(let address, _): return address
        case .rtsp(let settings): return ListenAddress(transport: .rtsp, host: settings.camera.host, port: settings.camera.port)
        case .webrtc: return ListenAddress(transport: .whip, host: "", port: 0)
        }
    }

    /// The server of a pulled stream.
    public var rtsp: RTSPSource? { if case .rtsp(let settings) = source { settings.camera } else { nil } }

    /// The settings of a `listen = "whip"` stream.
    public var webrtc: WebRTCSettings? { if case .webrtc(let settings) = source { settings } else { nil } }

    /// The SRT settings of an srt:// stream.
    public var srt: SRTSettings? { if case .srt(_, let settings) = source { settings } else { nil } }

    /// How RTP is received: rtp:// and rtsp:// streams' own settings, the defaults for the others.
    public var rtp: RTPSettings {
        switch source {
        case .rtp(_, let settings): return settings
        case .rtsp(let settings): return settings.rtp
        case .webrtc(let settings): return settings.rtp
        case .tcp, .udp, .srt: return RTPSettings()
        }
    }

    /// The datagram socket's receive buffer (udp://, rtp://, RTSP over UDP).
    public var receiveBufferBytes: Int {
        switch source {
        case .udp(_, let bytes): return bytes
        case .rtp, .rtsp: return rtp.receiveBufferBytes
        case .tcp, .srt, .webrtc: return StreamSource.defaultReceiveBufferBytes
        }
    }

    /// What the stream listens on, or pulls from (without credentials).
    public var endpoint: String {
        if webrtc != nil { return "WHIP /whip/\(name)" }
        return rtsp.map { "source \($0)" } ?? listen.description
    }

    /// `second_sender` with the deadlines `idle_timeout` sets: the same for TCP connections and datagram sources.
    var admissionPolicy: AdmissionPolicy {
        AdmissionPolicy(secondSender: secondSender, deadlines: SenderDeadlines(idleTimeoutSeconds: idleTimeout))
    }
}
