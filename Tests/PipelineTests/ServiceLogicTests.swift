import Glibc
import NIOCore
@testable import Pipeline
import Bitstream
import Testing

@Suite struct AllowlistTests {
    @Test(arguments: [
        ("192.168.1.0/24", "192.168.1.77", true),
        ("192.168.1.0/24", "192.168.2.1", false),
        ("10.1.2.3", "10.1.2.3", true),
        ("10.1.2.3", "10.1.2.4", false),
        ("0.0.0.0/0", "203.0.113.9", true),
        ("172.16.0.0/12", "172.31.255.255", true),
        ("172.16.0.0/12", "172.32.0.0", false),
        ("::1", "::1", true),
        ("fd00::/8", "fd12:3456::1", true),
        ("fd00::/8", "fe80::1", false),
        // A dual-stack socket reports IPv4 senders as ::ffff:a.b.c.d.
        ("127.0.0.0/8", "::ffff:127.0.0.5", true),
        ("127.0.0.0/8", "::ffff:10.0.0.5", false),
        ("::1", "127.0.0.1", false),
    ])
    func networksContainTheirAddresses(network: String, address: String, expected: Bool) throws {
        let range = try #require(AddressRange(network))
        let socketAddress = try SocketAddress(ipAddress: address, port: 1)
        #expect([range].allows(socketAddress) == expected)
    }

    @Test func anEmptyListAllowsAllAndBadEntriesAreRejected() throws {
        #expect([AddressRange]().allows(try SocketAddress(ipAddress: "198.51.100.1", port: 9)))
        for bad in ["", "10.0.0.0/33", "::/129", "10.0.0/8", "example.com", "10.0.0.0/-1", "10.0.0.0/8/8"] {
            #expect(AddressRange(bad) == nil, "\(bad)")
        }
        #expect(AddressRange("192.168.1.77/24")?.description == "192.168.1.0/24", "host bits are cleared")
    }

    @Test func theRateLimiterAdmitsABurstThenTheRate() {
        var limiter = ConnectionRateLimiter(perSecond: 3)
        let start: UInt64 = 1_000_000_000
        var burst: [Bool] = []
        for offset in 0..<5 { burst.append(limiter.admit(now: start + UInt64(offset))) }
        #expect(burst == [true, true, true, false, false])
        let afterAThird = limiter.admit(now: start + 340_000_000)
        let rightAfter = limiter.admit(now: start + 350_000_000)
        #expect(afterAThird, "one token back after a third of a second")
        #expect(!rightAfter)
        var refill: [Bool] = []
        for offset in 0..<4 { refill.append(limiter.admit(now: start + 10_000_000_000 + UInt64(offset))) }
        #expect(refill == [true, true, true, false], "the bucket refills to the burst, not beyond")
    }
}

@Suite struct ReloadPlanTests {
    func stream(_ name: String, port: Int, slots: Int = 8) -> StreamConfiguration {
        var stream = StreamConfiguration(name: name, listen: ListenAddress(transport: .tcp, host: "127.0.0.1", port: port))
        stream.slots = slots
        return stream
    }

    @Test func streamsAreAddedRemovedChangedOrLeftAlone() {
        let old = [stream("a", port: 1), stream("b", port: 2), stream("c", port: 3)]
        let new = [stream("c", port: 3, slots: 16), stream("a", port: 1), stream("d", port: 4)]
        let plan = ReloadPlan(from: old, to: new)
        #expect(plan.added == ["d"] && plan.removed == ["b"] && plan.changed == ["c"] && plan.unchanged == ["a"])
        #expect(plan.stop == ["b", "c"] && plan.start == ["c", "d"])
        #expect(plan.summary == "added d; removed b; changed c; unchanged a")
        #expect(ReloadPlan(from: old, to: old).stop.isEmpty, "an identical file touches nothing")
    }
}

