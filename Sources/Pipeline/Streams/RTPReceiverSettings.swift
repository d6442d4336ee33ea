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
    /// `receive`, with what it put in order collected: one `.rtp` work item's worth for the decode thread.
    mutating func receiveInOrder(_ packet: RTPPacket, now: UInt64) -> (reception: Reception, events: [RTPOrderedEvent]) {
        var events: [RTPOrderedEvent] = []
        let reception = receive(packet, now: now) { events.append($0) }
        return (reception, events)
    }

    /// `flush`, collected: what the reorder window and probation still hold, in order (the sender is gone).
    mutating func takeHeld() -> [RTPOrderedEvent] {
        var events: [RTPOrderedEvent] = []
        flush { events.append($0) }
        return events
    }

    /// What the decode thread said of keyframes.
    mutating func apply(_ signal: KeyframeWish.Signal) {
        switch signal {
        case .wanted(let source): keyframeWanted(of: source)
        case .arrived: keyframeArrived()
        case .dropped: keyframeNoLongerWanted()
        }
    }
}
