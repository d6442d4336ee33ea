import Bitstream
import StreamrecvTestSupport
import Testing

@Suite struct SEITests {
    @Test func displayOrientationInBothCodecs() {
        for codec in VideoCodec.allCases {
            var w = BitWriter()
            w.flag(false)  // cancel
            w.flag(true)   // hor_flip
            w.flag(false)  // ver_flip
            w.u(16, 16384) // a quarter turn
            if codec == .h264 { w.ue(0); w.flag(false) } else { w.flag(true) }
            w.trailingBits()
            let unit = Build.sei(codec: codec, type: 47, payload: w.bytes)
            let messages = SEIMessages(codec: codec, payload: unit.dropFirst(codec == .h264 ? 1 : 2))
            let orientation = messages.displayOrientation ?? nil
            #expect(orientation?.rotationDegrees == 90, "\(codec)")
            #expect(orientation?.horizontalFlip == true, "\(codec)")
            #expect(!messages.malformed)
        }
    }

    @Test func h265RecoveryPointHasASignedCount() {
        var w = BitWriter()
        w.se(-3)
        w.flag(false)
        w.flag(true)
        w.trailingBits()
        let unit = Build.sei(codec: .h265, type: 6, payload: w.bytes)
        let messages = SEIMessages(codec: .h265, payload: unit.dropFirst(2))
        #expect(messages.recoveryPoint?.recoveryFrameCount == -3)
        #expect(messages.recoveryPoint?.exactMatch == false)
        #expect(messages.recoveryPoint?.brokenLink == true)
    }

    @Test func payloadSizeBeyondTheUnitIsMalformed() {
        let unit: [UInt8] = [0x06, 6, 200, 0x80]
        #expect(SEIMessages(codec: .h264, payload: unit.dropFirst()).malformed)
        let runaway: [UInt8] = [0x06] + [UInt8](repeating: 0xFF, count: 10_000)
        #expect(SEIMessages(codec: .h264, payload: runaway.dropFirst()).malformed)
    }
}
