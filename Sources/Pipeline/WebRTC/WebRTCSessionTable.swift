import Bitstream
import CoreMetrics
import Decoding
import SharedFrames
import Logging
import MediaSecurity
import NIOCore
import NIOHTTP1

/// A stream that takes WebRTC, as the server sees it.
struct WebRTCRoute: Sendable {
    let configuration: StreamConfiguration
    let settings: WebRTCSettings
    let worker: StreamWorker
    let activity: SenderActivity
    let metrics: StreamMetrics
}

/// Every WHIP session of the daemon and the streams they feed; confined to the WebRTC server's event loop. Offers
/// come from the HTTP side, datagrams from the media socket, ticks from a timer; all three end here.
final class WebRTCSessionTable {
    /// An answered session that has not been nominated by a check within this is dropped.
    static let connectivityTimeout: UInt64 = 10_000_000_000
    /// A nominated session whose DTLS handshake has not finished within this is dropped.
    static let handshakeTimeout: UInt64 = 10_000_000_000
    /// RFC 7675 §5.1: consent lapses 30 s after the last authenticated check.
    static let consentLifetime: UInt64 = 30_000_000_000

    let configuration: WebRTCServerConfiguration
    /// The certificate offers are answered with, renewed before it expires (DTLSIdentityRenewal).
    private(set) var identity: DTLSIdentity
    private var identityRenewal = DTLSIdentityRenewal()
    let metrics: WebRTCMetrics
    /// Refusals and drops, said at most once per 10 s each (also from WebRTCSessionTable+Screening.swift).
    var log: RateLimitedLogger
    private(set) var routes: [String: WebRTCRoute] = [:]
    private(set) var sessions: [String: WebRTCSession] = [:]
    private(set) var byUsername: [String: String] = [:]
    private(set) var byAddress: [SocketAddress: String] = [:]
    /// Each stream's session (one at a time, by its `second_sender` policy): the slot's sender is its id.
    private var slots: [String: SenderSlot<String>] = [:]
    /// What the inputs asked for since the driver last took it (`takeOutputs`), in order; and whose deadlines they may
    /// have brought forward (`takeNextDeadline`).
    var outbox: [Output] = []
    var touched = Touched.none

    /// Each stream's source status as the ring and STATUS= show it (nil: the stream detached); from the loop.
    private let reportStatus: @Sendable (String, String?) -> Void

    init(configuration: WebRTCServerConfiguration, identity: DTLSIdentity, metrics: WebRTCMetrics, logger: Logger,
         reportStatus: @escaping @Sendable (String, String?) -> Void = { _, _ in }) {
        self.configuration = configuration
        self.reportStatus = reportStatus
        self.identity = identity
        self.metrics = metrics
        log = RateLimitedLogger(logger: logger)
    }

    var sessionCount: Int { sessions.count }

    /// Refusals of WHIP requests, at most one line per kind per 10 s.
    func logRefusal(key: String, now: UInt64, _ message: String) { log.log(.warning, key: key, now: now, message) }

    // MARK: - Streams

    func attach(_ route: WebRTCRoute, now: UInt64) {
        let name = route.configuration.name
        // A session fed the route this one replaces (its decode thread): it does not carry over.
        if let id = current(of: name) { end(id, .streamStopped, "the stream restarted", now: now) }
        routes[name] = route
        slots[name] = SenderSlot(policy: route.configuration.admissionPolicy, activity: route.activity)
        setStatus(route, "WebRTC: waiting for a WHIP client at \(configuration.url(of: route.configuration.name))")
    }

    /// The stream stops (reload, shutdown): its session ends.
    func detach(stream: String, now: UInt64) {
        if let id = current(of: stream) { end(id, .streamStopped, "the stream stopped", now: now) }
        routes[stream] = nil
        slots[stream] = nil
        reportStatus(stream, nil)
    }

    /// The id of the stream's session now.
    func current(of stream: String) -> String? { slots[stream]?.occupant?.sender }

