import NIOCore

// MARK: - Outputs

extension WebRTCSessionTable {
    /// What the table asks of its driver (`WebRTCEndpoint`): it does no I/O of its own.
    enum Output: Equatable {
        /// A datagram to send from the media socket, from `local` where the socket has several addresses (a wildcard
        /// `media`; nil: the socket's own).
        case transmit([UInt8], to: SocketAddress, from: SocketAddress?)
        /// A session's address is known (its first authenticated check, with the local address it came to where the
        /// socket has several): it gets a socket of its own (ConnectedMediaSockets), so that a flood of the shared
        /// port cannot crowd its datagrams out.
        case peerJoined(SocketAddress, at: SocketAddress?)
        /// That address is no session's any more: its socket closes.
        case peerLeft(SocketAddress)
    }

    /// When `tick` next has something to do for a session without a datagram or an offer coming (nil: nothing but
    /// the certificate's renewal, which the once-a-second tick sees to).
    func nextDeadline(now: UInt64) -> UInt64? {
        sessions.values.reduce(nil) { earliest($0, deadline(of: $1, now: now)) }
    }

    func deadline(of session: WebRTCSession, now: UInt64) -> UInt64? {
        let expiry: UInt64? = switch session.state {
        case .awaitingConnectivity: session.createdAt &+ Self.connectivityTimeout &+ 1
        case .handshaking: min(session.createdAt &+ Self.connectivityTimeout &+ Self.handshakeTimeout, session.lastConsent &+ Self.consentLifetime) &+ 1
        case .connected: session.lastConsent &+ Self.consentLifetime &+ 1
        case .ended: nil
        }
        return earliest(expiry, session.nextTimerDeadline(now: now))
    }

    /// Whose deadlines the inputs since the driver last asked may have brought forward: one session's (a datagram, an
    /// offer, a keyframe wish), or any (a tick). Ending a session brings nothing forward.
    enum Touched {
        case none
        case session(String)
        case all
    }

    func touch(_ id: String) {
        switch touched {
        case .none: touched = .session(id)
        case .session(let other) where other == id: break
        case .session, .all: touched = .all
        }
    }

    /// The earliest deadline the inputs since the last call may have set (nil: none earlier than what was known):
    /// per datagram only its session is looked at, not every session's NACKs and timers.
    func takeNextDeadline(now: UInt64) -> UInt64? {
        defer { touched = .none }
        switch touched {
        case .none: return nil
        case .session(let id): return sessions[id].flatMap { deadline(of: $0, now: now) }
        case .all: return nextDeadline(now: now)
        }
    }

    /// What the inputs since the last call asked for, in order.
    func takeOutputs() -> [Output] {
        var outputs: [Output] = []
        swap(&outputs, &outbox)
        return outputs
    }

    func transmit(_ datagram: [UInt8], to remote: SocketAddress, from local: SocketAddress?) {
        outbox.append(.transmit(datagram, to: remote, from: local))
    }
}

/// The earlier of two times, either of which may be absent.
func earliest(_ first: UInt64?, _ second: UInt64?) -> UInt64? {
    guard let first else { return second }
    guard let second else { return first }
    return min(first, second)
}
