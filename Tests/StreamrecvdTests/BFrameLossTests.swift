import Bitstream
import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// A reference picture damaged in a stream with B-frames: the frames that come out of the decoder reordered must
/// all say whether they are what the sender encoded, and every frame that cannot come out must be counted.
@Suite(.serialized) struct BFrameLossTests {
    static let frames = 60

    /// Over rtp:// the first packet with slice data of the 1st, 2nd or 3rd reference picture after the IDR is
    /// dropped: a P picture's first FU-A fragment (the rest then have no start: its slices are lost, its delimiter
    /// arrives), or the only packet of a small B reference picture (nothing of it arrives: frame_num tells). Every
    /// picture that refers to it, before or after it in output order, is damaged; the lost picture is missing.
    @Test(arguments: [1, 2, 3])
    func everyFrameAfterALostReferenceIsFlaggedOrCounted(lostReference: Int) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        // In MPEG-TS, so that each access unit has its pts: the RTP timestamps then tell the frames apart.
        let clip = directory.appendingPathComponent("b.ts").path
        try runChecked("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
                                  "-frames:v", String(Self.frames), "-pix_fmt", "yuv420p", "-c:v", "libx264",
                                  "-x264-params", "bframes=2:keyint=30:min-keyint=30:scenecut=0", "-f", "mpegts", clip])
        let raw = directory.appendingPathComponent("b.h264").path
        try runChecked("ffmpeg", ["-v", "error", "-y", "-i", clip, "-c", "copy", "-f", "h264", raw])
        let reference = try referenceFrames(clip, frameBytes: 320 * 240 * 3 / 2)
        let packets = try captureRTP(of: clip)
        // Access units in decoding order, as the RTP packets carry them (the marker bit ends each).
        let units = accessUnits(of: [UInt8](try Data(contentsOf: URL(fileURLWithPath: raw)))).filter(\.hasPicture)
        let timestamps = try rtpTimestamps(packets)
        let starts = packets.indices.filter { $0 == 0 || packets[$0 - 1][1] & 0x80 != 0 }
        try #require(starts.count == units.count && units.count == Self.frames, "\(starts.count) RTP frames, \(units.count) access units")
        // The `lostReference`-th P picture of the first GOP.
        let victim = try #require(units.indices.filter { units[$0].isReference && !units[$0].isKeyframe }.dropFirst(lostReference - 1).first)
        var lossy = packets
        // Its first packet with slice data (FFmpeg's packetizer sends the delimiter alone first).
        lossy.remove(at: packets[starts[victim]][12] & 0x1f == 9 ? starts[victim] + 1 : starts[victim])
        let daemon = try DaemonProcess(label: "bloss\(lostReference)", settings: [
            "max_width": "320", "max_height": "240", "slots": "80", "codec": "\"h264\"", "idle_timeout": "2",
        ], transport: "rtp")
        sendDatagrams(lossy, port: daemon.port)
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, daemon.status.map({ $0.state != .waiting || $0.counters.connections == 0 }) ?? true {
            usleep(50_000)
        }
        let status = try #require(daemon.status)
        let published = Int(status.counters.framesPublished)
        let read = readFrames(daemon.shmName, count: published)
        #expect(read.count == published)
        // Which frame each is, by its pts (the RTP timestamp: 3600 a frame).
        let base = Int64(try #require(timestamps.min()))
        var unflaggedWrong: [Int] = []
        var seen = Set<Int>()
        for frame in read {
            let index = Int((frame.pts - base) / 3600)
            seen.insert(index)
            if index < 0 || index >= reference.count || (frame.pixels != reference[index] && !frame.flags.contains(.corrupt)) {
                unflaggedWrong.append(index)
            }
        }
        #expect(unflaggedWrong.isEmpty, "frames that differ from the sender's without the corrupt flag: \(unflaggedWrong)")
        let missing = (0..<Self.frames).filter { !seen.contains($0) }
        #expect(Int(status.counters.framesDropped) == missing.count,
                "missing frames \(missing), dropped counted \(status.counters.framesDropped)")
        // The second GOP is whole and exact.
        #expect(read.filter { Int(($0.pts - base) / 3600) >= 30 }.allSatisfy { !$0.flags.contains(.corrupt) })
        #expect(daemon.isRunning)
    }

    /// srt:// with FFmpeg looping a clip with B-frames (`-stream_loop 2 -c copy`): FFmpeg drops the first two
    /// packets of each later pass (its IDR and first P picture: 176 access units for 180 frames), so the pictures
    /// after each seam refer to references that never came. Each published frame is compared with what the sender
    /// encoded (the clip's frame): any other must carry the corrupt flag. Nothing the daemon received is lost.
    @Test func aLoopedClipWithBFramesOverSRT() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let clip = try SRTIngestTests.clip(codec: "h264", in: directory)
        let encoded = try referenceFrames(clip, frameBytes: 320 * 240 * 3 / 2)
        let daemon = try SRTIngestTests.daemon("bloop", ["slots": String(3 * SRTIngestTests.frames + 8), "srt_delivery": "\"arrival\""])
        let record = directory.appendingPathComponent("sent.ts").path
        let sent = try SRTIngestTests.send(clip, to: SRTIngestTests.url(daemon), loops: 2, record: record)
        #expect(sent.status == 0, "ffmpeg: \(sent.text)")
        #expect(daemon.waitUntilPublished(1, timeout: 30))
        let status = try #require(daemon.status)
        let read = readFrames(daemon.shmName, count: Int(status.counters.framesPublished))
        let base = try #require(read.map(\.pts).min())
        let unflaggedWrong = read.map { Int(($0.pts - base) / 3600) }.enumerated().filter { offset, index in
            read[offset].pixels != encoded[index % encoded.count] && !read[offset].flags.contains(.corrupt)
        }.map(\.element)
        #expect(unflaggedWrong.isEmpty, "frames that differ from the sender's without the corrupt flag: \(unflaggedWrong)")
        // Every access unit the daemon received came out as a frame.
        #expect(status.counters.framesPublished == status.counters.accessUnits && status.counters.framesDropped == 0,
                "\(status.counters)")
        #expect(read.filter { $0.flags.contains(.corrupt) }.count >= 2, "the pictures after each seam are flagged")
    }
}
