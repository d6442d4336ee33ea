import Bitstream

/// srt://: the MPEG-TS demuxer and what the decode thread keeps between its events: the PTS of the PES packet in
/// progress, extended past the 33-bit wrap (26.5 hours at 90 kHz).
struct TransportStreamIngest {
    var demuxer = TransportStreamDemuxer()
    /// The PES packet in progress's: every access unit that begins in it is dated by it.
    var pts: Int64?
    /// Whether the next payload bytes are the first since a PES header or since the last receive: their arrival is
    /// recorded (once per read and per PES packet, not for each 184-byte TS payload).
    var recordNextArrival = true
    /// Whether the program has named a video stream yet on this connection (a later one is a switch).
    var hasVideoStream = false
    private var lastPTS: Int64?

    /// `pts` extended to 64 bits: the nearest value to the previous one with the same low 33 bits.
    mutating func unwrap(_ pts: Int64) -> Int64 {
        guard let last = lastPTS else {
            lastPTS = pts
            return pts
        }
        let period: Int64 = 1 << 33
        // Wrapping: a hostile program can make the extended value wander by 2^32 a packet, and no PTS may trap.
        var delta = (pts &- last) & (period - 1)
        if delta >= period / 2 { delta -= period }
        lastPTS = last &+ delta
        return last &+ delta
    }
}
