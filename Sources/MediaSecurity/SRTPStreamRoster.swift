/// The SSRCs an inbound libsrtp session keeps a stream for, at most `capacity`, the least recently used first.
///
/// Under the wildcard policy libsrtp adds a stream (keys, replay window, rollover counter) for every SSRC that
/// authenticates, never drops one, and finds each packet's stream by walking them all. A sender holding the keys
/// that changed SSRC on every packet made each packet cost more than the last and memory grow without end (a red
/// team measured 83 % of the daemon's CPU in libsrtp's stream search at 2,400 packets a second). A real sender uses
/// a few (video, its RTX, audio); past `capacity`, the stream of the SSRC unused the longest goes.
struct SRTPStreamRoster {
    static let capacity = 16
    private var ssrcs: [UInt32] = []

    init() { ssrcs.reserveCapacity(Self.capacity + 1) }

    /// A packet of `ssrc` authenticated. Returns the SSRC whose stream is to be removed, when the roster was full.
    mutating func use(_ ssrc: UInt32) -> UInt32? {
        if ssrcs.last == ssrc { return nil }
        if let index = ssrcs.firstIndex(of: ssrc) {
            ssrcs.remove(at: index)
            ssrcs.append(ssrc)
            return nil
        }
        ssrcs.append(ssrc)
        return ssrcs.count > Self.capacity ? ssrcs.removeFirst() : nil
    }

    var count: Int { ssrcs.count }
}