@Suite struct ByteArrayPoolTests {
    @Test func arraysComeBackWithTheirStorageAndThePoolIsBounded() {
        let pool = ByteArrayPool()
        // Handed over and given back as the decode thread does: nothing else holds it afterwards.
        let storage: UnsafePointer<UInt8>? = {
            let first = pool.copy(ByteBuffer(bytes: [1, 2, 3]))
            #expect(first == [1, 2, 3])
            pool.recycle(first)
            return first.withUnsafeBufferPointer { $0.baseAddress }
        }()
        let second = pool.copy(ByteBuffer(bytes: [4, 5]))
        #expect(second == [4, 5])
        #expect(second.withUnsafeBufferPointer { $0.baseAddress } == storage, "the recycled storage is reused")
        // More arrays than the pool keeps, and one too large to keep: none of it grows the pool past its bounds.
        for _ in 0..<(ByteArrayPool.capacity + 4) { pool.recycle([UInt8](repeating: 7, count: 16)) }
        pool.recycle([UInt8](repeating: 0, count: ByteArrayPool.largestKept + 1))
        var taken: [[UInt8]] = []
        for _ in 0..<(ByteArrayPool.capacity + 1) { taken.append(pool.copy(ByteBuffer(bytes: [9]))) }
        #expect(taken.filter { $0.capacity > ByteArrayPool.largestKept }.isEmpty)
        #expect(taken.allSatisfy { $0 == [9] })
    }
}

@Suite struct SenderAdmissionTests {
    /// One host connecting in a loop uses up its own allowance, not the real sender's.
    @Test func theConnectionRateIsLimitedPerSourceAddress() throws {
        var limiter = PerSourceRateLimiter(perSecond: 2)
        let flood = try SocketAddress(ipAddress: "127.0.0.2", port: 40000)
        let sender = try SocketAddress(ipAddress: "127.0.0.1", port: 40001)
        let now: UInt64 = 5_000_000_000
        let flooded = (0..<100).map { limiter.admit(flood, now: now + UInt64($0)) }
        #expect(flooded.filter { $0 }.count == 2)
        let senderAdmitted = limiter.admit(sender, now: now + 200)
        #expect(senderAdmitted)
        // The IPv4-mapped form of an address is the same source.
        let mappedAdmitted = limiter.admit(try SocketAddress(ipAddress: "::ffff:127.0.0.2", port: 1), now: now + 300)
        #expect(!mappedAdmitted)
    }

    @Test func theSourceTableStaysBounded() throws {
        var limiter = PerSourceRateLimiter(perSecond: 1)
        for index in 0..<(PerSourceRateLimiter.maximumSources + 10) {
            let address = try SocketAddress(ipAddress: "10.\(index >> 16).\((index >> 8) & 255).\(index & 255)", port: 1)
            let admitted = limiter.admit(address, now: UInt64(index + 1))
            #expect(admitted)
        }
    }

    /// A sender is "quiet" from its admission until its first video, then from its latest video.
    @Test func quietnessCountsFromAdmissionOrLastVideo() {
        let second: UInt64 = 1_000_000_000
        #expect(SenderDeadlines.quiet(admittedAt: 10 * second, lastProgress: nil, now: 13 * second) == 3 * second)
        #expect(SenderDeadlines.quiet(admittedAt: 10 * second, lastProgress: 12 * second, now: 13 * second) == second)
        #expect(SenderDeadlines.quiet(admittedAt: 10 * second, lastProgress: 9 * second, now: 13 * second) == 3 * second,
                "progress of an earlier connection does not count")
        #expect(SenderDeadlines(idleTimeoutSeconds: 10).hold == 2 * second)
        #expect(SenderDeadlines(idleTimeoutSeconds: 1).hold == second)
        #expect(SenderDeadlines(idleTimeoutSeconds: 0).idleTimeout == 0)
    }

    @Test func activityBelongsToOneConnection() {
        let activity = SenderActivity()
        activity.progressed(7, at: 100)
        #expect(activity.lastProgress(of: 7) == 100 && activity.lastProgress(of: 8) == nil)
    }
}

@Suite struct FormattingTests {
    /// The daemon formats numbers without Foundation (it does not link it): as printf's %.Nf.
    @Test func decimalsAsPrintfWritesThem() {
        #expect(String(2.0, decimals: 1) == "2.0" && String(1.256, decimals: 2) == "1.26" && String(-0.04, decimals: 1) == "-0.0")
        #expect(String(12345678.9, decimals: 0) == "12345679" && String(Double.infinity, decimals: 1) == "inf")
        #expect(ConfigurationReport.size(3 << 29) == "1.5 GiB" && ConfigurationReport.size(5 << 20) == "5.0 MiB")
    }
}

@Suite struct BindAddressTests {
    @Test(arguments: [
        ("127.0.0.1", "localhost", true),
        ("0.0.0.0", "127.0.0.1", true),
        ("::", "127.0.0.1", true),
        ("::", "::1", true),
        ("0.0.0.0", "::1", false),
        ("127.0.0.1", "127.0.0.2", false),
        ("::1", "127.0.0.1", false),
    ])
    func listenHostsOverlapHoweverTheyAreSpelt(first: String, second: String, overlap: Bool) throws {
        let a = try #require(BindAddress.resolve(first))
        let b = try #require(BindAddress.resolve(second))
        #expect(BindAddress.overlap(a, b) == overlap)
        #expect(BindAddress.overlap(b, a) == overlap)
    }
}

