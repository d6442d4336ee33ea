import Bitstream

extension DecodeSession {
    /// How a connection's bytes become NAL units: chosen once per connection from the stream's source (and, for
    /// rtsp://, once more when the session description says what the server sends). The Annex B splitter
    /// (`annexB`) serves every case but RTP: TS payloads are Annex B too.
    enum Framing {
        /// tcp://, udp://: Annex B bytes as they come.
        case annexB
        /// rtp://, and rtsp:// and whip once described: RTP packets, put in order by the transport's receiver, depacketized.
        case rtp(RTPIngest)
        /// rtsp:// before the session description: nothing can be depacketized yet.
        case awaitingSessionDescription
        /// srt://: MPEG-TS carrying Annex B.
        case transportStream(TransportStreamIngest)

        /// The framing a new connection of `configuration`'s stream starts with.
        static func initial(for configuration: StreamConfiguration) -> Framing {
            switch configuration.source {
            case .tcp, .udp:
                return .annexB
            case .rtp(_, let settings):
                // The loader refuses rtp:// without a codec: the payload format depends on it.
                guard let codec = configuration.codec else { return .awaitingSessionDescription }
                return .rtp(RTPIngest(codec: codec, payloadType: settings.payloadType, maximumNALUnitSize: configuration.maxAccessUnitBytes))
            case .rtsp, .webrtc:
                // The session description (RTSP's DESCRIBE, WebRTC's negotiated offer) names payload type and codec.
                return .awaitingSessionDescription
            case .srt:
                // A fresh demuxer per caller: it learns the program anew from the PAT and PMT.
                return .transportStream(TransportStreamIngest())
            }
        }

        var rtp: RTPIngest? { if case .rtp(let ingest) = self { ingest } else { nil } }
        var transportStream: TransportStreamIngest? { if case .transportStream(let ingest) = self { ingest } else { nil } }

        /// Runs `body` on the RTP ingest in place (its buffers are not copied: the case is emptied meanwhile);
        /// nil when the framing is not RTP. `body` must not read the framing.
        mutating func withRTP<Result>(_ body: (inout RTPIngest) -> Result) -> Result? {
            guard case .rtp(var ingest) = self else { return nil }
            self = .awaitingSessionDescription
            defer { self = .rtp(ingest) }
            return body(&ingest)
        }

        /// `withRTP`, for the MPEG-TS demuxer.
        mutating func withTransportStream<Result>(_ body: (inout TransportStreamIngest) -> Result) -> Result? {
            guard case .transportStream(var ingest) = self else { return nil }
            self = .annexB
            defer { self = .transportStream(ingest) }
            return body(&ingest)
        }
    }
}
