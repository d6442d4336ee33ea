import Bitstream

/// What answers to offers are made of: the host candidates, the log's and the status's note on simulcast, and
/// the random credentials.
extension WebRTCSessionTable {
    /// The addresses answers name: `announce`, else the interfaces' where `media` is a wildcard, else `media`'s.
    func candidateAddresses() -> [String] {
        guard configuration.announce.isEmpty, configuration.mediaIsWildcard else { return configuration.candidateAddresses }
        return HostCandidates.select(from: HostCandidates.interfaceAddresses(), ipv6Socket: configuration.media.host.contains(":"),
                                     limit: WebRTCAnswer.maximumCandidates)
    }

    /// ", simulcast offered (h, m, l): its first stream, h, taken" where the offer had simulcast (answered without
    /// it, as RFC 8853 §5.3 allows: the sender then sends one stream, its first); `short` (the ring's status holds
    /// 128 bytes): ", simulcast: h of 3". Rids are tokens, at most 16 of 32 bytes.
    static func simulcastNote(_ media: WebRTCAnswer.NegotiatedVideo, short: Bool = false) -> String {
        guard let first = media.declinedSimulcast.first else { return "" }
        if short { return ", simulcast: \(first.prefix(8)) of \(media.declinedSimulcast.count)" }
        return ", simulcast offered (\(media.declinedSimulcast.joined(separator: ", "))): its first stream, \(first), taken"
    }

    /// Letters and digits from the system's secure generator (ICE credentials, session IDs: RFC 8445 §5.3 asks
    /// for at least 24 bits of randomness in the fragment and 128 in the password).
    static func randomText(_ count: Int) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        var generator = SystemRandomNumberGenerator()
        return String((0..<count).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] })
    }
}