    /// The stream's source status, in its ring (`streamrecvctl status`) and for the daemon's STATUS= line.
    private func setStatus(_ route: WebRTCRoute, _ text: String) {
        route.worker.enqueue(.sourceStatus(text))
        reportStatus(route.configuration.name, text)
    }

    // MARK: - Offers (WHIP POST) and DELETE

    enum OfferOutcome {
        case created(id: String, answer: String)
        case refused(WebRTCMetrics.Refusal, status: HTTPResponseStatus, message: String)
    }

    func offer(stream name: String, sdp text: String, from remote: SocketAddress?, now: UInt64) -> OfferOutcome {
        guard let route = routes[name] else { return .refused(.unknownStream, status: .notFound, message: "no WebRTC stream named '\(name)'") }
        guard route.configuration.allow.allows(remote) else {
            return .refused(.notAllowed, status: .forbidden, message: "this address is not in the stream's allow list")
        }
        // An offer that takes over its stream's session frees that session's place: with the table full, a client
        // back after a crash (its old session stale) is let in, not refused for its own leftover.
        let replacesOne = if case .takeOver? = slots[name]?.decision(now: now, from: remote?.ipAddress) { true } else { false }
        guard sessions.count < configuration.maximumSessions || replacesOne else {
            return .refused(.full, status: .serviceUnavailable, message: "\(configuration.maximumSessions) WebRTC sessions are open (max_sessions)")
        }
        let offer: WebRTCOffer
        do {
            offer = try WebRTCOffer.parse(text)
        } catch {
            return .refused(.badOffer, status: .badRequest, message: "the offer is not a usable SDP offer: \(error)")
        }
        let credentials = (ufrag: Self.randomText(8), password: Self.randomText(24))
        let local = WebRTCAnswer.LocalParameters(
            iceUsernameFragment: credentials.ufrag, icePassword: credentials.password,
            fingerprintSHA256: identity.fingerprintSHA256,
            candidates: candidateAddresses().map { ($0, UInt16(configuration.media.port)) },
            sessionID: UInt64.random(in: 1...UInt64(Int64.max)))
        let codecs: Set<VideoCodec> = route.configuration.codec.map { [$0] } ?? [.h264, .h265]
        let answer: (sdp: String, media: WebRTCAnswer.NegotiatedVideo)
        do {
            answer = try WebRTCAnswer.make(for: offer, local: local, codecs: codecs, feedback: route.settings.feedback,
                                           maximumBitrate: route.settings.maximumBitrate, startBitrate: route.settings.startBitrate)
        } catch {
            return .refused(.noCodec, status: .unsupportedMediaType, message: "\(error)")
        }
        let id = Self.randomText(22)
        let connection: ConnectionID
        switch admit(id, stream: name, from: remote?.ipAddress, now: now) {
        case .success(let seated): connection = seated
        case .failure(let refusal): return refusal.outcome
        }
        let session = WebRTCSession(id: id, stream: name, connection: connection, local: credentials, offer: offer,
                                    media: answer.media, identity: identity, maximumBitrate: route.settings.maximumBitrate, now: now,
                                    rtp: route.settings.rtp, replyAddresses: configuration.mediaIsWildcard ? ReplyAddress.machineAddresses() : nil)
        sessions[id] = session
        touch(id)
        byUsername[session.expectedUsername] = id
        metrics.sessionsStarted.increment()
        metrics.sessionsOpen.record(sessions.count)
        log.logger.info("WebRTC session \(id) offered for stream \(name) (\(answer.media.codec), payload type \(answer.media.payloadType), \(answer.media.bandwidthFeedback)\(Self.simulcastNote(answer.media))) from \(remote?.description ?? "unknown")")
        return .created(id: id, answer: answer.sdp)
    }

    private struct Refusal: Error {
        let outcome: OfferOutcome
    }

