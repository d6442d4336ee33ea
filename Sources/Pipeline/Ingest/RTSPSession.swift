import Bitstream
import CFFmpeg
import CoreMetrics
import Decoding
import Glibc
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SharedFrames

/// What a playing RTSP session carries, told to the decode thread before its first packet.
struct RTPSessionMedia: Sendable, Equatable {
    var codec: VideoCodec
    var payloadType: UInt8
    var clockRate: UInt32
    /// From the SDP (sprop-parameter-sets, sprop-vps/sps/pps): cameras may send them nowhere else.
    var parameterSets: [[UInt8]]
}

/// One RTSP session, from connecting to its end (RFC 2326): OPTIONS, DESCRIBE, SETUP (interleaved TCP or a UDP
/// port pair), PLAY; then keep-alives, RTCP receiver reports, and a watch for the server going away or going
/// quiet. The RTP goes to the decode thread as rtp:// packets do, and the marker bit closes each access unit.
/// The credentials go only into Authorization headers, never into a URL, log line or error.
final class RTSPSession {
    let source: RTSPSource
    let configuration: StreamConfiguration
    let worker: StreamWorker
    let context: RTSPClientContext
    let id: ConnectionID
    private var connection: RTSPConnection?
    private var cseq = 0
    private var challenge: RTSPChallenge?
    private var nonceCount = 0
    private var sessionHeader: String?
    private var supportsGetParameter = false
    private var udp: (rtp: Channel, rtcp: Channel)?
    /// Sends RTCP to the server: on the interleaved channel, or to its RTCP port (nil: the server named none).
    private var rtcpSender: (@Sendable ([UInt8]) -> Void)?
    let statistics: NIOLockedValueBox<RTPReceptionStatistics>
    /// Set when the server's RTCP says BYE: the stream has ended (a file served to its end, a camera going down).
    let goodbyeReceived = NIOLockedValueBox(false)
    private let ownSSRC = UInt32.random(in: 1...UInt32.max)
    private var enqueuedConnection = false

    /// The URL the session as a whole is controlled with (PLAY, TEARDOWN), once described.
    private var sessionURL: String?
    /// The address RTP comes from (the RTSP peer, or the Transport reply's source=); read by the UDP handlers.
    let mediaSource = NIOLockedValueBox<SocketAddress?>(nil)
    /// Where the client can close the connection to stop a session that is still setting up.
    private let current: NIOLockedValueBox<RTSPConnection?>

    init(source: RTSPSource, configuration: StreamConfiguration, worker: StreamWorker, context: RTSPClientContext, id: ConnectionID,
         current: NIOLockedValueBox<RTSPConnection?>) {
        self.current = current
        self.source = source
        self.configuration = configuration
        self.worker = worker
        self.context = context
        self.id = id
        statistics = NIOLockedValueBox(RTPReceptionStatistics(clockRate: 90000))
    }

    /// Runs the session until it fails, the server ends it, or `stopRequested` says so (then TEARDOWN is sent).
    /// `playing` is called once PLAY succeeded.
    func run(stopRequested: () -> Bool, playing: (String) -> Void) async -> RTSPFailure? {
        var failure: RTSPFailure?
        do {
            try await play(stopRequested: stopRequested, playing: playing)
            failure = try await watch(stopRequested: stopRequested)
        } catch {
            failure = error
        }
        // A session that is over is torn down, so that the server stops sending (and frees its slot: cameras
        // allow few sessions) before the next one starts.
        if let connection, connection.channel.isActive, sessionHeader != nil {
            _ = try? await request(method: "TEARDOWN", url: sessionURL ?? source.url, timeout: .milliseconds(300), anyStatus: true)
        }
        current.withLockedValue { $0 = nil }
        if configuration.keyframeRequest != .none { worker.feedbackSender.withLockedValue { $0 = nil } }
        if let connection {
            // The handler's closure holds the worker: let go of it with the connection.
            connection.channel.eventLoop.execute { connection.handler.interleaved = nil }
        }
        connection?.close()
        udp?.rtp.close(promise: nil)
        udp?.rtcp.close(promise: nil)
        if enqueuedConnection {
            let reason: DisconnectReason = switch failure {
            case nil: .daemonStopping
            case .closed, .ended: .closedBySender
            case .stalled(let seconds): .idle(seconds: seconds)
            case let failure?: .connectionError(failure.description)
            }
            worker.enqueue(.disconnected(id, reason: reason))
        }
        return failure
    }

