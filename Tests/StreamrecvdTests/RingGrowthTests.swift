import FrameFormats
import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// Every frame the test's own reader takes from a ring until none comes for `quietSeconds`: pixels (planar), flags
/// and how long it took from its access unit's last byte to readable.
final class TimingReader: @unchecked Sendable {
    struct Frame {
        var pixels: [UInt8]
        var flags: FrameFlags
        var waitedSeconds: Double
    }

    private let done = DispatchSemaphore(value: 0)
    // Written by the reading thread only, read after `frames()` waited for it.
    private var taken: [Frame] = []

    init(shmName: String, quietSeconds: Double) throws {
        let reader = try FrameRingReader(shmName: shmName)
        Thread.detachNewThread { [self] in
            var pixels: [UInt8] = []
            var previous: UInt64 = 0
            while case .frame(let info) = reader.next(after: previous, into: &pixels, timeoutNanoseconds: Int64(quietSeconds * 1e9)) {
                let waited = info.timePublished > info.timeAccessUnitComplete ? Double(info.timePublished - info.timeAccessUnitComplete) / 1e9 : 0
                taken.append(Frame(pixels: PlanarConversion.planar(pixels, layout: info.layout), flags: info.flags, waitedSeconds: waited))
                previous = info.sequence
            }
            done.signal()
        }
    }

    func frames() -> [Frame] {
        done.wait()
        return taken
    }
}

/// Making a large ring takes seconds on a loaded machine (760 MiB for 4K P010 in 32 slots: 6 s seen). The decode
/// thread must not wait for it: packets keep being decoded, so nothing received is lost and the frames after the
/// ring is made are published as soon as they are decoded, bit-exact.
@Suite(.serialized) struct RingGrowthTests {
    /// RTP paced at 30 fps while every new ring object is made 2 s late (STREAMRECVD_INJECT_RING_DELAY_MS): the
    /// first frames are dropped as `awaiting_ring` (the first after waiting 0.5 s at most), then every frame is
    /// published, consecutive and bit-exact against FFmpeg, none more than 0.4 s after its last byte. A decode thread
    /// that waited for the ring would publish the frames queued meanwhile up to 2 s late.
    @Test func aSlowRingDoesNotHoldTheDecodeThread() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let frameCount = 150
        let url = try GeneratedStreams.encode(codec: "h264", size: "640x360", frames: frameCount,
                                              encoderParameters: "keyint=30:bframes=0", in: directory, name: "g.h264")
        let reference = try referenceFrames(url.path, frameBytes: 640 * 360 * 3 / 2)
        let daemon = try DaemonProcess(label: "ringdelay", settings: [
            "max_width": "640", "max_height": "360", "slots": "32", "codec": "\"h264\"", "idle_timeout": "3",
        ], transport: "rtp", start: false)
        try daemon.start(environment: ["STREAMRECVD_INJECT_RING_DELAY_MS": "2000"])
        let reader = try TimingReader(shmName: daemon.shmName, quietSeconds: 6)
        try runChecked("ffmpeg", ["-v", "error", "-re", "-i", url.path, "-c", "copy", "-f", "rtp",
                                  "rtp://127.0.0.1:\(daemon.port)?pkt_size=1200"])
        let frames = reader.frames()
        let counters = try #require(daemon.status?.counters)
        let awaiting = daemon.log.components(separatedBy: "its larger ring is still being made").count - 1

        #expect(awaiting >= 1, "no frame waited for the ring: \(daemon.log.suffix(2000))")
        #expect(counters.framesDecoded == UInt64(frameCount), "every access unit decoded: \(counters)")
        #expect(counters.decodeErrors == 0)
        #expect(frames.count + Int(counters.framesDropped) == frameCount, "\(frames.count) published, \(counters)")
        #expect(frames.count >= frameCount / 2, "\(frames.count) of \(frameCount) published")
        let expected = Array(reference.suffix(frames.count))
        let mismatched = zip(frames, expected).enumerated().filter { $0.element.0.pixels != $0.element.1 }.map(\.offset)
        #expect(mismatched.isEmpty, "frames not FFmpeg's (consecutive to the end): \(mismatched.prefix(10))")
        #expect(frames.first?.flags.contains(.discontinuity) == true, "the first frame after the gap is flagged")
        #expect(!frames.contains { $0.flags.contains(.corrupt) })
        let slowest = frames.map(\.waitedSeconds).max() ?? 0
        #expect(slowest < 0.4, "a frame was published \(slowest) s after its last byte")
        #expect(daemon.stop() == 0)
    }
}
