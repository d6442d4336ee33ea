import Bitstream

extension RTPReceiver.Configuration {
    /// A receiver that orders packets in the stream's `rtp_reorder_window` and asks for keyframes as its
    /// `keyframe_request` and `keyframe_request_interval` say.
    init(_ rtp: RTPSettings) {
        self.init()
        reorderWindow = rtp.reorderWindow
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
