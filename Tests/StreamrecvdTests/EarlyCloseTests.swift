import FrameFormats
import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// When an access unit is closed (docs/latency.md): only when its end is known — the next access unit's first
/// bytes (a delimiter sent right after the frame, or the next frame), the RTP marker, the end of the input —
/// never on a pause. So no sender and no link can make the daemon publish a damaged frame: each sender below is
/// run as people run it, and every frame must come out bit-exact and unflagged.
@Suite(.serialized) struct EarlyCloseTests {
    /// No B-frames (no reordering), one IDR every 25 frames.
    private static let small = "bframes=0:keyint=25:min-keyint=25:scenecut=0"

    private func publishedFrames(_ daemon: DaemonProcess) -> UInt64 { daemon.status?.counters.framesPublished ?? 0 }

    private func waitForPublished(_ daemon: DaemonProcess, _ count: UInt64, seconds: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if publishedFrames(daemon) >= count { return true }
            usleep(2_000)
        }
        return false
    }

    /// A pause says nothing about where a frame ends: without a delimiter, a frame waits for the next one's first
    /// bytes (the next NAL unit need not be whole).
    @Test func aFrameWaitsForItsEndToBeKnownNotForAPause() throws {
        let stream = try generated("h264", frames: 5, parameters: Self.small)
        let daemon = try DaemonProcess(label: "noguess", settings: ["max_width": "160", "max_height": "96", "slots": "32"])
        let offsets = StreamFacts(stream).accessUnitOffsets + [stream.count]
        let sender = try Sender(port: daemon.port)
        try sender.send(stream[offsets[0]..<offsets[1]])
        usleep(300_000)
        #expect(publishedFrames(daemon) == 0, "a pause must not close the frame")
        try sender.send(stream[offsets[1]..<(offsets[1] + 8)])
        #expect(waitForPublished(daemon, 1))
        try sender.send(stream[(offsets[1] + 8)...])
        sender.close()
        #expect(daemon.waitUntilPublished(5))
    }

    /// `streamrecvctl send` writes each access unit followed by the next one's delimiter (the source's own
    /// delimiters moved there): FFmpeg decodes the same pictures from it, and the daemon publishes each frame
    /// before a byte of the next one has been sent.
    @Test(arguments: ["h264", "h265"])
    func aDelimiterAfterEachFrameClosesItAtOnce(codec: String) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        // x264's and x265's own delimiters in front of each access unit: send must move them, not double them.
        let parameters = Self.small + ":aud=1"
        let source = try GeneratedStreams.encode(codec: codec, size: "160x96", frames: 25, encoderParameters: parameters,
                                                 in: directory, name: "s.\(codec)")
        let delimited = directory.appendingPathComponent("delimited.\(codec)").path
        _ = try runChecked(tool("streamrecvctl"), ["send", source.path, "--to-file", delimited])
        let reference = try ffmpegMD5s(source.path)
        #expect(reference.count == 25)
        #expect(try ffmpegMD5s(delimited) == reference, "moving the delimiters changes no picture")
        let stream = [UInt8](try Data(contentsOf: URL(fileURLWithPath: delimited)))
        let delimiterOffsets = Self.delimiterOffsets(stream, codec: codec)
        #expect(delimiterOffsets.count == 25, "one delimiter after each access unit, none in front of the first")
        #expect(delimiterOffsets.last.map { stream.count - $0 <= 7 } == true, "the stream ends with a delimiter")

        let daemon = try DaemonProcess(label: "delimited", settings: ["max_width": "160", "max_height": "96", "slots": "32"])
        let cat = try CatProcess(stream: daemon.name, frames: 25, directory: directory)
        let sender = try Sender(port: daemon.port)
        var start = 0
        for (index, delimiter) in delimiterOffsets.enumerated() {
            // The frame and the delimiter after it; nothing of the next frame.
            let end = min(stream.count, delimiter + (codec == "h264" ? 6 : 7))
            try sender.send(stream[start..<end])
            start = end
            #expect(waitForPublished(daemon, UInt64(index + 1)), "frame \(index) not published: \(daemon.log.suffix(1500))")
        }
        sender.close()
        #expect(cat.finish().status == 0)
        #expect(firstDifference(try catMD5s(cat), reference) == nil)
        // The delimiter after the last frame begins an access unit with no picture: not a decode error.
        #expect(daemon.waitUntilPublished(25) && daemon.status?.counters.decodeErrors == 0, "\(daemon.log.suffix(1500))")
    }

    /// Offsets of the 4-byte start codes of the access unit delimiters in `stream`.
    private static func delimiterOffsets(_ stream: [UInt8], codec: String) -> [Int] {
        var offsets: [Int] = []
        var index = 0
        while index + 4 < stream.count {
            if stream[index] == 0, stream[index + 1] == 0, stream[index + 2] == 0, stream[index + 3] == 1 {
                let header = stream[index + 4]
                if codec == "h264" ? header & 0x1F == 9 : (header >> 1) & 0x3F == 35 { offsets.append(index) }
                index += 4
            } else {
                index += 1
            }
        }
        return offsets
    }

    /// What a daemon published of a 40-frame 640×360 stream of 8 slices a picture (an IDR every 20) whose access unit
    /// 7, a P picture, `damage` changed (given the offsets of its start codes), sent over TCP: which frames it flagged
    /// corrupt, which differ from FFmpeg's own decode of the same bytes (single-threaded: its concealment as the
    /// daemon runs it), and how many pictures it decoded in parts.
    private func publishDamaged(_ label: String, damage: (inout [UInt8], [Int]) -> Void) throws
        -> (flagged: [Int], differing: [Int], inParts: Double) {
        let frames = 40
        let directory = try TestEnvironment.temporaryDirectory()
        let source = try GeneratedStreams.encode(codec: "h264", size: "640x360", frames: frames,
                                                 encoderParameters: "bframes=0:keyint=20:min-keyint=20:scenecut=0:crf=14:slices=8",
                                                 in: directory, name: "s.h264")
        var stream = [UInt8](try Data(contentsOf: source))
        let offsets = StreamFacts(stream).accessUnitOffsets + [stream.count]
        var starts: [Int] = []
        var index = offsets[7]
        while index + 3 < offsets[8] {
            if stream[index] == 0, stream[index + 1] == 0, stream[index + 2] == 1 { starts.append(index) }
            index += 1
        }
        #expect(starts.count >= 6)
        damage(&stream, starts)
        let damaged = directory.appendingPathComponent("\(label).h264").path
        try Data(stream).write(to: URL(fileURLWithPath: damaged))
        let raw = try runChecked("ffmpeg", ["-v", "quiet", "-threads", "1", "-i", damaged, "-f", "rawvideo", "-pix_fmt", "yuv420p", "-"]).standardOutput
        let frameBytes = 640 * 360 * 3 / 2
        let reference = stride(from: 0, to: raw.count, by: frameBytes).map { [UInt8](raw[$0..<min(raw.count, $0 + frameBytes)]) }
        #expect(reference.count == frames)

        let metricsPort = freePort()
        let daemon = try DaemonProcess(label: label, settings: ["max_width": "640", "max_height": "368", "slots": "64"],
                                       daemonSettings: ["metrics": "\"127.0.0.1:\(metricsPort)\""])
        let sender = try Sender(port: daemon.port)
        try sender.sendPaced(stream, pauseMicroseconds: 5_000)
        sender.close()
        #expect(daemon.waitUntilPublished(UInt64(frames)), "\(daemon.log.suffix(2000))")
        let published = ringFrames(daemon.shmName, count: frames)
        #expect(published.count == frames)
        let flagged = published.enumerated().filter { $0.element.info.flags.contains(.corrupt) }.map(\.offset)
        let differing = zip(published, reference).enumerated().filter { $0.element.0.pixels != $0.element.1 }.map(\.offset)
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        return (flagged, differing, sample(body, "streamrecvd_pictures_decoded_in_parts_total", "stream=\"\(daemon.name)\"") ?? 0)
    }

    /// A picture damaged inside one of its slices (bytes overwritten mid-slice, as a buggy sender or a broken
    /// relay would) while pictures are decoded slice by slice, where libavcodec's concealment is off: no frame
    /// that differs from FFmpeg's decode of the same bytes is published unflagged. The damaged picture and those
    /// that refer to it are flagged until the next keyframe; from there on, every frame is FFmpeg's again.
    @Test func aDamagedPictureIsFlaggedUntilTheNextKeyframe() throws {
        // 32 bytes inside the fourth slice.
        let (flagged, differing, inParts) = try publishDamaged("damaged") { stream, starts in
            for offset in (starts[3] + 33)..<(starts[3] + 65) { stream[offset] = 0xFF }
        }
        #expect(Set(differing).isSubset(of: Set(flagged)), "differ from FFmpeg's decode: \(differing); flagged: \(flagged)")
        #expect(flagged.contains(7), "the damaged picture is flagged")
        #expect(flagged.allSatisfy { (7..<20).contains($0) }, "nothing before it, nothing from the next keyframe on: \(flagged)")
        // Pictures 1…7 in parts; 8…20 whole (damaged, then the IDR); 21…39 in parts again.
        #expect(inParts == 26, "pictures decoded slice by slice: \(inParts)")
    }

    /// A sender that leaves a slice out of a picture (a broken muxer; TCP itself loses nothing): decoded in parts,
    /// with concealment off, libavcodec says nothing of it, but the rows it reports skip the slice's macroblock rows.
    /// The picture and those after it are flagged until the next keyframe, as after damage; every frame that differs
    /// from FFmpeg's decode of the same bytes (which conceals the gap) is among them.
    @Test func aPictureMissingASliceIsFlaggedUntilTheNextKeyframe() throws {
        // The fourth slice, start code and all: about three macroblock rows.
        let (flagged, differing, inParts) = try publishDamaged("missing") { stream, starts in
            stream.removeSubrange(starts[3]..<starts[4])
        }
        #expect(differing.contains(7), "the picture lacks a slice: FFmpeg conceals it, the daemon cannot")
        #expect(Set(differing).isSubset(of: Set(flagged)), "differ from FFmpeg's decode: \(differing); flagged: \(flagged)")
        #expect(flagged.contains(7) && flagged.allSatisfy { (7..<20).contains($0) }, "flagged: \(flagged)")
        #expect(inParts == 26, "pictures decoded slice by slice: \(inParts)")
    }

    // MARK: - Every sender, every link

    struct LinkCase: Sendable, CustomTestStringConvertible {
        enum Kind: Sendable {
            /// The README's recipe: `ffmpeg -re -i FILE -c copy -f h264 tcp://…` (32 KiB writes, no TCP_NODELAY).
            case ffmpeg
            /// `filesrc ! h264parse ! tcpclientsink`, at GStreamer's defaults.
            case gstreamer
            /// `streamrecvctl send FILE tcp://…` at the file's own rate.
            case streamrecvctl
            /// Writes of 1 byte to 64 KiB with random pauses up to 30 ms.
            case pieces(seed: UInt64, noDelay: Bool)
            /// Each frame's bytes at a link rate in 1448-byte writes (TCP_NODELAY), 25 frames a second, with a
            /// 250 ms stall in the middle of every 30th frame (a retransmission).
            case linkRate(bitsPerSecond: Double)
        }
        var kind: Kind
        var codec = "h264"
        var slices = 8
        var cpuLoad = false
        /// B-frames (pictures come out reordered) and the daemon's decoder threads (slice threads).
        var bframes = 0
        var threads = 1

        var testDescription: String {
            "\(kind) \(codec) \(slices) slice(s)\(bframes > 0 ? ", \(bframes) B-frames" : "")"
                + "\(threads > 1 ? ", \(threads) slice threads" : "")\(cpuLoad ? " under CPU load" : "")"
        }
    }

    static let cases: [LinkCase] = [
        LinkCase(kind: .ffmpeg, slices: 1),
        LinkCase(kind: .ffmpeg, slices: 8),
        LinkCase(kind: .ffmpeg, slices: 8, bframes: 2, threads: 2),
        LinkCase(kind: .gstreamer),
        LinkCase(kind: .streamrecvctl),
        LinkCase(kind: .pieces(seed: 1, noDelay: true)),
        LinkCase(kind: .pieces(seed: 2, noDelay: false), slices: 1, cpuLoad: true),
        LinkCase(kind: .pieces(seed: 3, noDelay: true), codec: "h265", slices: 4),
        LinkCase(kind: .linkRate(bitsPerSecond: 20e6), slices: 1),
        LinkCase(kind: .linkRate(bitsPerSecond: 20e6), slices: 8, cpuLoad: true),
    ]

    @Test(arguments: cases)
    func everyFrameArrivesWholeWhateverTheSenderAndLink(_ link: LinkCase) throws {
        let frames = 60
        let directory = try TestEnvironment.temporaryDirectory()
        let parameters = "bframes=\(link.bframes):keyint=30:min-keyint=30:scenecut=0:crf=14:slices=\(link.slices)"
        let source = try GeneratedStreams.encode(codec: link.codec, size: "640x360", frames: frames,
                                                 encoderParameters: parameters, in: directory, name: "s.\(link.codec)")
        let reference = try referenceFrames(source.path, frameBytes: 640 * 360 * 3 / 2)
        #expect(reference.count == frames)
        let metricsPort = freePort()
        let daemon = try DaemonProcess(label: "link", settings: ["max_width": "640", "max_height": "368", "slots": "64",
                                                                 "threads": String(link.threads)],
                                       daemonSettings: ["metrics": "\"127.0.0.1:\(metricsPort)\""])
        let load = link.cpuLoad ? try (0..<2).map { _ in try WatchedProcess("/bin/sh", ["-c", "while :; do :; done"]) } : []
        // SIGKILL: the busy shells outlive SIGTERM here.
        defer { for process in load { kill(process.process.processIdentifier, SIGKILL); process.process.waitUntilExit() } }
        try send(source.path, over: link, to: daemon.port)
        #expect(daemon.waitUntilPublished(UInt64(frames)), "\(daemon.log.suffix(2000))")
        let published = ringFrames(daemon.shmName, count: frames)
        #expect(published.count == frames)
        let damaged = published.filter { $0.info.flags.contains(.corrupt) }.count
        #expect(damaged == 0, "frames flagged corrupt: \(daemon.log.split(separator: "\n").filter { $0.contains("warning") }.suffix(5))")
        let wrong = zip(published, reference).filter { $0.0.pixels != $0.1 }.count
        #expect(wrong == 0, "frames that differ from FFmpeg's")
        // H.264 over TCP is decoded slice by slice, every picture of several slices but the two IDR pictures; H.265
        // whole. (A picture of one slice is decoded whole when the next access unit's first bytes came with its end.)
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        let inParts = sample(body, "streamrecvd_pictures_decoded_in_parts_total", "stream=\"\(daemon.name)\"") ?? -1
        let written = sample(body, "streamrecvd_frames_written_while_decoded_total", "stream=\"\(daemon.name)\"") ?? -1
        if link.codec == "h265" {
            #expect(inParts == 0 && written == 0)
        } else if link.slices > 1 {
            #expect(inParts == Double(frames - 2), "pictures decoded in parts: \(inParts)")
            // Without decoder threads the rows of each picture in parts go into its slot as its slices are decoded:
            // all but the first, which shows where a frame lies in its picture.
            #expect(written == (link.threads == 1 ? inParts - 1 : 0), "frames written while decoded: \(written)")
        }
    }

    private func send(_ path: String, over link: LinkCase, to port: Int) throws {
        let muxer = link.codec == "h264" ? "h264" : "hevc"
        switch link.kind {
        case .ffmpeg:
            _ = try runChecked("ffmpeg", ["-v", "error", "-re", "-i", path, "-c", "copy", "-f", muxer, "tcp://127.0.0.1:\(port)"])
        case .gstreamer:
            let parse = link.codec == "h264" ? "h264parse ! video/x-h264" : "h265parse ! video/x-h265"
            _ = try runChecked("/bin/sh", ["-c", "gst-launch-1.0 -q filesrc location=\(path) ! \(parse),stream-format=byte-stream,alignment=au ! tcpclientsink host=127.0.0.1 port=\(port)"])
        case .streamrecvctl:
            _ = try runChecked(tool("streamrecvctl"), ["send", path, "tcp://127.0.0.1:\(port)"])
        case .pieces(let seed, let noDelay):
            let stream = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            let sender = try Sender(port: port)
            if noDelay { sender.setNoDelay() }
            var generator = SeededGenerator(seed: seed)
            var offset = 0
            while offset < stream.count {
                let size = min(stream.count - offset, Int(exp2(Double.random(in: 0...16, using: &generator))))
                try sender.send(stream[offset..<(offset + size)])
                offset += size
                if Double.random(in: 0..<1, using: &generator) < 0.3 { usleep(UInt32.random(in: 0...30_000, using: &generator)) }
            }
            sender.close()
        case .linkRate(let bitsPerSecond):
            let stream = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            let offsets = StreamFacts(stream).accessUnitOffsets + [stream.count]
            let sender = try Sender(port: port)
            sender.setNoDelay()
            let start = monotonicSeconds()
            var clock = start
            for frame in 0..<(offsets.count - 1) {
                clock = max(clock, start + Double(frame) / 25)
                var offset = offsets[frame]
                let stallAt = frame % 30 == 15 ? (offsets[frame] + offsets[frame + 1]) / 2 : nil
                while offset < offsets[frame + 1] {
                    let end = min(offsets[frame + 1], offset + 1448)
                    sleepUntil(clock)
                    try sender.send(stream[offset..<end])
                    clock += Double(end - offset) * 8 / bitsPerSecond
                    if let stallAt, offset < stallAt, end >= stallAt { clock += 0.25 }
                    offset = end
                }
            }
            sender.close()
        }
    }
}

/// Every frame of a stream, with its metadata, read in-process once the stream has ended (the ring has more slots
/// than the stream has frames: none is lapped).
func ringFrames(_ shmName: String, count: Int) -> [(pixels: [UInt8], info: FrameInfo)] {
    guard let reader = try? FrameRingReader(shmName: shmName) else { return [] }
    var frames: [(pixels: [UInt8], info: FrameInfo)] = []
    var pixels: [UInt8] = []
    var previous: UInt64 = 0
    while frames.count < count, case .frame(let info) = reader.next(after: previous, into: &pixels, timeoutNanoseconds: 2_000_000_000) {
        frames.append((PlanarConversion.planar(pixels, layout: info.layout), info))
        previous = info.sequence
    }
    return frames
}

func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

func sleepUntil(_ deadline: Double) {
    let wait = deadline - monotonicSeconds()
    if wait > 0 { usleep(UInt32(wait * 1e6)) }
}

extension Sender {
    /// Every write goes out at once (no Nagle), as a paced low-latency sender does.
    func setNoDelay() {
        var on: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
    }
}