@Suite struct LossTrackerTests {
    func unit(at offset: Int64, _ access: RandomAccessKind? = nil, firstSlice: Bool = true, reference: Bool = true,
              recovery: Int? = nil, codec: VideoCodec = .h264, types: [UInt8] = [1]) -> AccessUnit {
        AccessUnit(codec: codec, data: [], nalUnitTypes: types, streamOffset: offset, sliceCount: 1, randomAccess: access,
                   ppsId: 0, format: nil, parameterSets: nil, displayOrientation: nil, end: .explicit,
                   beginsWithFirstSlice: firstSlice, isReference: reference, recoveryFrameCount: recovery)
    }

    func check(_ tracker: inout LossTracker, _ unit: AccessUnit, damaged: Bool, _ comment: Comment? = nil,
               sourceLocation: SourceLocation = #_sourceLocation) {
        let result = tracker.isDamaged(unit)
        #expect(result == damaged, comment, sourceLocation: sourceLocation)
    }

    @Test func aWholeKeyframeAfterTheLossEndsTheDamage() {
        var tracker = LossTracker()
        check(&tracker, unit(at: 0), damaged: false)
        tracker.noteLoss(at: 1000)
        check(&tracker, unit(at: 900), damaged: true, "the picture the loss fell in")
        check(&tracker, unit(at: 950, .idr), damaged: true, "a keyframe that began before the loss lost part of itself")
        check(&tracker, unit(at: 1000, .idr, firstSlice: false), damaged: true, "a keyframe missing its first slice")
        check(&tracker, unit(at: 1000, .idr), damaged: false)
        check(&tracker, unit(at: 2000), damaged: false)
    }

    @Test func aNewStreamIsDamagedUntilItsFirstWholeKeyframe() {
        var tracker = LossTracker()
        tracker.startAfresh()
        #expect(!tracker.needsKeyframe, "nothing asked before the first picture")
        check(&tracker, unit(at: 0), damaged: true, "a stream joined mid-GOP")
        #expect(tracker.needsKeyframe)
        check(&tracker, unit(at: 500, .idr), damaged: false)
    }

    @Test func aCRAHealsButItsRASLPicturesStayDamaged() {
        var tracker = LossTracker()
        tracker.noteLoss(at: 10)
        check(&tracker, unit(at: 100, .cra, codec: .h265, types: [21]), damaged: false)
        check(&tracker, unit(at: 200, codec: .h265, types: [8]), damaged: true, "RASL refers to what the loss damaged")
        check(&tracker, unit(at: 300, codec: .h265, types: [1]), damaged: false, "trailing pictures are whole")
        check(&tracker, unit(at: 400, .idr, codec: .h265, types: [19]), damaged: false)
        check(&tracker, unit(at: 500, codec: .h265, types: [8]), damaged: false, "no loss before this IRAP")
    }

    /// A kernel drop is seen before the place of its gap is known: nothing heals until the window closes.
    @Test func nothingHealsWhileALossWindowIsOpen() {
        var tracker = LossTracker()
        tracker.openLossWindow(at: 100)
        check(&tracker, unit(at: 200, .idr), damaged: true, "the gap may still be ahead of this keyframe")
        tracker.closeLossWindow(at: 300)
        check(&tracker, unit(at: 250, .idr), damaged: true, "began before the window closed")
        check(&tracker, unit(at: 300, .idr), damaged: false)
    }

    /// Intra refresh: the picture with the recovery point SEI is whole only `recovery_frame_cnt` reference
    /// pictures later; non-reference pictures do not count.
    @Test func aRecoveryPointHealsAfterItsCount() {
        var tracker = LossTracker()
        tracker.noteLoss(at: 10)
        // frame_num: f (the SEI picture), f+1 (non-reference), f+1, f+2: the fourth is the first whole picture.
        check(&tracker, unit(at: 100, .recoveryPoint, recovery: 2), damaged: true)
        check(&tracker, unit(at: 200, reference: false), damaged: true)
        check(&tracker, unit(at: 300), damaged: true)
        check(&tracker, unit(at: 400), damaged: false, "recovery_frame_cnt reference pictures after the recovery point")
        tracker.noteLoss(at: 600)
        check(&tracker, unit(at: 700, .recoveryPoint, recovery: 0), damaged: false, "a count of 0: whole at once")
    }
}