    private func play(stopRequested: () -> Bool, playing: (String) -> Void) async throws(RTSPFailure) {
        let connection = try await RTSPConnection.connect(host: source.host, port: source.port, group: context.group)
        self.connection = connection
        current.withLockedValue { $0 = connection }
        if stopRequested() { return }
        let options = try await request("OPTIONS", url: source.url)
        supportsGetParameter = options.header("Public")?.uppercased().contains("GET_PARAMETER") ?? false
        if stopRequested() { return }
        let description = try await request("DESCRIBE", url: source.url, headers: [("Accept", "application/sdp")])
        let sdp: SessionDescription
        do {
            sdp = try SessionDescription(parsing: String(decoding: description.body, as: UTF8.self))
        } catch {
            throw .protocolError("\(error)")
        }
        let video = sdp.video
        if video.codec == .h264 && video.packetizationMode == 2 {
            throw .protocolError("the server sends H.264 in interleaved mode (packetization-mode=2), which is not supported")
        }
        if video.carriesDecodingOrderNumbers {
            throw .protocolError("the server sends H.265 with decoding order numbers (sprop-max-don-diff > 0), which is not supported")
        }
        if let codec = configuration.codec, codec != video.codec {
            throw .protocolError("the server sends \(video.codec.rawValue), but codec = \"\(codec.rawValue)\"")
        }
        let base = Self.contentBase(description, requestURL: source.url)
        let mediaURL = Self.resolve(video.control, base: base)
        let sessionURL = sdp.control.map { $0 == "*" ? base : Self.resolve($0, base: base) } ?? base
        self.sessionURL = sessionURL
        statistics.withLockedValue { $0 = RTPReceptionStatistics(clockRate: video.clockRate) }

        if stopRequested() { return }
        switch source.transport {
        case .tcp:
            let setup = try await request("SETUP", url: mediaURL, headers: [("Transport", "RTP/AVP/TCP;unicast;interleaved=0-1")])
            try takeSession(from: setup)
            let transport = setup.header("Transport") ?? ""
            guard transport.uppercased().contains("/TCP") else {
                throw .protocolError("the server did not accept interleaved TCP (Transport: \(transport.prefix(100))); try rtsp_transport = \"udp\"")
            }
            let channels = Self.transportParameter("interleaved", in: transport) ?? (0, 1)
            rtcpSender = { [connection] bytes in connection.writeInterleaved(channel: UInt8(truncatingIfNeeded: channels.second), bytes) }
            routeInterleaved(rtpChannel: UInt8(truncatingIfNeeded: channels.first), rtcpChannel: UInt8(truncatingIfNeeded: channels.second),
                             on: connection)
        case .udp:
            guard var server = connection.channel.remoteAddress else { throw .closed }
            mediaSource.withLockedValue { $0 = server }
            let pair = try await bindPortPair(near: connection.channel)
            udp = pair
            let port = pair.rtp.localAddress?.port ?? 0
            let setup = try await request("SETUP", url: mediaURL, headers: [("Transport", "RTP/AVP;unicast;client_port=\(port)-\(port + 1)")])
            try takeSession(from: setup)
            let transport = setup.header("Transport") ?? ""
            // A media server apart from the RTSP server names itself (source=): RTP comes from there, RTCP goes there.
            if let address = Self.transportSource(in: transport), let media = try? SocketAddress(ipAddress: address, port: 0) {
                server = media
                mediaSource.withLockedValue { $0 = media }
            }
            if let ports = Self.transportParameter("server_port", in: transport) {
                var destination = server
                destination.port = ports.second
                rtcpSender = { [rtcp = pair.rtcp, destination] bytes in
                    rtcp.writeAndFlush(AddressedEnvelope(remoteAddress: destination, data: rtcp.allocator.buffer(bytes: bytes)), promise: nil)
                }
            }
        }
        // The decode thread learns the session before its first packet: PLAY's answer may follow the RTP.
        worker.enqueue(.connected(id, remote: source.displayURL))
        worker.enqueue(.rtpSession(id, RTPSessionMedia(codec: video.codec, payloadType: video.payloadType,
                                                       clockRate: video.clockRate, parameterSets: video.parameterSets)))
        enqueuedConnection = true
        if configuration.keyframeRequest != .none, let rtcpSender { worker.setFeedbackSender(rtcpSender) }
        if stopRequested() { return }
        _ = try await request("PLAY", url: sessionURL, headers: [("Range", "npt=0.000-")])
        if stopRequested() { return }
        playing("\(video.codec.rawValue) over \(source.transport == .tcp ? "interleaved TCP" : "UDP")")
    }

