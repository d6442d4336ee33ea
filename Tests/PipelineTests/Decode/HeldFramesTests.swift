import FrameFormats
@testable import Pipeline
import SharedFrames
import Testing

/// The frames a stream keeps while its larger ring is being made: in order, each in memory of its own, within a
/// slot count and a byte limit; the publisher drops the oldest to make room, as `FramePublisher.hold` does.
@Suite struct HeldFramesTests {
    /// A small frame (64x48 NV12, 4608 bytes) whose every byte is `pts`, so that what comes out can be told apart.
    static let small = FrameLayout(format: .nv12, width: 64, height: 48)

    static func metadata(pts: Int64, flags: FrameFlags = []) -> FrameMetadata {
        var metadata = FrameMetadata()
        metadata.pts = pts
        metadata.flags = flags
        return metadata
    }

    /// Keeps a frame of `layout` filled with `pts`'s low byte.
    @discardableResult
    static func append(_ held: HeldFrames, pts: Int64, layout: FrameLayout = small, flags: FrameFlags = []) -> Bool {
        held.append(layout: layout, metadata: metadata(pts: pts, flags: flags)) { pixels in
            pixels.initializeMemory(as: UInt8.self, repeating: UInt8(truncatingIfNeeded: pts))
            return true
        }
    }

    /// What the publisher does before keeping one more: the oldest go until there is room, and the first kept after
    /// them carries the discontinuity flag. Returns the pts of those let go, in the order they were let go.
    static func makeRoom(_ held: HeldFrames, for byteCount: Int) -> [Int64] {
        var dropped: [Int64] = []
        while !held.hasRoom(for: byteCount) {
            held.removeFirst { dropped.append($0.metadata.pts) }
            held.markFirstDiscontinuous()
        }
        return dropped
    }

    /// Every pts kept, oldest first, emptying `held`; each frame's pixels are checked to still be its own.
    static func drain(_ held: HeldFrames) -> [(pts: Int64, flags: FrameFlags)] {
        var out: [(Int64, FrameFlags)] = []
        while let frame = held.first {
            let expected = UInt8(truncatingIfNeeded: frame.metadata.pts)
            #expect(frame.pixels.allSatisfy { $0 == expected }, "pixels of frame \(frame.metadata.pts)")
            out.append((frame.metadata.pts, frame.metadata.flags))
            held.removeFirst()
        }
        return out
    }

    /// The private list behind the frames, counted through reflection: what `removeFirst` compacts.
    static func storedRecords(_ held: HeldFrames) -> Int? {
        (Mirror(reflecting: held).children.first { $0.label == "frames" }?.value as? [HeldFrames.Frame])?.count
    }

    @Test func framesComeOutInTheOrderTheyWereKeptWithTheirOwnPixels() {
        let held = HeldFrames(countLimit: 8)
        #expect(held.isEmpty && held.first == nil && held.bytes == 0)
        for pts in [5, 1, 9, 3] as [Int64] { Self.append(held, pts: pts) }
        #expect(held.count == 4 && !held.isEmpty)
        #expect(held.bytes == 4 * Self.small.byteCount)
        let out = Self.drain(held)
        #expect(out.map(\.pts) == [5, 1, 9, 3])
        #expect(held.isEmpty && held.count == 0 && held.bytes == 0)
    }

    /// A frame whose pixels could not be written (a failed GPU download) is not kept, and its memory is not counted.
    @Test func aFrameWhoseFillFailsIsNotKept() {
        let held = HeldFrames(countLimit: 4)
        Self.append(held, pts: 1)
        var offered = 0
        let kept = held.append(layout: Self.small, metadata: Self.metadata(pts: 2)) { pixels in
            offered = pixels.count
            return false
        }
        #expect(!kept)
        #expect(offered == Self.small.byteCount, "fill is given room for the whole layout")
        #expect(held.count == 1 && held.bytes == Self.small.byteCount && held.first?.metadata.pts == 1)
    }

    /// No more than `countLimit` frames fit (a reader could not take more from one burst); at least one always does.
    @Test func theSlotCountLimitsHowManyFit() {
        let held = HeldFrames(countLimit: 3)
        for pts in 0..<3 as Range<Int64> {
            #expect(held.hasRoom(for: Self.small.byteCount), "room for frame \(pts)")
            Self.append(held, pts: pts)
        }
        #expect(!held.hasRoom(for: Self.small.byteCount))
        #expect(!held.hasRoom(for: 1), "the count is full whatever the size")
        held.removeFirst()
        #expect(held.hasRoom(for: Self.small.byteCount))

        #expect(HeldFrames(countLimit: 0).countLimit == 1, "a ring of one slot still holds one frame")
        #expect(HeldFrames(countLimit: -5).countLimit == 1)
        let single = HeldFrames(countLimit: 0)
        #expect(single.hasRoom(for: Self.small.byteCount))
        Self.append(single, pts: 7)
        #expect(!single.hasRoom(for: Self.small.byteCount))
    }

