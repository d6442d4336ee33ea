import Bitstream
import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

/// libavcodec's complaints about a broken stream reach the log limited by kind and by stream: a stream whose SPS
/// does not match its slices made libavcodec write "error while decoding MB x y, bytestream n" with other numbers
/// every time, which a limit keyed by the text never held back (2292 lines a minute).
@Suite(.serialized) struct LibraryLogTests {
    /// The SPS and PPS of a 160x96 encode before every IDR of a 320x240 one's slices: every picture is damaged.
    static func mismatchedStream(in directory: URL) throws -> [UInt8] {
        func units(_ size: String, _ name: String) throws -> [[UInt8]] {
            let url = try GeneratedStreams.encode(codec: "h264", size: size, frames: 25, encoderParameters: "bframes=0:keyint=25",
                                                  in: directory, name: name)
            var found: [[UInt8]] = []
            var splitter = AnnexBSplitter()
            let stream = [UInt8](try Data(contentsOf: url))
            splitter.append(stream) { found.append(Array($0.bytes)) }
            splitter.flush { found.append(Array($0.bytes)) }
            return found
        }
        let parameterSets = try units("160x96", "small.h264").filter { [7, 8].contains($0[0] & 0x1f) }
        var stream: [UInt8] = []
        for slice in try units("320x240", "large.h264") where [1, 5].contains(slice[0] & 0x1f) {
            if slice[0] & 0x1f == 5 { for set in parameterSets { stream += [0, 0, 0, 1] + set } }
            stream += [0, 0, 0, 1] + slice
        }
        return stream
    }

    @Test func anSPSThatDoesNotMatchItsSlicesGivesAFewLinesNotOnePerMacroblockRow() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let stream = try Self.mismatchedStream(in: directory)
        let metricsPort = freePort()
        let daemon = try DaemonProcess(label: "avlogflood", settings: ["max_width": "320", "max_height": "240"],
                                       daemonSettings: ["metrics": "\"127.0.0.1:\(metricsPort)\""])
        // 12 s of it: past one 10 s window of the limit.
        let sender = try Sender(port: daemon.port)
        let end = Date().addingTimeInterval(12)
        var passes = 0
        while Date() < end {
            try sender.sendPaced(stream, pauseMicroseconds: 8_000)
            passes += 1
        }
        sender.close()
        #expect(daemon.waitUntilPublished(1, timeout: 20))
        let lines = daemon.log.split(separator: "\n").filter { $0.contains("libavcodec:") }
        // At most 4 lines per stream per 10 s, across kinds of message: two windows here.
        #expect(lines.count >= 1 && lines.count <= 8, "\(lines.count) libavcodec lines for \(passes) passes:\n\(lines.joined(separator: "\n"))")
        #expect(lines.allSatisfy { $0.contains("stream=\(daemon.name)") }, "\(lines.joined(separator: "\n"))")
        #expect(lines.contains { $0.contains("more libavcodec messages suppressed") }, "\(lines.joined(separator: "\n"))")
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        let labels = "stream=\"\(daemon.name)\""
        let published = sample(body, "streamrecvd_frames_published_total", labels) ?? -1
        let corrupt = sample(body, "streamrecvd_frames_corrupt_total", labels) ?? -1
        // Not one picture is what an encoder made: none is published without the corrupt flag.
        #expect(published > 0 && corrupt == published, "\(published) frames published, \(corrupt) flagged corrupt")
        #expect(daemon.isRunning)
    }
}
