import Bitstream

extension RTPReceiver.Configuration {
    /// A receiver that asks for keyframes as the stream's `keyframe_request` and `keyframe_request_interval` say.
    init(keyframes rtp: RTPSettings) {
        self.init()
        keyframeRequest = switch rtp.keyframeRequest {
        case .none: nil
        case .pli: .pictureLossIndication
        case .fir: .fullIntraRequest
        }
        keyframeRequestInterval = UInt64(rtp.keyframeRequestInterval * 1e9)
    }
}

extension RTPReceiver {
    /// What the decode thread said of keyframes.
    mutating func apply(_ signal: KeyframeWish.Signal) {
        switch signal {
        case .wanted(let source): keyframeWanted(of: source)
        case .arrived: keyframeArrived()
        case .dropped: keyframeNoLongerWanted()
        }
    }
}