    /// Keep-alives and receiver reports until the session ends; nil when stopped.
    private func watch(stopRequested: () -> Bool) async throws(RTSPFailure) -> RTSPFailure? {
        guard let connection else { return .closed }
        let start = MonotonicClock.nanoseconds()
        // idle_timeout: no video for that long ends the session (0: never; keep-alives still notice a dead server).
        let stallLimit = configuration.idleTimeout > 0 ? UInt64(configuration.idleTimeout * 1e9) : UInt64.max
        // Half the server's session timeout (60 s unless it said otherwise).
        let keepAliveInterval = UInt64(max(1, sessionTimeoutSeconds / 2)) * 1_000_000_000
        var nextKeepAlive = start + keepAliveInterval
        var nextReport = start + 1_000_000_000
        var nextProbe = start
        while true {
            if stopRequested() { return nil }
            if !connection.channel.isActive { return connection.handler.failure.withLockedValue { $0 } ?? .closed }
            let now = MonotonicClock.nanoseconds()
            let quiet = SenderDeadlines.quiet(admittedAt: start, lastProgress: worker.activity.lastProgress(of: id), now: now)
            if quiet > stallLimit { return .stalled(seconds: Double(quiet) / 1e9) }
            if goodbyeReceived.withLockedValue({ $0 }) { return .ended }
            // No packet for a second: is the server still there? A camera that lost power or rebooted sent no FIN;
            // its old connection answers a request with a reset (or not at all): the session ends now and the next
            // one starts as soon as the camera answers, instead of after idle_timeout.
            let lastPacket = statistics.withLockedValue { $0.lastArrival } ?? start
            if now > lastPacket + 1_000_000_000 && now >= nextProbe {
                nextProbe = now + 2_000_000_000
                try await keepAlive(timeout: .seconds(2))
                nextKeepAlive = now + keepAliveInterval
            }
            if now >= nextReport {
                nextReport = now + 5_000_000_000
                let report = statistics.withLockedValue { $0.report(senderSSRC: ownSSRC, cname: "streamrecvd", now: now) }
                rtcpSender?(report)
            }
            if now >= nextKeepAlive {
                nextKeepAlive = now + keepAliveInterval
                try await keepAlive(timeout: RTSPConnection.answerTimeout)
            }
            try? await Task.sleep(nanoseconds: 50_000_000)
        }
    }

    /// GET_PARAMETER when the server lists it, else OPTIONS. Any answer says the server is alive: some list
    /// GET_PARAMETER and answer an empty one with 451.
    private func keepAlive(timeout: TimeAmount) async throws(RTSPFailure) {
        _ = try await request(method: supportsGetParameter ? "GET_PARAMETER" : "OPTIONS", url: sessionURL ?? source.url,
                              timeout: timeout, anyStatus: true)
    }

    /// One request; a 401 is answered with the credentials (Digest preferred), and later requests carry them. A
    /// second 401 fails, unless its challenge says the nonce went stale (then the new one is tried once more).
    private func request(_ method: String, url: String, headers: [(String, String)] = []) async throws(RTSPFailure) -> RTSPResponse {
        try await request(method: method, url: url, headers: headers, timeout: RTSPConnection.answerTimeout, anyStatus: false)
    }

