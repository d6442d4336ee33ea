import Bitstream
import Foundation
import NIOConcurrencyHelpers
@testable import Pipeline
import StreamrecvTestSupport
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

/// The decode thread's wishes as the stream's RTP receiver hears them (`StreamWorker.signalKeyframe`): a real
/// decode thread fed RTP with a packet lost, on the fixture's clock.
@Suite(.serialized) struct DecodeThreadKeyframeWishTests {
    static let ssrc: UInt32 = 0x0A0B_0C0D

    /// 12 frames of 320x240, an IDR every 4 (SPS and PPS before each), one slice a frame, no B-frames: each NAL unit
    /// an RTP packet (single NAL unit mode), a frame's packets sharing its timestamp, the marker on its slice.
    static func packets() throws -> [[UInt8]] {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: "h264", size: "320x240", frames: 12,
                                              encoderParameters: "keyint=4:min-keyint=4:scenecut=0:bframes=0", in: directory, name: "wish.h264")
        let stream = Array(try Data(contentsOf: url))
        var starts: [Int] = []
        var index = 0
        while index + 3 <= stream.count {
            if stream[index] == 0, stream[index + 1] == 0, stream[index + 2] == 1 {
                starts.append(index + 3)
                index += 3
            } else {
                index += 1
            }
        }
        var packets: [[UInt8]] = []
        var frame: UInt32 = 0
        for (number, start) in starts.enumerated() {
            var end = number + 1 < starts.count ? starts[number + 1] - 3 : stream.count
            while end > start, stream[end - 1] == 0 { end -= 1 }  // a 4-byte start code's leading zero
            let unit = Array(stream[start..<end])
            let slice = [1, 5].contains(unit[0] & 0x1F)
            let sequence = UInt16(packets.count)
            let timestamp = frame * 3600
            var header: [UInt8] = [0x80, (slice ? 0x80 : 0) | 96, UInt8(sequence >> 8), UInt8(sequence & 0xFF)]
            header += [UInt8(timestamp >> 24), UInt8(timestamp >> 16 & 0xFF), UInt8(timestamp >> 8 & 0xFF), UInt8(timestamp & 0xFF)]
            header += [UInt8(ssrc >> 24), UInt8(ssrc >> 16 & 0xFF), UInt8(ssrc >> 8 & 0xFF), UInt8(ssrc & 0xFF)]
            packets.append(header + unit)
            if slice { frame += 1 }
        }
        return packets
    }

    /// The packets of frame `frame` (its slice is the packet with the marker bit).
    static func slicePacket(of frame: Int, in packets: [[UInt8]]) -> Int {
        packets.indices.filter { packets[$0][1] & 0x80 != 0 }[frame]
    }

    static func fixture(_ signals: NIOLockedValueBox<[KeyframeWish.Signal]>) throws -> DecodeThreadFixture {
        let thread = try DecodeThreadFixture { configuration in
            var rtp = RTPSettings()
            rtp.keyframeRequest = .pli
            rtp.reorderWindow = 1
            configuration.source = .rtp(ListenAddress(transport: .rtp, host: "127.0.0.1", port: 5004), rtp)
            configuration.codec = .h264  // rtp:// does not tell H.264 from H.265 by itself
        }
        thread.worker.setKeyframeSignal { signal in signals.withLockedValue { $0.append(signal) } }
        return thread
    }

    @Test func aLossIsToldOnceAndItsKeyframeSettlesIt() throws {
        let packets = try Self.packets()
        let signals = NIOLockedValueBox<[KeyframeWish.Signal]>([])
        let thread = try Self.fixture(signals)
        thread.worker.enqueue(.connected(1, remote: "127.0.0.1:40000"))
        let lost = Self.slicePacket(of: 1, in: packets)  // a P-frame: frames 2 and 3 refer to what it lacks
        for (index, packet) in packets.enumerated() where index != lost {
            _ = thread.worker.enqueue([.packet(try RTPPacket(parsing: packet[...]))], bytes: packet.count, receivedAt: thread.clock.now, connection: 1)
        }
        try thread.settle()
        #expect(signals.withLockedValue { $0 } == [.wanted(Self.ssrc), .arrived], "wanted at the loss, settled by frame 4's IDR")
        thread.worker.enqueue(.disconnected(1, reason: .closedBySender))
        try thread.settle()
        #expect(signals.withLockedValue { $0 } == [.wanted(Self.ssrc), .arrived], "nothing more: nothing was wanted")
    }

    @Test func aSenderGoneWhileAKeyframeIsWantedSettlesIt() throws {
        let packets = try Self.packets()
        let signals = NIOLockedValueBox<[KeyframeWish.Signal]>([])
        let thread = try Self.fixture(signals)
        thread.worker.enqueue(.connected(1, remote: "127.0.0.1:40000"))
        let lost = Self.slicePacket(of: 9, in: packets)  // after the last IDR: no keyframe comes
        for (index, packet) in packets.enumerated() where index != lost {
            _ = thread.worker.enqueue([.packet(try RTPPacket(parsing: packet[...]))], bytes: packet.count, receivedAt: thread.clock.now, connection: 1)
        }
        try thread.settle()
        #expect(signals.withLockedValue { $0 } == [.wanted(Self.ssrc)])
        thread.worker.enqueue(.disconnected(1, reason: .closedBySender))
        try thread.settle()
        #expect(signals.withLockedValue { $0 } == [.wanted(Self.ssrc), .dropped], "the receiver must not go on asking for a sender gone")
    }
}
