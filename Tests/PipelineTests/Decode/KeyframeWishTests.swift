@testable import Pipeline
import Testing

/// The decode thread tells the RTP receiver of a wanted keyframe only when that changes.
@Suite struct KeyframeWishTests {
    @Test func theReceiverIsToldOnlyOfChanges() {
        var wish = KeyframeWish(enabled: true)
        var said: [String] = []
        let listening = { (source: UInt32) -> Bool in said.append("want \(source)"); return true }
        let settled = { said.append("settled") }
        wish.settle(telling: settled)  // nothing wanted yet: nothing to stop
        wish.want(7, telling: listening)
        wish.want(7, telling: listening)  // packet after packet of the same loss
        wish.want(8, telling: listening)  // another source's keyframe is news
        wish.settle(telling: settled)
        wish.settle(telling: settled)
        wish.want(8, telling: listening)  // a new loss after healing
        #expect(said == ["want 7", "want 8", "settled", "want 8"])
        #expect(wish.told == 8)
    }

    @Test func aWishNobodyHeardIsSaidAgain() {
        var wish = KeyframeWish(enabled: true)
        var calls = 0
        wish.want(3) { _ in calls += 1; return false }
        #expect(wish.told == nil)
        wish.want(3) { _ in calls += 1; return true }
        #expect(calls == 2 && wish.told == 3)
    }

    @Test func offTellsNothing() {
        var wish = KeyframeWish(enabled: false)
        var calls = 0
        wish.want(1) { _ in calls += 1; return true }
        wish.settle { calls += 1 }
        #expect(calls == 0 && wish.told == nil)
    }
}