    private func request(method: String, url: String, headers: [(String, String)] = [], timeout: TimeAmount = RTSPConnection.answerTimeout,
                         anyStatus: Bool) async throws(RTSPFailure) -> RTSPResponse {
        guard let connection else { throw .closed }
        var retried = false
        while true {
            cseq += 1
            var all = headers
            if let sessionHeader { all.append(("Session", sessionHeader)) }
            let sentCredentials = challenge != nil && source.user != nil
            if let challenge, let user = source.user {
                nonceCount += 1
                all.append(("Authorization", challenge.authorization(
                    user: user, password: source.password?.text ?? "", method: method, uri: url, count: nonceCount,
                    clientNonce: String(UInt64.random(in: 0...UInt64.max), radix: 16), md5: Self.md5)))
            }
            let response = try await connection.request(method, url: url, cseq: cseq, headers: all, timeout: timeout)
            if response.statusCode == 401 && !anyStatus {
                guard source.user != nil else { throw .unauthorized(credentialsSent: false) }
                guard let offered = RTSPChallenge(headers: response.headers(named: "WWW-Authenticate")) else {
                    throw .protocolError("the server asks for an authentication this client does not speak (it speaks Digest MD5 and Basic)")
                }
                guard !retried, !sentCredentials || offered.stale else { throw .unauthorized(credentialsSent: true) }
                retried = true
                challenge = offered
                nonceCount = 0
                continue
            }
            guard anyStatus || (200..<300).contains(response.statusCode) else {
                throw .refused(method: method, status: response.statusCode, reason: String(response.reason.prefix(100)))
            }
            return response
        }
    }

    private func takeSession(from response: RTSPResponse) throws(RTSPFailure) {
        guard let header = response.header("Session"), let id = header.split(separator: ";").first?.trimmingCharacters(in: " \t"), !id.isEmpty else {
            throw .protocolError("SETUP's answer has no Session header")
        }
        sessionHeader = id
        sessionTimeoutSeconds = Self.sessionTimeout(header)
    }

    private var sessionTimeoutSeconds = 60

    /// Interleaved RTP straight to the decode thread, on the event loop; RTCP sender reports to the statistics.
    private func routeInterleaved(rtpChannel: UInt8, rtcpChannel: UInt8, on connection: RTSPConnection) {
        let (worker, statistics, id) = (self.worker, self.statistics, self.id)
        let deliver = Self.deliverer(worker: worker, statistics: statistics, id: id)
        let note = rtcpReceiver
        let lost = context.metrics.datagramsLost
        connection.channel.eventLoop.execute {
            connection.handler.interleaved = { channel, payload in
                // Dropped while the decode thread is behind, as over UDP (the sequence gap reports the loss): pausing
                // the reads instead would hold back the server's answers too, and its keep-alives would time out.
                if channel == rtpChannel, !payload.withUnsafeBytes(deliver) { lost.increment() }
                if channel == rtcpChannel { payload.withUnsafeBytes { note(RTPReceptionStatistics.news(in: $0)) } }
            }
        }
    }

    /// What the server's RTCP says: sender reports go to the statistics (for the RR's delay fields), BYE ends.
    var rtcpReceiver: @Sendable (RTPReceptionStatistics.SenderNews) -> Void {
        { [statistics, goodbyeReceived] news in
            if let ntp = news.senderReportTimestamp {
                statistics.withLockedValue { $0.recordSenderReport(ntpTimestamp: ntp, arrival: MonotonicClock.nanoseconds()) }
            }
            if news.goodbye { goodbyeReceived.withLockedValue { $0 = true } }
        }
    }

    /// One RTP packet to the decode thread and the reception statistics; false (the packet dropped) when the
    /// decode thread is behind: the sequence gap then flags the loss.
    static func deliverer(worker: StreamWorker, statistics: NIOLockedValueBox<RTPReceptionStatistics>, id: ConnectionID)
        -> (UnsafeRawBufferPointer) -> Bool {
        { payload in
            if !worker.acceptsMoreBytes { return false }
            let now = MonotonicClock.nanoseconds()
            if payload.count >= 12 {
                let sequence = UInt16(payload[2]) << 8 | UInt16(payload[3])
                let timestamp = payload[4..<8].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                let ssrc = payload[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                statistics.withLockedValue { $0.record(ssrc: ssrc, sequenceNumber: sequence, timestamp: timestamp, arrival: now) }
            }
            var bytes = worker.bytePool.take()
            bytes.append(contentsOf: payload)
            _ = worker.enqueue(bytes: bytes, receivedAt: now, connection: id)  // queued, even past the high-water mark
            return true
        }
    }
}
