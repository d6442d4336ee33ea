import Bitstream
import CoreMetrics
import Decoding
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SharedFrames

/// The session's media: SETUP over interleaved TCP or UDP, which packets are the server's (`RTSPMediaGate`), and
/// where they go.
extension RTSPSession {
    /// SETUP; returns how the media travels ("interleaved TCP", "UDP"). A server that answers 461 (Unsupported
    /// Transport) to interleaved TCP (VLC 3.0 does) is asked for UDP instead, in this session and the next ones.
    /// A server whose UDP media cannot be verified (no `server_port`, no `ssrc=`) is asked for interleaved TCP.
    func setUp(mediaURL: String, on connection: RTSPConnection) async throws(RTSPFailure) -> String {
        let unverifiable = memory.withLockedValue { $0.udpMediaUnverifiable }
        guard target.transport == .tcp || unverifiable else { return try await setUpUDP(mediaURL: mediaURL, on: connection) }
        if memory.withLockedValue({ $0.interleaving == .refused }) {
            return try await setUpUDP(mediaURL: mediaURL, on: connection) + " (the server refuses interleaved TCP)"
        }
        do {
            try await setUpInterleaved(mediaURL: mediaURL, on: connection)
            return unverifiable ? "interleaved TCP (the server's UDP media cannot be told from another process's)" : "interleaved TCP"
        } catch .refused(method: "SETUP", status: 461, _) {
            memory.withLockedValue { $0.interleaving = .refused }
            context.logger.warning("""
                RTSP \(source.displayURL): the server refuses interleaved TCP (461 Unsupported Transport); using UDP instead \
                (set rtsp_transport = "udp" to ask for it first)
                """)
            return try await setUpUDP(mediaURL: mediaURL, on: connection) + " (the server refuses interleaved TCP)"
        }
    }

    private func setUpInterleaved(mediaURL: String, on connection: RTSPConnection) async throws(RTSPFailure) {
        let setup = try await request("SETUP", url: mediaURL, headers: [("Transport", "RTP/AVP/TCP;unicast;interleaved=0-1")])
        try takeSession(from: setup)
        let text = setup.header("Transport") ?? ""
        let transport = RTSPTransportHeader(parsing: text)
        guard transport.isInterleaved else {
            throw .protocolError("the server did not accept interleaved TCP (Transport: \(text.prefix(100))); try rtsp_transport = \"udp\"")
        }
        let channels = transport.interleaved ?? RTSPTransportHeader.Pair(first: 0, second: 1)
        media.withLockedValue { $0.gate = RTSPMediaGate(serverPorts: nil, interleaved: true, ssrc: transport.ssrc) }
        rtcpSender = { [connection] bytes in connection.writeInterleaved(channel: UInt8(truncatingIfNeeded: channels.second), bytes) }
        routeInterleaved(rtpChannel: UInt8(truncatingIfNeeded: channels.first), rtcpChannel: UInt8(truncatingIfNeeded: channels.second),
                         on: connection)
    }