    /// Session `id` takes the stream's slot, by its `second_sender` policy against the current session (one that
    /// has delivered no video for the hold time is taken over whatever the policy): the connection id it sends as.
    /// A session taken over ends first, so that the decode thread hears of it before the new one.
    private func admit(_ id: String, stream name: String, from origin: String?, now: UInt64) -> Result<ConnectionID, Refusal> {
        guard let route = routes[name], let slot = slots[name] else {
            return .failure(Refusal(outcome: .refused(.unknownStream, status: .notFound, message: "no WebRTC stream named '\(name)'")))
        }
        if let current = slot.occupant {
            switch slot.decision(now: now, from: origin) {
            case .refuse:
                route.metrics.refused(.secondSender)
                return .failure(Refusal(outcome: .refused(.secondSender, status: .conflict, message: "the stream has a WebRTC session that is connecting or delivering video (second_sender = refuse); try again once it ends or goes quiet")))
            case .takeOver(let staleFor):
                route.metrics.takeover(staleFor == nil ? .policy : .stale)
                end(current.sender, .takenOver, "a new session takes over", now: now)
            case .admit:
                break
            }
        }
        // Empty now, or the policy admits beside nothing: a refusal here would be a session that did not end.
        guard case .admitted(let connection, _, _)? = slots[name]?.admit(id, from: origin, now: now) else {
            return .failure(Refusal(outcome: .refused(.secondSender, status: .conflict, message: "the stream's session did not give way")))
        }
        return .success(connection)
    }

    /// DELETE of a session's URL: true when it existed for that stream.
    func delete(stream: String, session id: String, now: UInt64) -> Bool {
        guard let session = sessions[id], session.stream == stream else { return false }
        end(id, .deleted, "the client ended the session (DELETE)", now: now)
        return true
    }

    // MARK: - Datagrams

    /// A datagram from `source` to `local` (the address it came to where the socket has several; nil otherwise).
    func receive(_ datagram: [UInt8], from source: SocketAddress, to local: SocketAddress? = nil, now: UInt64) {
        // The session at the source after it (a check may just have fixed its address) is the one it may have moved.
        defer { if let id = byAddress[source] { touch(id) } }
        switch MultiplexedPacketKind.classify(datagram) {
        case .stun:
            receiveSTUN(datagram, from: source, to: local, now: now)
        case .dtls:
            guard let session = session(at: source) else { return reject(source, "DTLS from an address with no session", now: now) }
            // Not authenticated before the handshake ends: moves replies only where no check did yet.
            heard(session, at: local, nominating: false)
            handle(session.receiveDTLS(datagram) { transmit($0, to: source, from: session.local) }, of: session, now: now)
        case .rtp:
            let received = session(at: source).map { ($0, $0.receiveSRTP(datagram, now: now)) }
            guard let (session, outcome) = received, case .video(let events) = outcome else {
                switch received?.1 {
                case .nothing?: return
                case .audio?: return metrics.audioPacketsDropped.increment()
                default: return rejectSRTP(source, now: now)
                }
            }
            heard(session, at: local, nominating: false)
            metrics.bytesReceived.increment(by: Int64(datagram.count))
            if let change = session.takeSourceChange() {
                metrics.ssrcChanges.increment()
                log.log(.warning, key: "ssrc-change", now: now,
                        "WebRTC session \(session.id): the sender changed SSRC from \(change.from) to \(change.to) (an encoder restart?): followed, keyframe asked for")
            }
            deliver(events, bytes: datagram.count, of: session, now: now)
            // A gap is asked for at once, not at the next tick: a keyframe's burst moves the reorder window fast.
            sendFeedback(of: session, to: source, now: now)
        case .rtcp:
            guard let session = session(at: source), session.receiveSRTCP(datagram, now: now) else {
                metrics.srtpRejected.increment()
                return
            }
            heard(session, at: local, nominating: false)
        case .unknown:
            reject(source, "a datagram that is neither STUN, DTLS nor SRTP", now: now)
        }
    }

    private func session(at source: SocketAddress) -> WebRTCSession? { byAddress[source].flatMap { sessions[$0] } }

