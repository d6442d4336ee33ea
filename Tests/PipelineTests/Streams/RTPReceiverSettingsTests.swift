import Bitstream
@testable import Pipeline
import Testing

/// `keyframe_request` and its interval, as the stream's RTP receiver takes them.
@Suite struct RTPReceiverSettingsTests {
    @Test(arguments: [(KeyframeRequest.none, nil), (.pli, .pictureLossIndication), (.fir, .fullIntraRequest)] as [(KeyframeRequest, RTPReceiver.KeyframeRequest?)])
    func eachKindAsksAsConfigured(kind: KeyframeRequest, expected: RTPReceiver.KeyframeRequest?) {
        var rtp = RTPSettings()
        rtp.keyframeRequest = kind
        rtp.keyframeRequestInterval = 0.25
        let configuration = RTPReceiver.Configuration(keyframes: rtp)
        #expect(configuration.keyframeRequest == expected)
        #expect(configuration.keyframeRequestInterval == 250_000_000)
    }
}