    private func setUpUDP(mediaURL: String, on connection: RTSPConnection) async throws(RTSPFailure) -> String {
        guard let server = connection.channel.remoteAddress else { throw .closed }
        media.withLockedValue { $0.server = server }
        let pair = try await bindPortPair(near: connection.channel)
        udp = pair
        let port = pair.rtp.localAddress?.port ?? 0
        let setup = try await request("SETUP", url: mediaURL, headers: [("Transport", "RTP/AVP;unicast;client_port=\(port)-\(port + 1)")])
        try takeSession(from: setup)
        let transport = RTSPTransportHeader(parsing: setup.header("Transport") ?? "")
        // source= may name another host: media from it would be anyone's, and our RTCP would go wherever the server
        // aims it. Only the RTSP server's own address is used.
        if let named = transport.source, named != server.ipAddress {
            context.logger.warning("""
                RTSP \(source.displayURL): the server names another media source (source=\(named.prefix(64))); ignored: \
                RTP is taken from and RTCP sent to the RTSP server's address only
                """)
        }
        // Neither ports nor SSRC named: the first datagram on our port pair would decide whose video this is, and
        // any local user can read that pair from /proc/net/udp. Unless interleaved TCP is refused too, this session
        // ends and the next asks for interleaved TCP.
        if transport.serverPorts == nil && transport.ssrc == nil && memory.withLockedValue({ $0.interleaving != .refused }) {
            memory.withLockedValue { $0.udpMediaUnverifiable = true }
            context.logger.warning("""
                RTSP \(source.displayURL): the server's SETUP answer names neither server_port nor ssrc, so its UDP media \
                could not be told from another local process's; asking for interleaved TCP instead
                """)
            throw .protocolError("the server names neither server_port nor ssrc for UDP; asking for interleaved TCP next")
        }
        media.withLockedValue {
            $0.gate = RTSPMediaGate(serverPorts: transport.serverPorts.map { ($0.first, $0.second) }, ssrc: transport.ssrc)
        }
        // To the server's RTCP port once known (named by SETUP, or after its first RTP packet), on its address.
        rtcpSender = { [rtcp = pair.rtcp, server, media] bytes in
            guard let port = media.withLockedValue({ $0.gate?.rtcpPort }) else { return }
            var destination = server
            destination.port = port
            rtcp.writeAndFlush(AddressedEnvelope(remoteAddress: destination, data: rtcp.allocator.buffer(bytes: bytes)), promise: nil)
        }
        return "UDP"
    }

    /// Interleaved RTP straight to the decode thread, on the event loop; RTCP sender reports to the statistics.
    private func routeInterleaved(rtpChannel: UInt8, rtcpChannel: UInt8, on connection: RTSPConnection) {
        let deliver = Self.deliverer(worker: worker, media: media, id: id, pushedBack: true)
        let (note, media, refuse) = (rtcpReceiver, self.media, refusalReporter)
        let (lost, worker, id) = (context.metrics.datagramsLost, self.worker, self.id)
        connection.channel.eventLoop.execute {
            connection.handler.value.interleaved = { channel, payload in
                if channel == rtpChannel {
                    let verdict = payload.withUnsafeBytes { bytes in media.withLockedValue { $0.gate?.admitRTP(bytes, fromPort: nil) } }
                    // TCP is not to lose data: over the high-water mark the connection pauses its reads, so
                    // that a server sending faster than we decode is held back, and what was already read is still
                    // queued (dropped, the sequence gap reporting the loss, only 16 MiB past the mark:
                    // `acceptsBytesAlreadyRead`).
                    let accepted = verdict?.isAccepted ?? false
                    let delivery = accepted ? payload.withUnsafeBytes(deliver) : nil
                    let now = MonotonicClock.nanoseconds()
                    let decoding = worker.activity.lastDecoded(of: id).map { now &- $0 < 1_000_000_000 } ?? false
                    connection.handler.value.noteRTP(accepted: accepted, productive: delivery == .queued && decoding, bytes: payload.count)
                    if verdict != .accepted { refuse(verdict, "the RTSP connection") }
                    guard accepted else { return }
                    if delivery == .decoderBehind { lost.increment() }
                    // A session that has ended holds nothing back: its connection is going.
                    if !worker.acceptsMoreBytes && delivery != .sessionEnded { connection.pauseReading(until: worker) }
                }
                if channel == rtcpChannel { payload.withUnsafeBytes { note(RTPReceptionStatistics.news(in: $0)) } }
            }
        }
    }

    /// Counts and logs (at most once per 10 s per kind) a packet the gate refused; says once that the server's SSRC
    /// is not the one its SETUP answer named.
    var refusalReporter: @Sendable (RTSPMediaGate.Verdict?, String) -> Void {
        { [media, metrics = context.metrics] verdict, from in
            let now = MonotonicClock.nanoseconds()
            switch verdict {
            case .accepted:
                return
            case .acceptedOtherThanNamed(let named):
                let text = "RTP from \(from) carries another SSRC than the \(String(named, radix: 16)) SETUP named; taken (it comes from the server)"
                media.withLockedValue { $0.refusals.log(.info, key: "named", now: now, text) }
            case .malformed:
                metrics.datagramsLost.increment()
            case .foreignPort(let port):
                metrics.refused(.notAllowed)
                media.withLockedValue { $0.refusals.log(.warning, key: "port", now: now, "RTP from \(from) port \(port), not the server's RTP port, ignored") }
            case .foreignSource(let ssrc):
                metrics.refused(.notAllowed)
                media.withLockedValue {
                    $0.refusals.log(.warning, key: "ssrc", now: now, "RTP from \(from) with SSRC \(String(ssrc, radix: 16)), not the session's, ignored")
                }
            case nil:
                metrics.refused(.notAllowed)
                media.withLockedValue { $0.refusals.log(.warning, key: "early", now: now, "RTP from \(from) before SETUP's answer, ignored") }
            }
        }
    }

