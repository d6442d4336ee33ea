import FrameFormats
import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// All frames of a stream read in-process from its ring (the test's own reader), with their flags.
func readFrames(_ shmName: String, count: Int) -> [(pixels: [UInt8], flags: FrameFlags, pts: Int64)] {
    guard let reader = try? FrameRingReader(shmName: shmName) else { return [] }
    var frames: [(pixels: [UInt8], flags: FrameFlags, pts: Int64)] = []
    var pixels: [UInt8] = []
    var previous: UInt64 = 0
    while frames.count < count, case .frame(let info) = reader.next(after: previous, into: &pixels, timeoutNanoseconds: 5_000_000_000) {
        frames.append((PlanarConversion.planar(pixels, layout: info.layout), info.flags, info.pts))
        previous = info.sequence
    }
    return frames
}

@Suite(.serialized) struct RTPLossTests {
    /// 20 frames, two GOPs of 10, no B-frames: frame order is decoding order.
    static func source() throws -> (path: String, reference: [[UInt8]], packets: [[UInt8]]) {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: "h264", size: "320x240", frames: 20,
                                              encoderParameters: "keyint=10:min-keyint=10:bframes=0:scenecut=0",
                                              in: directory, name: "l.h264")
        return (url.path, try referenceFrames(url.path, frameBytes: 320 * 240 * 3 / 2), try captureRTP(of: url.path))
    }

    /// Reordered packets, and datagrams from the sender that are no RTP among them (dropped and counted where they
    /// are received, before the decode thread): every frame exact.
    @Test func reorderedPacketsAreRestored() throws {
        let (_, reference, packets) = try Self.source()
        var shuffled = packets
        for index in stride(from: 5, to: shuffled.count - 1, by: 7) { shuffled.swapAt(index, index + 1) }
        let malformed: [[UInt8]] = [[0x80, 96, 0, 1], [0x40] + [UInt8](repeating: 0, count: 20), Array(packets[3].prefix(12)),
                                    [0xA0] + packets[4].dropFirst().dropLast() + [0]]
        for (offset, datagram) in malformed.enumerated() { shuffled.insert(datagram, at: 3 + offset * 9) }
        let metricsPort = freePort()
        let daemon = try DaemonProcess(label: "reorder", settings: [
            "max_width": "320", "max_height": "240", "slots": "32", "codec": "\"h264\"", "idle_timeout": "3",
        ], daemonSettings: ["metrics": "\"127.0.0.1:\(metricsPort)\""], transport: "rtp")
        sendDatagrams(shuffled, port: daemon.port)
        #expect(daemon.waitUntilPublished(20))
        let frames = readFrames(daemon.shmName, count: 20)
        #expect(frames.map(\.pixels) == reference)
        #expect(!frames.contains { $0.flags.contains(.corrupt) })
        // pts is the RTP timestamp (FFmpeg's muxer: a random start, 90 kHz, 25 fps), the clock rate in the header.
        let firstTimestamp = Int64(try rtpTimestamps([packets[0]])[0])
        #expect(frames.enumerated().allSatisfy { $0.element.pts == firstTimestamp + Int64($0.offset) * 3600 }, "\(frames.map(\.pts))")
        #expect(daemon.status?.ptsClockRate == 90000)
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        #expect(sample(body, "streamrecvd_rtp_packets_discarded_total", "stream=\"\(daemon.name)\",reason=\"malformed\"") == Double(malformed.count))
        #expect(daemon.log.contains("that is not RTP"))
    }

    @Test(arguments: ["conceal", "keyframe"])
    func aLostPacketFollowsTheLossPolicyAndTheNextKeyframeIsExact(policy: String) throws {
        let (_, reference, packets) = try Self.source()
        // Drop the first packet of frame 4 (timestamps tell frames apart): the rest of that NAL unit are fragments
        // without a start, so frame 4 is lost whole and frames 5…9 are decoded from a damaged reference.
        let timestamps = try rtpTimestamps(packets)
        let frameStarts = timestamps.indices.filter { $0 == 0 || timestamps[$0] != timestamps[$0 - 1] }
        var lossy = packets
        lossy.remove(at: frameStarts[4])
        let daemon = try DaemonProcess(label: "loss\(policy)", settings: [
            "max_width": "320", "max_height": "240", "slots": "32", "codec": "\"h264\"", "idle_timeout": "3",
            "loss_policy": "\"\(policy)\"",
        ], transport: "rtp")
        sendDatagrams(lossy, port: daemon.port)
        let expected = policy == "conceal" ? 19 : 14
        #expect(daemon.waitUntilPublished(UInt64(expected)))
        let frames = readFrames(daemon.shmName, count: expected)
        #expect(frames.count == expected)
        #expect(Array(frames.prefix(4).map(\.pixels)) == Array(reference.prefix(4)), "frames before the loss are exact")
        #expect(Array(frames.suffix(10).map(\.pixels)) == Array(reference.suffix(10)), "the next GOP is exact")
        #expect(!frames.suffix(10).contains { $0.flags.contains(.corrupt) })
        if policy == "conceal" {
            #expect(frames[4..<9].allSatisfy { $0.flags.contains(.corrupt) }, "frames after the loss are flagged")
        }
        // Frame 4 itself cannot be output (reason "lost"); with loss_policy = keyframe, frames 5…9 are withheld.
        #expect(daemon.status?.counters.framesDropped == (policy == "keyframe" ? 6 : 1))
        #expect(daemon.log.contains("RTP packet(s) lost"))
        #expect(daemon.isRunning)
    }

    /// The sender stops inside its last frame (4 slices a frame, each in several packets; the frame's last packet,
    /// with the marker bit, lost): no later packet shows the gap, and the three slices that came decode into a picture that
    /// is not the sender's. It follows the loss policy (flagged, or withheld) instead of being published as if
    /// whole; the frames before are exact.
    @Test(arguments: ["conceal", "keyframe"])
    func aSenderThatStopsInsideAFrameLeavesItFlaggedOrWithheld(policy: String) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: "h264", size: "640x360", frames: 20,
                                              encoderParameters: "keyint=10:min-keyint=10:bframes=0:scenecut=0:slices=4",
                                              in: directory, name: "cut.h264")
        let reference = try referenceFrames(url.path, frameBytes: 640 * 360 * 3 / 2)
        let packets = try captureRTP(of: url.path)
        let timestamps = try rtpTimestamps(packets)
        try #require(timestamps.count >= 2 && timestamps[timestamps.count - 1] == timestamps[timestamps.count - 2],
                     "the last frame spans several packets")
        let daemon = try DaemonProcess(label: "cut\(policy)", settings: [
            "max_width": "640", "max_height": "360", "slots": "32", "codec": "\"h264\"", "idle_timeout": "1",
            "loss_policy": "\"\(policy)\"",
        ], transport: "rtp")
        sendDatagrams(Array(packets.dropLast()), port: daemon.port)
        let expected = policy == "conceal" ? 20 : 19
        #expect(daemon.waitUntilPublished(UInt64(expected)))
        let frames = readFrames(daemon.shmName, count: expected)
        #expect(frames.count == expected)
        #expect(Array(frames.prefix(19).map(\.pixels)) == Array(reference.prefix(19)), "the frames before are exact")
        #expect(!frames.prefix(19).contains { $0.flags.contains(.corrupt) })
        if policy == "conceal" { #expect(frames.last?.flags.contains(.corrupt) == true, "the cut frame is flagged") }
        #expect(daemon.status?.counters.framesPublished == UInt64(expected))
        #expect(daemon.log.contains("stopped inside an access unit"), "\(daemon.log.suffix(1500))")
    }

    /// A relay that drops (3 %), duplicates (5 %) and swaps neighbouring datagrams (5 %), seeded, over five GOPs,
    /// then passes a sixth GOP untouched: the daemon stays up, counts the loss, flags what it concealed, and the
    /// clean GOP is bit-exact.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func aLossyRelayAtSetRates(seed: UInt64) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: "h264", size: "320x240", frames: 60,
                                              encoderParameters: "keyint=10:min-keyint=10:bframes=0:scenecut=0",
                                              in: directory, name: "relay.h264")
        let reference = try referenceFrames(url.path, frameBytes: 320 * 240 * 3 / 2)
        let packets = try captureRTP(of: url.path)
        let timestamps = try rtpTimestamps(packets)
        let frameStarts = timestamps.indices.filter { $0 == 0 || timestamps[$0] != timestamps[$0 - 1] }
        var generator = SeededGenerator(seed: seed)
        var relayed: [[UInt8]] = []
        var (dropped, duplicated) = (0, 0)
        for packet in packets[..<frameStarts[50]] {
            let roll = Double.random(in: 0..<1, using: &generator)
            if roll < 0.03 {
                dropped += 1
                continue
            }
            relayed.append(packet)
            if roll >= 0.95 {
                relayed.append(packet)
                duplicated += 1
            }
        }
        for index in 0..<(relayed.count - 1) where Double.random(in: 0..<1, using: &generator) < 0.05 {
            relayed.swapAt(index, index + 1)
        }
        relayed += packets[frameStarts[50]...]
        try #require(dropped > 0 && duplicated > 0, "seed \(seed) must damage the stream")

        let metricsPort = freePort()
        let daemon = try DaemonProcess(label: "relay\(seed)", settings: [
            "max_width": "320", "max_height": "240", "slots": "64", "codec": "\"h264\"", "idle_timeout": "2",
        ], daemonSettings: ["metrics": "\"127.0.0.1:\(metricsPort)\""], transport: "rtp")
        sendDatagrams(relayed, port: daemon.port)
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, daemon.status.map({ $0.state != .waiting || $0.counters.connections == 0 }) ?? true {
            usleep(50_000)
        }
        let published = Int(try #require(daemon.status).counters.framesPublished)
        let frames = readFrames(daemon.shmName, count: published)
        #expect(frames.count == published && published >= 10)
        #expect(Array(frames.suffix(10).map(\.pixels)) == Array(reference.suffix(10)), "the clean GOP is exact")
        #expect(!frames.suffix(10).contains { $0.flags.contains(.corrupt) })
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        let stream = "stream=\"\(daemon.name)\""
        #expect((sample(body, "streamrecvd_rtp_packets_lost_total", stream) ?? 0) >= 1, "\(body)")
        #expect((sample(body, "streamrecvd_rtp_payloads_dropped_total", stream) ?? 0) >= 1, "duplicates are dropped, counted")
        let flagged = frames.filter { $0.flags.contains(.corrupt) }.count
        #expect(flagged >= 1 && sample(body, "streamrecvd_frames_corrupt_total", stream) == Double(flagged))
        #expect(daemon.isRunning)
    }
}
