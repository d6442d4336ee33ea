@testable import Pipeline
import Testing

/// The decode thread tells the RTP receiver of a wanted keyframe only when that changes.
@Suite struct KeyframeWishTests {
    @Test func theReceiverIsToldOnlyOfChanges() {
        var wish = KeyframeWish(enabled: true)
        var told: [Bool] = []
        told.append(wish.healed())  // nothing wanted yet: nothing to stop
        told.append(wish.want(7))
        told.append(wish.want(7))  // packet after packet of the same loss
        told.append(wish.want(8))  // another source's keyframe is news
        told.append(wish.healed())
        told.append(wish.healed())
        told.append(wish.want(8))  // a new loss after healing
        wish.forget()
        told.append(wish.want(8))  // a new sender's receiver has been told nothing
        #expect(told == [false, true, false, true, true, false, true, true])
        #expect(wish.told == 8)
    }

    @Test func offTellsNothing() {
        var wish = KeyframeWish(enabled: false)
        let wanted = wish.want(1)
        let healed = wish.healed()
        #expect(!wanted && !healed && wish.told == nil)
    }
}