    private func receiveSTUN(_ datagram: [UInt8], from source: SocketAddress, to local: SocketAddress?, now: UInt64) {
        guard let message = try? STUNMessage.parse(datagram) else { return reject(source, "a malformed STUN message", now: now) }
        // Binding indications are keepalives (RFC 8445 §11): nothing to answer.
        if message.messageClass == .indication, session(at: source) != nil { return }
        guard message.method == STUNMessage.binding, message.messageClass == .request,
              let username = message.username, let id = byUsername[username], let session = sessions[id] else {
            return reject(source, "STUN with no session's username", now: now)
        }
        guard let response = session.answerConnectivityCheck(message, bytes: datagram, from: source, now: now) else {
            return reject(source, "STUN check failing MESSAGE-INTEGRITY, or from a second address", now: now)
        }
        if byAddress[source] == nil, session.remote == source {
            byAddress[source] = id
            _ = session.heard(at: local, nominating: false, check: message.transactionID)
            outbox.append(.peerJoined(source, at: session.local))
        } else {
            heard(session, at: local, nominating: message.value(of: STUNAttribute.useCandidate) != nil, check: message.transactionID)
        }
        // From the address the check came to, whichever pair it was: the client matches responses by it.
        transmit(response, to: source, from: local)
    }

    /// A session's datagram came to `local`: where its replies now leave from, and its own socket with them.
    private func heard(_ session: WebRTCSession, at local: SocketAddress?, nominating: Bool, check: [UInt8]? = nil) {
        guard session.heard(at: local, nominating: nominating, check: check), let remote = session.remote, byAddress[remote] == session.id else { return }
        outbox.append(.peerJoined(remote, at: session.local))
    }

    /// What the session's receiver put in order, to the decode thread; its packets are dropped while the decode
    /// thread is behind (a gap it sees), never a source change.
    private func deliver(_ events: [RTPOrderedEvent], bytes: Int, of session: WebRTCSession, now: UInt64) {
        guard current(of: session.stream) == session.id, let route = routes[session.stream] else { return }
        let worker = route.worker
        guard worker.acceptsMoreBytes else {
            route.metrics.datagramsLost.increment()
            // One item for a run of losses with nothing queued between them: a run is one gap. A source change still
            // goes (the decode thread must start afresh); a packet validation discarded is counted here.
            if !session.lossQueued { worker.enqueue(.datagramsLost(session.connection)) }
            session.lossQueued = true
            for case .discarded(let reason) in events { route.metrics.rtpDiscarded(reason) }
            let changes = events.filter { if case .sourceChanged = $0 { true } else { false } }
            if !changes.isEmpty {
                _ = worker.enqueue(changes, bytes: 0, receivedAt: now, connection: session.connection)
                session.lossQueued = false
            }
            return
        }
        session.lossQueued = false
        _ = worker.enqueue(events, bytes: bytes, receivedAt: now, connection: session.connection)
    }

    /// What a session's datagram led to.
    private func handle(_ outcome: WebRTCSession.Outcome, of session: WebRTCSession, now: UInt64) {
        switch outcome {
        case .none:
            break
        case .connected:
            guard let route = routes[session.stream], current(of: session.stream) == session.id else { return }
            let worker = route.worker
            worker.enqueue(.connected(session.connection, remote: session.remote?.description ?? "unknown"))
            worker.enqueue(.rtpSession(session.connection, RTPSessionMedia(
                codec: session.media.codec, payloadType: session.media.payloadType, clockRate: session.media.clockRate, parameterSets: [])))
            let remote = session.remote?.description ?? "unknown"
            let audio = session.media.acceptedAudio.map { ", its audio (\($0.name)) taken and dropped" } ?? ""
            log.logger.info("WebRTC session \(session.id) connected for stream \(session.stream) from \(remote)\(audio)")
            // Short: the ring's status holds 128 bytes (an IPv6 address and port take 47 of them).
            let address = session.remote.flatMap { remote in remote.ipAddress.map { "\($0):\(remote.port ?? 0)" } } ?? "unknown"
            setStatus(route, "WebRTC: connected from \(address) (\(session.media.codec), PT \(session.media.payloadType), \(session.media.bandwidthFeedback)\(Self.simulcastNote(session.media, short: true)))")
        case .ended(let reason, let detail):
            end(session.id, reason, detail, now: now)
        }
    }

