import Bitstream
import CFFmpeg
import CoreMetrics
import Decoding
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SharedFrames

/// The session's parts that are plain parsing and socket setup: URLs, Transport parameters, the UDP port pair.
extension RTSPSession {
    /// The base for relative control URLs: Content-Base, else Content-Location, else the request URL (RFC 2326 C.1.1).
    static func contentBase(_ response: RTSPResponse, requestURL: String) -> String {
        response.header("Content-Base") ?? response.header("Content-Location") ?? requestURL
    }

    /// A control attribute resolved against the base: absolute URLs as they are, "*" or none is the base itself.
    static func resolve(_ control: String?, base: String) -> String {
        guard let control, !control.isEmpty, control != "*" else { return base }
        if control.lowercased().hasPrefix("rtsp://") || control.lowercased().hasPrefix("rtsps://") { return control }
        return base.hasSuffix("/") ? base + control : base + "/" + control
    }

    /// "interleaved=0-1" or "server_port=6970-6971" from a Transport header.
    static func transportParameter(_ name: String, in transport: String) -> (first: Int, second: Int)? {
        RTSPTransportHeader.pair(name, in: transport).map { ($0.first, $0.second) }
    }

    /// The Session header's timeout (seconds, RFC 2326 §12.37), 60 when absent.
    static func sessionTimeout(_ header: String) -> Int {
        for item in header.split(separator: ";").dropFirst() {
            let pair = item.split(separator: "=", maxSplits: 1)
            if pair.count == 2, pair[0].trimmingCharacters(in: " \t").lowercased() == "timeout", let seconds = Int(pair[1].trimmingCharacters(in: " \t")), seconds > 0 {
                return min(seconds, 3600)
            }
        }
        return 60
    }

    static func md5(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 16)
        bytes.withUnsafeBufferPointer { input in
            av_md5_sum(&digest, input.baseAddress, input.count)
        }
        return digest
    }

    /// An even RTP port and the odd RTCP port above it (RFC 3550 §11), on the address the RTSP connection uses.
    /// Datagrams from any address but the server's are ignored (and counted).
    func bindPortPair(near control: Channel) async throws(RTSPFailure) -> (rtp: Channel, rtcp: Channel) {
        let host = control.localAddress?.ipAddress ?? "0.0.0.0"
        // Each channel makes its own handler from these (all Sendable): a handler belongs to one channel's loop.
        let (media, refuse, context) = (self.media, refusalReporter, self.context)
        let (deliver, rtcpReceiver) = (Self.deliverer(worker: worker, media: media, id: id, pushedBack: false), self.rtcpReceiver)
        for _ in 0..<32 {
            do {
                let rtp = try await DatagramBootstrap(group: control.eventLoop)
                    .channelOption(.socketOption(.so_rcvbuf), value: configuration.receiveBufferBytes)
                    .channelOption(.datagramVectorReadMessageCount, value: 16)
                    .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 16 * RTSPDatagramHandler.messageBytes))
                    .channelInitializer { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(RTSPDatagramHandler(
                                media: media, deliver: deliver, rtcp: nil, refuse: refuse, context: context))
                        }
                    }
                    .bind(host: host, port: 0).get()
                guard let port = rtp.localAddress?.port, port % 2 == 0, port < 65535 else {
                    try? await rtp.close()
                    continue
                }
                do {
                    let rtcp = try await DatagramBootstrap(group: control.eventLoop)
                        .channelInitializer { channel in
                            channel.eventLoop.makeCompletedFuture {
                                try channel.pipeline.syncOperations.addHandler(RTSPDatagramHandler(
                                    media: media, deliver: nil, rtcp: rtcpReceiver, refuse: refuse, context: context))
                            }
                        }
                        .bind(host: host, port: port + 1).get()
                    return (rtp, rtcp)
                } catch {
                    try? await rtp.close()
                }
            } catch {
                throw .unreachable("cannot bind UDP ports for RTP on \(host): \(RTSPConnection.describe(error))")
            }
        }
        throw .unreachable("no free even/odd UDP port pair for RTP on \(host)")
    }
}

/// RTP or RTCP datagrams of an rtsp_transport = "udp" session. Only the server may send: its address, its ports and
/// its SSRC (`RTSPMediaGate`); anything else is ignored, counted as refused (not_allowed) and logged at most once
/// per 10 s per kind.
final class RTSPDatagramHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    /// A receive buffer per datagram of a vector read: a jumbo frame's worth.
    static let messageBytes = 9216

    /// The server's address and the gate (`RTSPMediaState`), shared with the session.
    private let media: NIOLockedValueBox<RTSPMediaState>
    /// The RTP port's handler delivers packets; the RTCP port's reads the server's reports.
    private let deliver: (@Sendable (UnsafeRawBufferPointer) -> RTSPSession.Delivery)?
    private let rtcp: (@Sendable (RTPReceptionStatistics.SenderNews) -> Void)?
    private let refuse: @Sendable (RTSPMediaGate.Verdict?, String) -> Void
    private let context: RTSPClientContext
    private var log: RateLimitedLogger

    init(media: NIOLockedValueBox<RTSPMediaState>, deliver: (@Sendable (UnsafeRawBufferPointer) -> RTSPSession.Delivery)?,
         rtcp: (@Sendable (RTPReceptionStatistics.SenderNews) -> Void)?, refuse: @escaping @Sendable (RTSPMediaGate.Verdict?, String) -> Void,
         context: RTSPClientContext) {
        self.media = media
        self.deliver = deliver
        self.rtcp = rtcp
        self.refuse = refuse
        self.context = context
        log = RateLimitedLogger(logger: context.logger)
    }

    func channelRead(context channelContext: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        let from = envelope.remoteAddress
        guard from.ipAddress == media.withLockedValue({ $0.server?.ipAddress }) else {
            context.metrics.refused(.notAllowed)
            log.log(.warning, key: "rtsp-foreign", now: MonotonicClock.nanoseconds(), "datagrams from \(from), not the RTSP server, ignored")
            return
        }
        if let deliver {
            let verdict = envelope.data.withUnsafeReadableBytes { bytes in media.withLockedValue { $0.gate?.admitRTP(bytes, fromPort: from.port) } }
            if verdict != .accepted { refuse(verdict, "\(from.ipAddress ?? "?")") }
            guard verdict?.isAccepted == true else { return }
            // A datagram that filled its buffer may have been cut short; one dropped while the decode thread is
            // behind is not queued. Either way its sequence number reports the loss downstream.
            guard envelope.data.readableBytes < Self.messageBytes,
                  envelope.data.withUnsafeReadableBytes(deliver) != .decoderBehind else {
                context.metrics.datagramsLost.increment()
                return
            }
        } else if let rtcp {
            guard media.withLockedValue({ $0.gate?.admitsRTCP(fromPort: from.port) }) == true else {
                context.metrics.refused(.notAllowed)
                log.log(.warning, key: "rtsp-rtcp-port", now: MonotonicClock.nanoseconds(),
                        "RTCP from \(from), not the server's RTCP port, ignored")
                return
            }
            rtcp(envelope.data.withUnsafeReadableBytes { RTPReceptionStatistics.news(in: $0) })
        }
    }
}
