/// Whom a decode thread takes input from: no one yet, a sender (its connection, what it has sent), or no one since a
/// sender left (the decoder lingers `decoder_linger`, then is let go). One value, so that a sender that left cannot
/// also be the one connected.
enum SenderPhase {
    case none
    case connected(SenderConnection)
    /// The last sender left at this time, and the decoder is still open.
    case gone(since: UInt64)

    /// The connected sender's id, whose work items are taken (others are stale, and dropped).
    var connection: ConnectionID? { if case .connected(let sender) = self { sender.id } else { nil } }

    /// The connected sender sent `bytes` more.
    mutating func received(bytes: Int) {
        guard case .connected(var sender) = self else { return }
        sender.bytes += Int64(bytes)
        self = .connected(sender)
    }

    /// Whether the connected sender's progress is due to be told to its listener at `now` (at most every 50 ms);
    /// its id when it is, and the time noted.
    mutating func progressDue(now: UInt64) -> ConnectionID? {
        guard case .connected(var sender) = self, now &- sender.lastProgressReport >= 50_000_000 else { return nil }
        sender.lastProgressReport = now
        self = .connected(sender)
        return sender.id
    }
}

/// The sender a decode thread takes input from.
struct SenderConnection {
    let id: ConnectionID
    /// Bytes it sent (for the line that says it left).
    var bytes: Int64 = 0
    /// When its progress was last told to its listener (`SenderActivity.progressed`).
    var lastProgressReport: UInt64 = 0
}
