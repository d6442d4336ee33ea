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

/// What an RTSP client remembers from one session to the next about its server.
struct RTSPServerMemory: Sendable {
    enum Authentication: Sendable { case unknown, digest }
    enum Interleaving: Sendable { case untried, refused }
    /// `.digest` once the server asked for Digest: a later request for Basic is a downgrade, never answered.
    var authentication = Authentication.unknown
    /// `.refused` once the server answered 461 to interleaved TCP: later sessions go straight to UDP.
    var interleaving = Interleaving.untried
    /// Set once the server's SETUP answer for UDP named neither `server_port` nor `ssrc=`: its datagrams could not be
    /// told from another local process's (the first to send would win), so later sessions ask for interleaved TCP.
    var udpMediaUnverifiable = false
}

/// One RTSP session, from connecting to its end (RFC 2326): OPTIONS, DESCRIBE (following up to
/// `maximumRedirects` redirects), SETUP (interleaved TCP or a UDP port pair), PLAY; then keep-alives, RTCP receiver
/// reports, and a watch for the server going away, going quiet, or sending nothing that decodes. The RTP goes to
/// the decode thread as rtp:// packets do, and the marker bit closes each access unit. The credentials go only
/// into Authorization headers, never into a URL, log line or error, and only to the configured host and port.
final class RTSPSession {
    static let maximumRedirects = 3

    /// The configured source; `target` is where the session ended up after redirects.
    let source: RTSPSource
    var target: RTSPSource
    let configuration: StreamConfiguration
    let worker: StreamWorker
    let context: RTSPClientContext
    let id: ConnectionID
    let memory: NIOLockedValueBox<RTSPServerMemory>
    var connection: RTSPConnection?
    var cseq = 0
    var challenge: RTSPChallenge?
    var nonceCount = 0
    var sessionHeader: String?
    var sessionTimeoutSeconds = 60
    var supportsGetParameter = false
    var udp: (rtp: Channel, rtcp: Channel)?
    /// Sends RTCP to the server: on the interleaved channel, or to its RTCP port (nil: not known yet).
    var rtcpSender: (@Sendable ([UInt8]) -> Void)?
    /// Who may send media, what came of it, and the refusal log: shared with the media sockets' handlers.
    let media: NIOLockedValueBox<RTSPMediaState>
    private var enqueuedConnection = false

    /// The URL the session as a whole is controlled with (PLAY, TEARDOWN), once described.
    var sessionURL: String?
    /// Where the client can close the connection to stop a session that is still setting up.
    private let current: NIOLockedValueBox<RTSPConnection?>

