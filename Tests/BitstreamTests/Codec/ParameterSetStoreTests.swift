import Bitstream
import StreamrecvTestSupport
import Testing

@Suite struct ParameterSetStoreTests {
    @Test func storeIgnoresIdenticalRepeatsAndReportsChanges() {
        var store = ParameterSetStore()
        let small = Build.h264SPS(widthInMbs: 20, heightInMapUnits: 15)
        let large = Build.h264SPS(widthInMbs: 40, heightInMapUnits: 30)
        guard case .updated(let first) = store.receiveH264(small[...]) else { Issue.record("no event"); return }
        #expect(first.changes == nil)
        #expect(store.receiveH264(small[...]) == .unchanged)
        guard case .updated(let second) = store.receiveH264(large[...]) else { Issue.record("no change"); return }
        #expect(second.changes == [.size])
        #expect(store.h264SPS[0]?.value.format.width == 640)
        if case .rejected = store.receiveH264(Build.h264SPS(id: 40)[...]) {} else { Issue.record("accepted id 40") }
        #expect(store.h264SPS[0]?.value.format.width == 640)
    }

    @Test func annexBFormOfTheActiveSets() {
        var store = ParameterSetStore()
        let sps = Build.h264SPS()
        let pps = Build.h264PPS(id: 3)
        _ = store.receiveH264(sps[...])
        #expect(store.annexBParameterSets(codec: .h264, ppsId: 3) == nil)
        _ = store.receiveH264(pps[...])
        #expect(store.annexBParameterSets(codec: .h264, ppsId: 3) == [0, 0, 0, 1] + sps + [0, 0, 0, 1] + pps)
    }
}