    /// 64 MiB of pixels at most: a frame larger than that can never be held, and one that fits alone may not fit
    /// beside those kept. Pixels are never touched here, so the large allocations cost no memory.
    @Test func theByteLimitBoundsWhatFitsBesideTheFramesKept() {
        let limit = HeldFrames.byteLimit
        #expect(limit == 64 << 20)
        let held = HeldFrames(countLimit: 16)
        #expect(held.canEverHold(limit) && !held.canEverHold(limit + 1))
        #expect(held.hasRoom(for: limit) && !held.hasRoom(for: limit + 1))

        // 4K P010: about 24 MiB each, so two fit and a third does not (the doc's "2 of 4K P010").
        let large = FrameLayout(format: .p010, width: 3840, height: 2160)
        #expect(large.byteCount * 2 <= limit && large.byteCount * 3 > limit, "\(large.byteCount)")
        for pts in 0..<2 as Range<Int64> {
            #expect(held.hasRoom(for: large.byteCount))
            #expect(held.append(layout: large, metadata: Self.metadata(pts: pts)) { _ in true })
        }
        #expect(held.bytes == 2 * large.byteCount)
        #expect(!held.hasRoom(for: large.byteCount), "a third would pass 64 MiB")
        #expect(held.hasRoom(for: limit - 2 * large.byteCount), "exactly up to the limit fits")
        #expect(!held.hasRoom(for: limit - 2 * large.byteCount + 1))
        held.removeFirst()
        #expect(held.bytes == large.byteCount && held.hasRoom(for: large.byteCount))
    }

    /// Full by count: each new frame lets the oldest go, and the oldest kept after the gap carries the discontinuity
    /// flag; the frames behind it keep their own flags only.
    @Test func whenFullTheOldestAreDroppedFirstAndTheNextOneIsFlagged() {
        let held = HeldFrames(countLimit: 3)
        var dropped: [Int64] = []
        for pts in 0..<6 as Range<Int64> {
            dropped += Self.makeRoom(held, for: Self.small.byteCount)
            Self.append(held, pts: pts, flags: pts == 4 ? [.keyframe] : [])
        }
        #expect(dropped == [0, 1, 2])
        let out = Self.drain(held)
        #expect(out.map(\.pts) == [3, 4, 5])
        #expect(out.map(\.flags) == [[.discontinuity], [.keyframe], []], "\(out.map(\.flags))")
    }

    /// Full by bytes: a large frame lets as many of the oldest go as it needs, not just one.
    @Test func aLargeFrameDropsAsManyOfTheOldestAsItNeeds() {
        let held = HeldFrames(countLimit: 100)
        // 16 MiB each: four fill the limit exactly.
        let quarter = FrameLayout(format: .gray8, width: 4096, height: 4096)
        #expect(quarter.byteCount == HeldFrames.byteLimit / 4, "\(quarter.byteCount)")
        for pts in 0..<4 as Range<Int64> { #expect(held.append(layout: quarter, metadata: Self.metadata(pts: pts)) { _ in true }) }
        let half = HeldFrames.byteLimit / 2
        let dropped = Self.makeRoom(held, for: half)
        #expect(dropped == [0, 1])
        #expect(held.count == 2 && held.bytes == half && held.first?.metadata.pts == 2)
        #expect(held.first?.metadata.flags == [.discontinuity])
    }

    /// What the caller reports as dropped is the frame let go, seen before its memory is freed: its size, its
    /// metadata and its pixels are still its own inside `removeFirst`'s body.
    @Test func theFrameLetGoIsSeenWholeBeforeItIsFreed() {
        let held = HeldFrames(countLimit: 4)
        let wide = FrameLayout(format: .nv12, width: 128, height: 16)
        Self.append(held, pts: 11, layout: wide)
        Self.append(held, pts: 12)
        var seen: (width: Int, height: Int, pts: Int64, intact: Bool)?
        held.removeFirst { frame in
            seen = (frame.layout.width, frame.layout.height, frame.metadata.pts, frame.pixels.allSatisfy { $0 == 11 })
        }
        #expect(seen?.width == 128 && seen?.height == 16 && seen?.pts == 11 && seen?.intact == true, "\(String(describing: seen))")
        #expect(held.count == 1 && held.bytes == Self.small.byteCount)

        // Nothing to let go: the body is not called.
        held.removeFirst()
        var called = false
        held.removeFirst { _ in called = true }
        #expect(!called && held.isEmpty && held.bytes == 0)
    }

    /// Marking an empty list is harmless; marking a full one touches only its first frame.
    @Test func onlyTheFirstKeptFrameIsMarkedDiscontinuous() {
        let held = HeldFrames(countLimit: 4)
        held.markFirstDiscontinuous()
        #expect(held.isEmpty)
        Self.append(held, pts: 1, flags: [.keyframe])
        Self.append(held, pts: 2)
        held.markFirstDiscontinuous()
        #expect(Self.drain(held).map(\.flags) == [[.keyframe, .discontinuity], []])
    }

    /// A long wait at the limit drops the oldest again and again: the list behind the frames is compacted as it
    /// goes, instead of keeping one record per frame ever let go (d73286a).
    @Test func aLongWaitAtTheLimitDoesNotPileUpRecords() throws {
        let held = HeldFrames(countLimit: 4)
        #expect(Self.storedRecords(held) == 0, "reflection finds the list")
        var dropped: [Int64] = []
        var largest = 0
        for pts in 0..<1000 as Range<Int64> {
            dropped += Self.makeRoom(held, for: Self.small.byteCount)
            Self.append(held, pts: pts)
            largest = max(largest, try #require(Self.storedRecords(held)))
        }
        #expect(dropped == Array(0..<996), "every frame but the last four was let go, oldest first")
        // Compaction waits for 32 records let go and for them to be half the list: never more than 32 + the live ones.
        #expect(largest <= 32 + held.countLimit, "the list grew to \(largest) records")
        #expect(Self.drain(held).map(\.pts) == [996, 997, 998, 999])
        #expect(Self.storedRecords(held) == 0, "an emptied list starts again from its beginning")
    }
}
