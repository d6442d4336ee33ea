import Bitstream

/// rtp:// with `keyframe_request`: after a loss, RTCP PLI or FIR to the sender, asked again every
/// `keyframe_request_interval` until the stream heals (the request itself may be lost).
struct KeyframeRequester {
    let kind: KeyframeRequest
    /// Nanoseconds between two requests.
    let interval: UInt64
    /// This receiver's SSRC in RTCP feedback.
    let senderSSRC: UInt32
    private var lastRequest: UInt64?
    private var firSequenceNumber: UInt8 = 0

    init(kind: KeyframeRequest, intervalSeconds: Double, senderSSRC: UInt32 = .random(in: 1...UInt32.max)) {
        self.kind = kind
        interval = UInt64(intervalSeconds * 1e9)
        self.senderSSRC = senderSSRC
    }

    /// The RTCP packet to send now for a stream that needs a keyframe from `mediaSSRC`; nil when requests are off
    /// or the last one is more recent than the interval.
    mutating func request(mediaSSRC: UInt32, now: UInt64) -> [UInt8]? {
        guard kind != .none else { return nil }
        if let last = lastRequest, now >= last, now - last < interval { return nil }
        lastRequest = now
        let feedback: RTCPFeedback.Kind
        if kind == .fir {
            firSequenceNumber &+= 1
            feedback = .fullIntraRequest(sequenceNumber: firSequenceNumber)
        } else {
            feedback = .pictureLossIndication
        }
        return RTCPFeedback.keyframeRequest(feedback, senderSSRC: senderSSRC, mediaSSRC: mediaSSRC)
    }

    /// The stream healed: the next loss is asked for at once.
    mutating func healed() { lastRequest = nil }
}