    init(source: RTSPSource, configuration: StreamConfiguration, worker: StreamWorker, context: RTSPClientContext, id: ConnectionID,
         current: NIOLockedValueBox<RTSPConnection?>, memory: NIOLockedValueBox<RTSPServerMemory>) {
        self.current = current
        self.source = source
        target = source
        self.configuration = configuration
        self.worker = worker
        self.context = context
        self.id = id
        self.memory = memory
        media = NIOLockedValueBox(RTSPMediaState(refusals: RateLimitedLogger(logger: context.logger), rtp: configuration.rtp,
                                                 now: MonotonicClock.nanoseconds()))
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
            _ = try? await request(method: "TEARDOWN", url: sessionURL ?? target.url, timeout: .milliseconds(300), anyStatus: true)
        }
        current.withLockedValue { $0 = nil }
        if configuration.rtp.keyframeRequest != .none { worker.setKeyframeSignal(nil) }
        if let connection {
            // The handler's closure holds the worker: let go of it with the connection.
            connection.channel.eventLoop.execute { connection.handler.value.interleaved = nil }
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
            Self.finish(media: media, worker: worker, id: id, reason: reason)
        }
        return failure
    }

    private func play(stopRequested: () -> Bool, playing: (String) -> Void) async throws(RTSPFailure) {
        let (description, redirects) = try await describe(stopRequested: stopRequested)
        guard let description, let connection else { return }
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
        let base = Self.contentBase(description, requestURL: target.url)
        let mediaURL = Self.resolve(video.control, base: base)
        let sessionURL = sdp.control.map { $0 == "*" ? base : Self.resolve($0, base: base) } ?? base
        self.sessionURL = sessionURL
        media.withLockedValue { $0.described(clockRate: video.clockRate, now: MonotonicClock.nanoseconds()) }

        if stopRequested() { return }
        let how = try await setUp(mediaURL: mediaURL, on: connection)
        // The decode thread learns the session before its first packet: PLAY's answer may follow the RTP.
        worker.enqueue(.connected(id, remote: source.displayURL))
        worker.enqueue(.rtpSession(id, RTPSessionMedia(codec: video.codec, payloadType: video.payloadType,
                                                       clockRate: video.clockRate, parameterSets: video.parameterSets)))
        enqueuedConnection = true
        if configuration.rtp.keyframeRequest != .none, let rtcpSender {
            // Called by the decode thread: the request goes out at once, and again from the watch until it heals.
            worker.setKeyframeSignal { [media, metrics = worker.metrics] signal in
                let feedback = media.withLockedValue { state in
                    state.receiver.apply(signal)
                    return state.receiver.poll(now: MonotonicClock.nanoseconds())
                }
                Self.send(feedback, with: rtcpSender, metrics: metrics)
            }
        }
        if stopRequested() { return }
        _ = try await request("PLAY", url: sessionURL, headers: [("Range", "npt=0.000-")])
        if stopRequested() { return }
        playing("\(video.codec.rawValue) over \(how)" + (redirects > 0 ? " (redirected to \(target.displayURL))" : ""))
    }

    /// Keep-alives and receiver reports until the session ends; nil when stopped.
    private func watch(stopRequested: () -> Bool) async throws(RTSPFailure) -> RTSPFailure? {
        guard let connection else { return .closed }
        let start = MonotonicClock.nanoseconds()
        // idle_timeout: no video for that long ends the session (0: never; keep-alives still notice a dead server).
        // Slices that arrive but never decode (no parameter sets anywhere, another codec than the SDP's) are not
        // video: no frame decoded for that long ends it too.
        let stallLimit = configuration.idleTimeout > 0 ? UInt64(configuration.idleTimeout * 1e9) : UInt64.max
        // Half the server's session timeout (60 s unless it said otherwise).
        let keepAliveInterval = UInt64(max(1, sessionTimeoutSeconds / 2)) * 1_000_000_000
        var nextKeepAlive = start + keepAliveInterval
        var nextProbe = start
        while true {
            if stopRequested() { return nil }
            if !connection.channel.isActive { return connection.failure.withLockedValue { $0 } ?? .closed }
            let now = MonotonicClock.nanoseconds()
            // While reads wait for the decode thread (`ReadHold`) no session ends for no video: the silence may be
            // ours. The clock is not restarted by a hold (the decode thread goes on meanwhile): a server whose
            // backlog is held back every second, and never decodes, still ends once reads flow.
            let hold = connection.readHold.withLockedValue { $0 }
            if !hold.isHeldBack {
                let quiet = SenderDeadlines.quiet(admittedAt: start, lastProgress: worker.activity.lastProgress(of: id), now: now)
                if quiet > stallLimit { return .stalled(seconds: Double(quiet) / 1e9) }
                let undecoded = SenderDeadlines.quiet(admittedAt: start, lastProgress: worker.activity.lastDecoded(of: id), now: now)
                if undecoded > stallLimit { return .undecodable(seconds: Double(undecoded) / 1e9) }
            }
            if media.withLockedValue({ $0.goodbyeReceived }) { return .ended }
            // No packet for a second: is the server still there? A camera that lost power or rebooted sent no FIN;
            // its old connection answers a request with a reset (or not at all): the session ends now and the next
            // one starts as soon as the camera answers, instead of after idle_timeout. Not while held back: a
            // request would make the connection read on to its answer, behind the media the server queued.
            let lastPacket = media.withLockedValue { $0.receiver.statistics.lastArrival } ?? start
            if let heard = hold.silentSince(lastPacket), now > heard + 1_000_000_000 && now >= nextProbe {
                nextProbe = now + 2_000_000_000
                try await keepAlive(timeout: .seconds(2))
                nextKeepAlive = now + keepAliveInterval
            }
            // Receiver reports, and keyframe requests asked again while the decoder waits for one.
            // The clock read again: the decode thread may have polled while a keep-alive was awaited.
            if let rtcpSender {
                Self.send(media.withLockedValue { $0.receiver.poll(now: MonotonicClock.nanoseconds()) }, with: rtcpSender, metrics: worker.metrics)
            }
            if now >= nextKeepAlive && !hold.isHeldBack {
                nextKeepAlive = now + keepAliveInterval
                try await keepAlive(timeout: RTSPConnection.answerTimeout)
            }
            try? await Task.sleep(nanoseconds: 50_000_000)
        }
    }

    /// Connects, asks OPTIONS and DESCRIBE, and follows redirects (301, 302, 303, 307: at most `maximumRedirects`,
    /// rtsp:// only, the credentials kept only for the same host and port). Nil when stopped meanwhile.
    private func describe(stopRequested: () -> Bool) async throws(RTSPFailure) -> (RTSPResponse?, redirects: Int) {
        var redirects = 0
        while true {
            let connection = try await RTSPConnection.connect(host: target.host, port: target.port, group: context.group)
            self.connection = connection
            current.withLockedValue { $0 = connection }
            if stopRequested() { return (nil, redirects) }
            do {
                let options = try await request("OPTIONS", url: target.url)
                supportsGetParameter = options.header("Public")?.uppercased().contains("GET_PARAMETER") ?? false
                if stopRequested() { return (nil, redirects) }
                return (try await request("DESCRIBE", url: target.url, headers: [("Accept", "application/sdp")]), redirects)
            } catch .redirected(let location) {
                redirects += 1
                guard redirects <= Self.maximumRedirects else {
                    throw .redirectRefused("more than \(Self.maximumRedirects) redirects")
                }
                target = try Self.redirectTarget(location, from: target, configured: source)
                connection.close()
                (cseq, challenge, nonceCount) = (0, nil, 0)
                context.logger.debug("RTSP \(source.displayURL) redirects to \(target.displayURL)")
            }
        }
    }

    /// Where a Location header sends the session: an rtsp:// URL, without the credentials it may carry (the
    /// server's are never taken), with the configured ones only when host and port are the configured ones.
    static func redirectTarget(_ location: String, from current: RTSPSource, configured: RTSPSource) throws(RTSPFailure) -> RTSPSource {
        let trimmed = location.trimmingCharacters(in: " \t")
        guard trimmed.lowercased().hasPrefix("rtsp://") else {
            // Only the scheme is named (letters, as schemes are), never the rest: a Location may carry a token.
            let scheme = trimmed.prefix { $0 != ":" }
            guard trimmed.contains(":"), !scheme.isEmpty, scheme.count <= 16, scheme.allSatisfy({ $0.isASCII && $0.isLetter }) else {
                throw .redirectRefused("a redirect to a relative or malformed Location is not followed; only absolute rtsp:// URLs are")
            }
            throw .redirectRefused("a redirect to another scheme (\(scheme)) is not followed; only rtsp:// is")
        }
        guard case .success(var next) = RTSPSource.parse("rtsp://" + trimmed.dropFirst("rtsp://".count)) else {
            throw .redirectRefused("the redirect's Location is not a usable rtsp:// URL")
        }
        let sameServer = next.host.lowercased() == configured.host.lowercased() && next.port == configured.port
        next.user = sameServer ? configured.user : nil
        next.password = sameServer ? configured.password : nil
        next.transport = configured.transport
        next.authentication = configured.authentication
        return next
    }
}

extension RTSPSession {
    /// The RTP receiver's RTCP to the server, keyframe requests counted.
    static func send(_ feedback: [RTPReceiver.Feedback], with send: @Sendable ([UInt8]) -> Void, metrics: StreamMetrics) {
        for item in feedback {
            if case .keyframeRequest = item { metrics.keyframeRequests.increment() }
            send(item.packet)
        }
    }
}
