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
