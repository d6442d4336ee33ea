@testable import Pipeline
import Testing

@Suite struct KeyframeRequesterTests {
    @Test func keyframeRequestsAreSpacedAndRenewedAfterHealing() throws {
        var none = KeyframeRequester(kind: .none, intervalSeconds: 1)
        #expect(none.request(mediaSSRC: 5, now: 1) == nil)
        var pli = KeyframeRequester(kind: .pli, intervalSeconds: 1, senderSSRC: 0x0102_0304)
        let requested = pli.request(mediaSSRC: 0x0A0B_0C0D, now: 10_000_000_000)
        let first = try #require(requested)
        // An empty receiver report (8 bytes), then payload-specific feedback (PT 206) FMT 1: a PLI for the media SSRC.
        #expect(first.count == 20 && first[1] == 201 && first[8] & 0x1F == 1 && first[9] == 206)
        #expect(Array(first[4..<8]) == [1, 2, 3, 4] && Array(first[16..<20]) == [0x0A, 0x0B, 0x0C, 0x0D])
        #expect(pli.request(mediaSSRC: 0x0A0B_0C0D, now: 10_500_000_000) == nil, "asked again within the interval")
        #expect(pli.request(mediaSSRC: 0x0A0B_0C0D, now: 11_000_000_001) != nil)
        pli.healed()
        #expect(pli.request(mediaSSRC: 0x0A0B_0C0D, now: 11_000_000_002) != nil, "a new loss is asked for at once")
        var fir = KeyframeRequester(kind: .fir, intervalSeconds: 0, senderSSRC: 1)
        let sequences = (0..<3).compactMap { fir.request(mediaSSRC: 2, now: UInt64($0 + 1) * 1000) }.map { $0[24] }
        #expect(sequences == [1, 2, 3], "FIR sequence numbers count up")
    }
}
