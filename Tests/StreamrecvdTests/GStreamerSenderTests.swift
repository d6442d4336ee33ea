import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

/// GStreamer as the sender, as many real deployments have it: `videotestsrc ! x264enc/x265enc ! parse !` the
/// payloader and sink under test. A tee writes the very elementary stream that was sent into a file, and FFmpeg's
/// decode of that file is the reference the daemon's frames (read by `streamrecvctl cat`) must equal.
@Suite(.serialized) struct GStreamerSenderTests {
    static let frames = 45

    func expectBitExact(label: String, codec: String, transport: String, encoder: String, sink: String) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let sent = directory.appendingPathComponent("sent.\(codec)").path
        let daemon = try DaemonProcess(label: label, settings: [
            "max_width": "320", "max_height": "240", "slots": String(Self.frames + 8), "output": "\"auto\"",
            "idle_timeout": "3", "codec": "\"\(codec)\"",
        ], transport: transport)
        let cat = try CatProcess(stream: daemon.name, frames: Self.frames, segmented: true, directory: directory)
        let pipeline = [
            "videotestsrc", "num-buffers=\(Self.frames)", "pattern=ball", "is-live=true", "!",
            "video/x-raw,format=I420,width=320,height=240,framerate=30/1", "!",
        ] + encoder.split(separator: " ").map(String.init) + [
            "!", "\(codec)parse", "!", "video/x-\(codec),stream-format=byte-stream,alignment=au", "!",
            "tee", "name=t", "t.", "!", "queue", "!",
        ] + sink.replacingOccurrences(of: "PORT", with: String(daemon.port)).split(separator: " ").map(String.init) + [
            "t.", "!", "queue", "!", "filesink", "location=\(sent)",
        ]
        try runChecked("gst-launch-1.0", ["-q"] + pipeline)
        let (status, errors) = cat.finish()
        #expect(status == 0, "\(label): cat exited \(status): \(errors)\n\(daemon.log.suffix(3000))")
        let stream = [UInt8](try Data(contentsOf: URL(fileURLWithPath: sent)))
        let reference = try referenceMD5s(stream, facts: StreamFacts(stream), directory: directory)
        #expect(reference.count == Self.frames)
        let difference = firstDifference(try catMD5s(cat), reference)
        #expect(difference == nil, "\(label): \(difference ?? "")")
        if transport == "rtp" {
            // pts is the RTP timestamp: presentation order at 30 fps is steps of 3000 (90 kHz), B-frames included.
            let pts = readFrames(daemon.shmName, count: Self.frames).map(\.pts)
            #expect(pts.count == Self.frames && zip(pts, pts.dropFirst()).allSatisfy { $1 - $0 == 3000 }, "\(pts)")
        }
        #expect(daemon.isRunning)
    }

    @Test func x264WithBFramesOverRTP() throws {
        try expectBitExact(label: "gstrtp264", codec: "h264", transport: "rtp",
                           encoder: "x264enc speed-preset=ultrafast bframes=2 key-int-max=15",
                           sink: "rtph264pay pt=96 mtu=1200 ! udpsink host=127.0.0.1 port=PORT")
    }

    /// rtph264pay with config-interval puts SPS and PPS before every IDR slice, so between the slices of one
    /// picture: by H.264's rules that starts a new access unit, and the daemon published each IDR as two damaged
    /// halves (FFmpeg's RTP reading keeps the picture whole; so must we). Four slices a picture (WebRTC encoders
    /// slice too).
    @Test func x264SlicedWithParameterSetsBeforeEveryIDRSliceOverRTP() throws {
        try expectBitExact(label: "gstrtpslices", codec: "h264", transport: "rtp",
                           encoder: "x264enc speed-preset=ultrafast tune=zerolatency key-int-max=15 option-string=slices=4",
                           sink: "rtph264pay pt=96 mtu=1200 config-interval=-1 aggregate-mode=zero-latency ! udpsink host=127.0.0.1 port=PORT")
    }

    @Test func x265OverRTP() throws {
        try expectBitExact(label: "gstrtp265", codec: "h265", transport: "rtp",
                           encoder: "x265enc speed-preset=ultrafast tune=zerolatency key-int-max=15",
                           sink: "rtph265pay pt=96 mtu=1200 ! udpsink host=127.0.0.1 port=PORT")
    }

    /// Raw Annex B, one access unit per datagram.
    @Test func x264RawOverUDP() throws {
        try expectBitExact(label: "gstudp", codec: "h264", transport: "udp",
                           encoder: "x264enc speed-preset=ultrafast tune=zerolatency key-int-max=15",
                           sink: "udpsink host=127.0.0.1 port=PORT")
    }

    @Test func x264OverTCP() throws {
        try expectBitExact(label: "gsttcp", codec: "h264", transport: "tcp",
                           encoder: "x264enc speed-preset=ultrafast tune=zerolatency key-int-max=15",
                           sink: "tcpclientsink host=127.0.0.1 port=PORT")
    }
}
