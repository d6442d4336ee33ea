import Bitstream
@testable import Pipeline
import Testing

/// `keyframe_request`, its interval and `rtp_reorder_window`, as the stream's RTP receiver takes them.
@Suite struct RTPReceiverSettingsTests {
    @Test(arguments: [(KeyframeRequest.none, nil), (.pli, .pictureLossIndication), (.fir, .fullIntraRequest)] as [(KeyframeRequest, RTPReceiver.KeyframeRequest?)])
    func eachKindAsksAsConfigured(kind: KeyframeRequest, expected: RTPReceiver.KeyframeRequest?) {
        var rtp = RTPSettings()
        rtp.keyframeRequest = kind
        rtp.keyframeRequestInterval = 0.25
        rtp.reorderWindow = 5
        let configuration = RTPReceiver.Configuration(rtp)
        #expect(configuration.reorderWindow == 5)
        #expect(configuration.keyframeRequest == expected)
        #expect(configuration.keyframeRequestInterval == 250_000_000)
    }
}
