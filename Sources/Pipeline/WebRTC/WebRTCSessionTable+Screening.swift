import Bitstream
import CoreMetrics
import Decoding
import Logging
import NIOCore

/// What the session table drops, and the screening of a datagram before it is copied or parsed.
extension WebRTCSessionTable {
    /// The cheapest rejection, before a datagram is copied or parsed (issue 31, item 4: a flood of strangers' STUN
    /// spoilt the honest session). From an address with no session only a binding request goes on, and only when its
    /// USERNAME starts with a live session's fragment and that session has no address yet or this one: random
    /// usernames, and the live username from a second address, are dropped here without MESSAGE-INTEGRITY's HMAC.
    /// True when dropped (counted and said as `receive` would).
    func screen(_ bytes: UnsafeRawBufferPointer, from source: SocketAddress, now: UInt64) -> Bool {
        guard byAddress[source] == nil else { return false }
        switch bytes.first {
        case .some(0...3):
            guard let fragment = STUNMessage.bindingRequestLocalFragment(bytes) else {
                reject(source, "STUN that is no binding request with an ICE username, from an address with no session", now: now)
                return true
            }
            let owner = byUsername.first { key, _ in
                let local = key.utf8.prefix { $0 != UInt8(ascii: ":") }
                return local.count == fragment.count && local.elementsEqual(bytes[fragment])
            }
            guard let (_, id) = owner, let session = sessions[id] else {
                reject(source, "STUN with no session's username", now: now)
                return true
            }
            guard session.remote == nil else {
                reject(source, "STUN check failing MESSAGE-INTEGRITY, or from a second address", now: now)
                return true
            }
            return false
        case .some(20...63):
            reject(source, "DTLS from an address with no session", now: now)
            return true
        case .some(128...191):
            rejectSRTP(source, now: now)
            return true
        default:
            reject(source, "a datagram that is neither STUN, DTLS nor SRTP", now: now)
            return true
        }
    }

    /// A STUN or DTLS datagram, or one of no protocol of ours, dropped: counted, said once per 10 s per kind.
    func reject(_ source: SocketAddress, _ what: String, now: UInt64) {
        metrics.stunRejected.increment()
        log.log(.warning, key: what, now: now, "WebRTC: \(what) dropped (latest from \(source))")
    }

    /// An SRTP or SRTCP packet with no connected session at its address, failing authentication, or replayed.
    func rejectSRTP(_ source: SocketAddress, now: UInt64) {
        metrics.srtpRejected.increment()
        log.log(.warning, key: "srtp", now: now, "SRTP packet dropped: no connected session at \(source), failed authentication, or replayed")
    }
}
