/// Where a stream's video comes from, with the settings that belong to that transport alone. A setting of another
/// transport cannot be represented: the loader refuses its key, naming its line and the transports it applies to
/// (`ConfigurationLoader.refusal(of:for:)`), and a pulled stream has no listen address to get wrong.
public enum StreamSource: Sendable, Equatable {
    /// Annex B over TCP, one sender at a time.
    case tcp(ListenAddress)
    /// Annex B in UDP datagrams.
    case udp(ListenAddress, receiveBufferBytes: Int)
    /// RTP (RFC 6184 / RFC 7798) over UDP, with RTCP.
    case rtp(ListenAddress, RTPSettings)
    /// MPEG-TS over SRT (libsrt).
    case srt(ListenAddress, SRTSettings)
    /// Pulled from an RTSP server (`source = "rtsp://…"`).
    case rtsp(RTSPSettings)
    /// WebRTC from WHIP clients (`listen = "whip"`): offers to the `[webrtc]` HTTP endpoint, media on its ICE port.
    case webrtc(WebRTCSettings)

    /// The socket senders reach; nil for a pulled stream.
    public var listenAddress: ListenAddress? {
        switch self {
        case .tcp(let address), .udp(let address, _), .rtp(let address, _), .srt(let address, _): return address
        case .rtsp, .webrtc: return nil
        }
    }

    public var transport: ListenAddress.Transport {
        switch self {
        case .tcp: return .tcp
        case .udp: return .udp
        case .rtp: return .rtp
        case .srt: return .srt
        case .rtsp: return .rtsp
        case .webrtc: return .whip
        }
    }
}

/// RTP reception: rtp:// streams set all of it; rtsp:// streams the reorder window, keyframe requests and the UDP
/// receive buffer (their payload type and clock rate come from the session description).
public struct RTPSettings: Sendable, Equatable {
    /// RTP payload type of the video (dynamic types are negotiated out of band; 96 is the common choice).
    public var payloadType: UInt8 = 96
    /// Ticks per second of RTP timestamps (RFC 6184/7798 fix 90 kHz for video; for senders that do not).
    public var clockRate: UInt32 = 90000
    /// Packets an RTP packet may be overtaken by and still be put back in order.
    public var reorderWindow = 8
    /// RTCP feedback sent after a loss, at most once per `keyframeRequestInterval` seconds.
    public var keyframeRequest = KeyframeRequest.none
    public var keyframeRequestInterval = 1.0
    /// RTCP goes to the sender's RTP port (RFC 5761 multiplexing) instead of that port + 1 (RFC 3550's convention).
    public var rtcpMux = false
    /// The socket's receive buffer (the kernel caps it at net.core.rmem_max).
    public var receiveBufferBytes = StreamSource.defaultReceiveBufferBytes

    public init() {}
}

/// A pulled stream: the server with its credentials and RTSP transport, and how its RTP is received.
public struct RTSPSettings: Sendable, Equatable {
    public var camera: RTSPSource
    public var rtp = RTPSettings()

    public init(camera: RTSPSource) { self.camera = camera }
}

extension StreamSource {
    /// udp://, rtp:// and RTSP over UDP: the socket's receive buffer unless `receive_buffer` says otherwise.
    public static let defaultReceiveBufferBytes = 8 << 20
}