    /// What the server's RTCP says, when its own source says it: sender reports go to the statistics (for the RR's
    /// delay fields), BYE ends the session. Anyone else's are ignored (and counted).
    var rtcpReceiver: @Sendable (RTPReceptionStatistics.SenderNews) -> Void {
        { [media, metrics = context.metrics] news in
            let now = MonotonicClock.nanoseconds()
            media.withLockedValue { state in
                guard !state.note(news, arrival: now) else { return }
                metrics.refused(.notAllowed)
                state.refusals.log(.warning, key: "bye", now: now, "RTCP BYE for another source than the session's, ignored")
            }
        }
    }

    /// What became of an RTP packet the gate let through.
    enum Delivery {
        case queued
        /// Dropped while the decode thread is behind (UDP; interleaved only 16 MiB past the high-water mark): the
        /// sequence gap flags the loss.
        case decoderBehind
        /// No RTP packet (counted as discarded, logged at most once per 10 s).
        case malformed
        /// The session has ended (`finish`): nothing goes to the decode thread any more.
        case sessionEnded
    }

    /// One RTP packet, parsed here once, to the session's receiver (`RTSPMediaState`), and what it put in order to
    /// the decode thread. `pushedBack`: the packets come over a connection that pauses its reads while the decode
    /// thread is behind (interleaved TCP), so those already read are queued past the high-water mark.
    static func deliverer(worker: StreamWorker, media: NIOLockedValueBox<RTSPMediaState>, id: ConnectionID, pushedBack: Bool)
        -> @Sendable (UnsafeRawBufferPointer) -> Delivery {
        { datagram in
            guard pushedBack ? worker.acceptsBytesAlreadyRead : worker.acceptsMoreBytes else {
                // A packet of a session that has ended is not a loss of the stream's (the next session's is).
                return media.withLockedValue { $0.ended } ? .sessionEnded : .decoderBehind
            }
            let now = MonotonicClock.nanoseconds()
            let packet: RTPPacket
            do {
                // The payload stays a slice of this copy until the decode thread is done with it.
                packet = try RTPPacket(parsing: [UInt8](datagram)[...])
            } catch {
                worker.metrics.rtpDiscarded(.malformed)
                media.withLockedValue { $0.refusals.log(.warning, key: "malformed", now: now, "RTP from the server that is not well-formed (\(error)) dropped") }
                return .malformed
            }
            // Queued under the lock: what `finish` queues can come neither before nor after it.
            return media.withLockedValue { state in
                guard !state.ended else { return .sessionEnded }
                let events = state.receive(packet, arrival: now)
                _ = worker.enqueue(events, bytes: datagram.count, receivedAt: now, connection: id)  // even past the high-water mark
                return .queued
            }
        }
    }

    /// The session ends: what the receiver still holds goes to the decode thread, then `.disconnected`, under the
    /// media lock, so that no packet of a handler still running (their channels close asynchronously) comes between
    /// or after; their later packets go nowhere.
    static func finish(media: NIOLockedValueBox<RTSPMediaState>, worker: StreamWorker, id: ConnectionID, reason: DisconnectReason) {
        media.withLockedValue { state in
            state.ended = true
            let held = state.takeHeldPackets()
            if !held.isEmpty { _ = worker.enqueue(held, bytes: 0, receivedAt: MonotonicClock.nanoseconds(), connection: id) }
            worker.enqueue(.disconnected(id, reason: reason))
        }
    }
}