    /// A new DTLS certificate for offers from now on; sessions keep theirs.
    private func renewIdentity(now: UInt64) {
        do {
            identity = try DTLSIdentity.generate()
            identityRenewal.renewed(now: now)
            log.logger.notice("WebRTC: DTLS certificate renewed before it expires (sha-256 \(identity.fingerprintText)); sessions keep theirs")
        } catch {
            identityRenewal.failed(now: now)
            log.logger.error("WebRTC: DTLS certificate not renewed, tried again in an hour: \(error)")
        }
    }

    /// Ends a session: the decode thread hears its sender is gone, its address and username are forgotten.
    func end(_ id: String, _ reason: WebRTCMetrics.SessionEnd, _ detail: String, now: UInt64) {
        guard let session = sessions.removeValue(forKey: id) else { return }
        byUsername[session.expectedUsername] = nil
        if let remote = session.remote, byAddress[remote] == id {
            byAddress[remote] = nil
            outbox.append(.peerLeft(remote))
        }
        if slots[session.stream]?.release(session.connection, now: now) != nil {
            if let route = routes[session.stream] {
                if session.hasConnected {
                    // The decode thread's "sender disconnected" line says why: a stream that stops (a reload removed
                    // or changed it) closed it, as a datagram listener's stream does, not the sender.
                    let disconnect: DisconnectReason = switch reason {
                    case .takenOver: .takenOver
                    case .streamStopped: .listenerClosed
                    default: .closedBySender
                    }
                    // What the reorder window still holds goes first: the sender's last packets, better late than never.
                    let held = session.takeHeldPackets()
                    if !held.isEmpty { _ = route.worker.enqueue(held, bytes: 0, receivedAt: now, connection: session.connection) }
                    route.worker.enqueue(.disconnected(session.connection, reason: disconnect))
                }
                setStatus(route, "WebRTC: waiting for a WHIP client (the last session ended: \(reason.rawValue))")
            }
        }
        if case .ended = session.state {} else {
            // The client is told, unless it is the one that ended it or the association is what failed.
            if let remote = session.remote, ![.closedByClient, .dtlsFailed, .fingerprintMismatch].contains(reason) {
                for datagram in session.closeAssociation() { transmit(datagram, to: remote, from: session.local) }
            }
            _ = session.end(reason, detail)
        }
        metrics.ended(reason)
        metrics.sessionsOpen.record(sessions.count)
        log.log(reason == .deleted ? .info : .warning, key: "end-\(reason.rawValue)", now: now,
                "WebRTC session \(id) of stream \(session.stream) ended: \(detail)")
    }

    // MARK: - Timers (the feedback itself: WebRTCSessionTable+Feedback.swift)

    /// At `nextDeadline`, and once a second: DTLS retransmissions and each session's RTCP due (NACKs, keyframe
    /// requests, reports with REMB, transport-wide feedback), expiry, the certificate's renewal.
    func tick(now: UInt64) {
        touched = .all
        for session in sessions.values {
            guard let remote = session.remote else { continue }
            session.handleTimers { transmit($0, to: remote, from: session.local) }
            sendFeedback(of: session, to: remote, now: now)
        }
        if identityRenewal.isDue(now: now) { renewIdentity(now: now) }
        for session in Array(sessions.values) {
            metrics.retransmissionsRecovered.increment(by: Int64(session.recoveredSinceLastReport()))
            if let reason = expiry(of: session, now: now) { end(session.id, reason.0, reason.1, now: now) }
        }
    }
}
