import FrameFormats
import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// Descriptors, the journal, and datagrams lost on the way in: what a busy or hostile machine takes from the
/// daemon must not stop the video, flood the log, or let a damaged frame out unflagged.
@Suite(.serialized) struct ResourceTests {
    /// 200 idle connections to /metrics under a limit of 64 descriptors: the endpoint takes at most 16, closes the
    /// rest at once (counted, logged once), the video sender still connects and streams, and /metrics answers
    /// again once the idle ones time out.
    @Test func idleMetricsConnectionsCannotStarveTheVideo() throws {
        let metricsPort = freePort()
        let daemon = try DaemonProcess(label: "fdmetrics", settings: ["max_width": "160", "max_height": "96", "slots": "32"],
                                       daemonSettings: ["metrics": "\"127.0.0.1:\(metricsPort)\""], start: false)
        try daemon.start(limit: "--nofile=64")
        var idle: [Sender] = []
        for _ in 0..<200 {
            guard let connection = try? Sender(port: metricsPort) else { break }
            idle.append(connection)
        }
        usleep(500_000)
        let stream = try generated("h264", frames: 10)
        try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: 10_000)
        let deadline = Date().addingTimeInterval(20)
        while (try? FrameRingReader(shmName: daemon.shmName))?.status.counters.framesPublished ?? 0 < 10 && Date() < deadline { usleep(20_000) }
        #expect((try FrameRingReader(shmName: daemon.shmName)).status.counters.framesPublished == 10)
        #expect(daemon.isRunning)
        let text = daemon.log
        #expect(text.contains("metrics endpoint: 16 connections open, none that may be given up for this one; closing new ones"), "\(text.suffix(1500))")
        #expect(text.components(separatedBy: "; closing new ones").count - 1 <= 2, "rate-limited")
        idle.removeAll()
        // The endpoint answers again once it has seen the idle ones close: within milliseconds on a quiet machine,
        // once more than 300 ms in a full parallel run (the request was closed unanswered). Asked again for 10 s.
        var (status, body) = (0, "")
        let answered = Date().addingTimeInterval(10)
        repeat {
            usleep(300_000)
            (status, body) = (try? httpGet(port: metricsPort, path: "/metrics")) ?? (0, "")
        } while status != 200 && Date() < answered
        #expect(status == 200)
        let refused = body.split(separator: "\n").first { $0.hasPrefix("streamrecvd_metrics_connections_refused_total ") }
            .flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
        #expect(refused >= 150, "\(refused) connections refused")
    }

    /// A stream whose SPS changes at every frame (two sizes in turn), and 5000 datagrams from a second source:
    /// a few lines each, not one or two per frame or per thousand datagrams.
    @Test func repeatedEventsAreLoggedByTimeNotByCount() throws {
        let daemon = try DaemonProcess(label: "logflood", settings: ["max_width": "320", "max_height": "240", "slots": "32"])
        let a = try generated("h264", size: "160x96", frames: 1)
        let b = try generated("h264", size: "176x96", frames: 1)
        var stream: [UInt8] = []
        for index in 0..<200 { stream += index % 2 == 0 ? a : b }
        try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: 0)
        #expect(daemon.waitUntilPublished(200, timeout: 60))
        let spsLines = daemon.log.split(separator: "\n").filter { $0.contains("SPS ") }.count
        let recreated = daemon.log.split(separator: "\n").filter { $0.contains("decoder recreated") }.count
        #expect(spsLines <= 6 && recreated <= 6, "\(spsLines) SPS lines, \(recreated) recreation lines for 200 changes")

        let udp = try DaemonProcess(label: "logflood2", settings: ["max_width": "160", "max_height": "96", "idle_timeout": "30"], transport: "udp")
        let first = try #require(boundDatagramSocket())
        let second = try #require(boundDatagramSocket(host: "127.0.0.2"))
        defer {
            close(first.descriptor)
            close(second.descriptor)
        }
        let gop = try generated("h264", frames: 10)
        sendDatagrams(datagrams(of: gop), port: udp.port, pauseMicroseconds: 1000, from: first.descriptor)
        sendDatagrams(Array(repeating: [0x00, 0x00, 0x01, 0x65], count: 5000), port: udp.port, pauseMicroseconds: 0, from: second.descriptor)
        sendDatagrams(datagrams(of: gop), port: udp.port, pauseMicroseconds: 1000, from: first.descriptor)
        // Counted once the daemon has taken every datagram (the line is written when its event loop gets to them).
        #expect(eventually { udp.log.contains("second sender ignored") }, "\(udp.log.suffix(2000))")
        _ = eventually(within: 5) { (udp.status?.counters.framesPublished ?? 0) >= 20 }
        let ignored = udp.log.split(separator: "\n").filter { $0.contains("second sender ignored") }.count
        #expect(ignored >= 1 && ignored <= 2, "\(ignored) lines for 5000 ignored datagrams")
    }

    /// Raw UDP has no sequence numbers. A small receive buffer and a flood from another source make the kernel
    /// drop some of the sender's datagrams: every published frame is either exactly one the sender encoded, in
    /// order, or flagged corrupt.
    @Test func datagramsLostOnTheWayInNeverLeaveAnUnflaggedDamagedFrame() throws {
        let metricsPort = freePort()
        let daemon = try DaemonProcess(label: "udpflood", settings: [
            "max_width": "640", "max_height": "360", "slots": "64", "idle_timeout": "30", "receive_buffer": "\"64K\"",
        ], daemonSettings: ["metrics": "\"127.0.0.1:\(metricsPort)\""], transport: "udp")
        let directory = try TestEnvironment.temporaryDirectory()
        let path = try GeneratedStreams.encode(codec: "h264", size: "640x360", frames: 60,
                                               encoderParameters: "keyint=15:bframes=0", in: directory, name: "f.h264").path
        let stream = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let reference = try referenceFrames(path, frameBytes: 640 * 360 * 3 / 2)
        let index = Dictionary(reference.enumerated().map { ($0.element, $0.offset) }, uniquingKeysWith: { first, _ in first })
        let sender = try #require(boundDatagramSocket())
        let flooder = try #require(boundDatagramSocket(host: "127.0.0.2"))
        defer {
            close(sender.descriptor)
            close(flooder.descriptor)
        }
        let stop = ManagedFlag()
        let port = daemon.port
        let flood = Thread {
            let garbage = [UInt8](repeating: 0x5A, count: 1400)
            while !stop.isSet { sendDatagrams(Array(repeating: garbage, count: 200), port: port, pauseMicroseconds: 0, from: flooder.descriptor) }
        }
        let reader = try FrameRingReader(shmName: daemon.shmName)
        let collected = CollectedFrames()
        let collector = Thread {
            var pixels: [UInt8] = []
            var previous: UInt64 = 0
            while case .frame(let info) = reader.next(after: previous, into: &pixels, timeoutNanoseconds: 3_000_000_000) {
                collected.frames.append((PlanarConversion.planar(pixels, layout: info.layout), info.flags))
                previous = info.sequence
            }
        }
        collector.start()
        // The sender's frames go in bursts (a frame's datagrams back to back), as an encoder sends them.
        let offsets = StreamFacts(stream).accessUnitOffsets + [stream.count]
        sendDatagrams(datagrams(of: Array(stream[..<offsets[1]])), port: port, pauseMicroseconds: 0, from: sender.descriptor)
        flood.start()
        // The flood covers the first two GOPs; the last two arrive on a quiet socket.
        for unit in 1..<(offsets.count - 1) {
            if unit == 30 { stop.set() }
            sendDatagrams(datagrams(of: Array(stream[offsets[unit]..<offsets[unit + 1]])), port: port, pauseMicroseconds: 0, from: sender.descriptor)
            usleep(30_000)
        }
        while !flood.isFinished || !collector.isFinished { usleep(20_000) }
        let frames = collected.frames
        var last = -1
        var unflaggedWrong = 0
        var exact = 0
        for frame in frames where !frame.flags.contains(.corrupt) {
            guard let position = index[frame.pixels], position > last else {
                unflaggedWrong += 1
                continue
            }
            last = position
            exact += 1
        }
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        let lost = sample(body, "streamrecvd_datagrams_lost_total", "stream=\"\(daemon.name)\"") ?? 0
        let positions = frames.map { frame in "\(index[frame.pixels].map(String.init) ?? "?")\(frame.flags.contains(.corrupt) ? "c" : "")" }
        print("udp flood frames (reference position, c = flagged): \(positions.joined(separator: " "))")
        print("udp flood: \(frames.count) frames published, \(frames.filter { $0.flags.contains(.corrupt) }.count) flagged, \(Int(lost)) datagrams lost")
        #expect(unflaggedWrong == 0, "\(unflaggedWrong) damaged frames published without the corrupt flag")
        #expect(lost > 0, "the flood made the kernel drop some of the sender's datagrams (else this test proves nothing)")
        #expect(exact >= 10, "after the flood, whole GOPs come out exact and unflagged (\(exact)): \(daemon.log.split(separator: "\n").filter { !$0.contains(" debug ") }.suffix(30).joined(separator: "\n"))")
        #expect(daemon.isRunning)
    }
}

/// Frames a reader thread collects, read by the test once that thread has finished.
final class CollectedFrames: @unchecked Sendable {
    var frames: [(pixels: [UInt8], flags: FrameFlags)] = []
}
