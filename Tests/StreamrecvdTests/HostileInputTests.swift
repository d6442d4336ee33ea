import Bitstream
import FrameFormats
import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// A valid 10-frame GOP (x264, 160x96) and FFmpeg's frames for it: what must decode bit-exact after each attack.
struct ValidGOP {
    let stream: [UInt8]
    let reference: [[UInt8]]
    let units: [[UInt8]]  // its NAL units, start codes removed

    init(codec: String = "h264") throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: codec, size: "160x96", frames: 10, encoderParameters: "bframes=0",
                                              in: directory, name: "gop.\(codec)")
        stream = [UInt8](try Data(contentsOf: url))
        reference = try referenceFrames(url.path, frameBytes: 160 * 96 * 3 / 2)
        var found: [[UInt8]] = []
        var splitter = AnnexBSplitter()
        splitter.append(stream) { found.append(Array($0.bytes)) }
        splitter.flush { found.append(Array($0.bytes)) }
        units = found
    }
}

/// One daemon per transport takes every attack in turn; after each, a fresh sender's valid GOP must come out
/// bit-exact, the daemon must still run, and the attack must have left a log line (and, where there is one, a count).
final class HostileHarness {
    let daemon: DaemonProcess
    let gop: ValidGOP
    let transport: String
    let metricsPort = freePort()
    /// What the attacks must have logged, checked once at the end: repeated warnings of one kind are
    /// rate-limited (one line per 10 s per kind), so a later attack of a kind already logged adds no line.
    private(set) var expectedLog: [(attack: String, text: String)] = []

    /// Datagram streams let a new source take over at once (the attack's source would otherwise hold the stream
    /// until idle_timeout).
    init(transport: String = "tcp", settings: [String: String] = [:]) throws {
        gop = try ValidGOP()
        self.transport = transport
        daemon = try DaemonProcess(label: "hostile\(transport)", settings: [
            "max_width": "320", "max_height": "240", "slots": "32", "max_access_unit_bytes": "65536",
            "idle_timeout": "2", "output": "\"native\"", "second_sender": transport == "tcp" ? "\"refuse\"" : "\"takeover\"",
        ].merging(settings) { $1 }, daemonSettings: ["metrics": "\"127.0.0.1:\(metricsPort)\""], transport: transport)
    }

    /// The stream's defect counter of `kind` (streamrecvd_stream_defects_total), or another counter by name.
    /// `name` may carry more labels after a comma: `streamrecvd_frames_dropped_total,reason="too_large"`.
    func counter(_ name: String, kind: String? = nil) -> Double {
        let body = (try? httpGet(port: metricsPort, path: "/metrics").body) ?? ""
        let parts = name.split(separator: ",", maxSplits: 1)
        let labels = "stream=\"\(daemon.name)\"" + (kind.map { ",kind=\"\($0)\"" } ?? "") + (parts.count > 1 ? ",\(parts[1])" : "")
        return sample(body, String(parts[0]), labels) ?? -1
    }

    /// Every expected text must be somewhere in the daemon's log.
    func expectLoggedEverything(sourceLocation: SourceLocation = #_sourceLocation) {
        let log = daemon.log
        for (attack, text) in expectedLog where !log.contains(text) {
            Issue.record("\(attack): nothing logged with '\(text)'", sourceLocation: sourceLocation)
        }
        // libavcodec's complaints come through the daemon's logger (rate-limited), never raw on stderr.
        #expect(!log.contains("[h264 @") && !log.contains("[hevc @"), "raw libavcodec lines in the log", sourceLocation: sourceLocation)
    }

    /// Sends `bytes` on one connection, half-closes it and waits for the daemon to close its side (so that the
    /// next connection is not refused as a second sender).
    func sendTCP(_ bytes: [UInt8]) throws {
        let sender = try Sender(port: daemon.port)
        try? sender.send(bytes[...])
        Glibc.shutdown(sender.descriptor, Int32(SHUT_WR))
        _ = sender.closedByPeer(within: 10)
    }

    /// Waits until the daemon is back to waiting with at least `published` frames, then checks the last 10
    /// frames against the GOP's reference.
    func expectValidGOPDecodes(after published: UInt64, _ label: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let deadline = Date().addingTimeInterval(30)
        var status = daemon.status
        while Date() < deadline {
            status = daemon.status
            if let status, status.counters.framesPublished >= published + 10, status.state == .waiting { break }
            usleep(20_000)
        }
        guard let status, status.latestSequence >= 10, let reader = try? FrameRingReader(shmName: daemon.shmName) else {
            Issue.record("\(label): the valid GOP was not published\n\(daemon.log.suffix(1500))", sourceLocation: sourceLocation)
            return
        }
        var frames: [[UInt8]] = []
        var pixels: [UInt8] = []
        for sequence in (status.latestSequence - 9)...status.latestSequence {
            if case .frame(let info) = reader.read(sequence: sequence, into: &pixels) {
                frames.append(PlanarConversion.planar(pixels, layout: info.layout))
            }
        }
        #expect(frames == gop.reference, "\(label): the next GOP is not bit-exact\n\(daemon.log.suffix(1500))", sourceLocation: sourceLocation)
        #expect(daemon.isRunning, "\(label): the daemon died", sourceLocation: sourceLocation)
    }

    /// One attack: `attack` runs, then a valid GOP on a new connection. `counted` (a defect kind, or a counter's
    /// name) must have grown, and `logged` must be in the log by the end of the test.
    func attack(
        _ label: String, logged: String?, counted: String? = nil, sourceLocation: SourceLocation = #_sourceLocation,
        _ attack: () throws -> Void
    ) throws {
        let published = daemon.status?.counters.framesPublished ?? 0
        let read = { (name: String) -> Double in
            name.hasPrefix("streamrecvd_") ? self.counter(name) : self.counter("streamrecvd_stream_defects_total", kind: name)
        }
        let before = counted.map(read)
        try attack()
        switch transport {
        case "tcp": try sendTCP(gop.stream)
        case "rtp": try sendValidRTP()
        default: sendDatagrams(stride(from: 0, to: gop.stream.count, by: 1316).map { Array(gop.stream[$0..<min($0 + 1316, gop.stream.count)]) },
                               port: daemon.port, pauseMicroseconds: 300)
        }
        expectValidGOPDecodes(after: published, label, sourceLocation: sourceLocation)
        if let logged { expectedLog.append((label, logged)) }
        if let counted, let before {
            let after = read(counted)
            #expect(after > before && before >= 0, "\(label): \(counted) went from \(before) to \(after)", sourceLocation: sourceLocation)
        }
    }

    private func sendValidRTP() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let file = directory.appendingPathComponent("gop.h264")
        try Data(gop.stream).write(to: file)
        sendDatagrams(try captureRTP(of: file.path), port: daemon.port, pauseMicroseconds: 300)
    }
}

/// NAL unit helpers for building attacks.
func nal(_ header: UInt8, _ payload: [UInt8]) -> [UInt8] { [0, 0, 0, 1, header] + payload }

/// An H.264 SPS with the given picture size in macroblocks (Baseline, 4:2:0, POC type 2).
func craftedSPS(widthInMacroblocks: UInt64, heightInMapUnits: UInt64, id: UInt64 = 0, level: UInt64 = 30) -> [UInt8] {
    var writer = BitWriter()
    writer.u(8, 66)          // profile_idc: Baseline
    writer.u(8, 0)           // constraint flags
    writer.u(8, level)
    writer.ue(id)            // seq_parameter_set_id
    writer.ue(0)             // log2_max_frame_num_minus4
    writer.ue(2)             // pic_order_cnt_type
    writer.ue(1)             // max_num_ref_frames
    writer.flag(false)       // gaps_in_frame_num_value_allowed_flag
    writer.ue(widthInMacroblocks - 1)
    writer.ue(heightInMapUnits - 1)
    writer.flag(true)        // frame_mbs_only_flag
    writer.flag(true)        // direct_8x8_inference_flag
    writer.flag(false)       // frame_cropping_flag
    writer.flag(false)       // vui_parameters_present_flag
    writer.trailingBits()
    return nal(0x67, escapeRBSP(writer.bytes))
}

@Suite(.serialized) struct HostileInputTests {
    @Test func tcpAttacks() throws {
        let harness = try HostileHarness()
        let gop = harness.gop
        var random = SeededGenerator(seed: 7)
        let sps = gop.units.first { $0.first.map { $0 & 0x1F == 7 } ?? false }!
        let pps = gop.units.first { $0.first.map { $0 & 0x1F == 8 } ?? false }!
        let slices = gop.units.filter { $0.first.map { [1, 5].contains($0 & 0x1F) } ?? false }

        try harness.attack("random bytes", logged: "discarded", counted: "streamrecvd_discarded_bytes_total") {
            try harness.sendTCP((0..<65536).map { _ in UInt8.random(in: 0...255, using: &random) })
        }
        try harness.attack("zeros (trailing_zero_8bits are legal: nothing to count)", logged: nil) { try harness.sendTCP([UInt8](repeating: 0, count: 65536)) }
        try harness.attack("start-code flood", logged: "start codes with no NAL unit", counted: "empty_nal_unit") {
            try harness.sendTCP(Array([[UInt8]](repeating: [0, 0, 1], count: 20000).joined()))
        }
        try harness.attack("NAL at the size limit", logged: nil) {
            try harness.sendTCP(nal(0x0C, [UInt8](repeating: 0xFF, count: 65536 - 8)))  // filler data
        }
        try harness.attack("NAL over the size limit", logged: "NAL unit over 65536 bytes discarded", counted: "oversized_nal_unit") {
            try harness.sendTCP(nal(0x65, [UInt8](repeating: 0x55, count: 200_000)))
        }
        try harness.attack("truncated NALs at every boundary", logged: "parameter_set_rejected", counted: "parameter_set_rejected") {
            var bytes: [UInt8] = []
            for unit in [sps, pps, slices[0]] {
                for cut in stride(from: 1, to: unit.count, by: max(1, unit.count / 12)) { bytes += [0, 0, 0, 1] + unit[..<cut] }
            }
            try harness.sendTCP(bytes)
        }
        try harness.attack("forbidden_zero_bit set", logged: "forbidden_bit", counted: "forbidden_bit") {
            // After the codec is known (before it, any NAL unit counts as before_codec_detected).
            try harness.sendTCP([0, 0, 0, 1] + sps + [0, 0, 0, 1] + pps + nal(0x80 | 0x65, Array(slices[0].dropFirst())))
        }
        try harness.attack("absurd SPS values", logged: "parameter_set_rejected", counted: "parameter_set_rejected") {
            try harness.sendTCP(craftedSPS(widthInMacroblocks: 60_000, heightInMapUnits: 60_000)
                + craftedSPS(widthInMacroblocks: 10, heightInMapUnits: 10, level: 255))
        }
        try harness.attack("SPS over the configured maximum size", logged: "larger than max_width", counted: "streamrecvd_frames_dropped_total,reason=\"too_large\"") {
            let big = try generated("h264", size: "640x480", frames: 2)
            try harness.sendTCP(big)
        }
        try harness.attack("PPS without SPS", logged: "parameter_set_rejected", counted: "parameter_set_rejected") {
            var writer = BitWriter()
            writer.ue(3); writer.ue(17)  // pps id 3 referring to SPS 17 (> 31: invalid)
            writer.trailingBits()
            try harness.sendTCP(nal(0x68, writer.bytes) + nal(0x68, [0xFF, 0xFF]))
        }
        try harness.attack("slices before any parameter set", logged: "before_codec_detected", counted: "before_codec_detected") {
            try harness.sendTCP(Array(slices.map { [0, 0, 0, 1] + $0 }.joined()))
        }
        try harness.attack("slices whose PPS never came", logged: "slice_header", counted: "slice_header") {
            try harness.sendTCP([0, 0, 0, 1] + sps + Array(slices.map { [0, 0, 0, 1] + $0 }.joined()))
        }
        try harness.attack("parameter-set storm", logged: nil) {
            var bytes: [UInt8] = []
            for index in 0..<200 {
                bytes += craftedSPS(widthInMacroblocks: UInt64(2 + index % 7), heightInMapUnits: 2, id: UInt64(index % 32))
            }
            try harness.sendTCP(bytes)
        }
        try harness.attack("codec switch inside one connection", logged: nil) {
            try harness.sendTCP(try generated("h265", frames: 3) + gop.stream)
        }
        try harness.attack("garbage after every NAL unit (it becomes trailing payload)", logged: nil) {
            var bytes: [UInt8] = []
            for unit in gop.units { bytes += [0, 0, 0, 1] + unit + (0..<50).map { _ in UInt8.random(in: 1...255, using: &random) } }
            try harness.sendTCP(bytes)
        }
        try harness.attack("SEI with absurd sizes", logged: nil) {
            try harness.sendTCP(nal(0x06, [5] + [UInt8](repeating: 0xFF, count: 300) + [1, 2, 3]) + nal(0x06, [0xFF, 0xFF, 0x01]))
        }
        try harness.attack("end-of-stream and delimiter storms", logged: nil) {
            try harness.sendTCP(Array([[UInt8]](repeating: nal(0x09, [0xF0]) + nal(0x0B, []) + nal(0x0A, []), count: 5000).joined()))
        }
        try harness.attack("emulation prevention everywhere", logged: nil) {
            try harness.sendTCP(nal(0x65, Array([[UInt8]](repeating: [0, 0, 3], count: 3000).joined())))
        }
        try harness.attack("a sender that never sends", logged: "idle_timeout") {
            let silent = try Sender(port: harness.daemon.port)
            #expect(silent.closedByPeer(within: 10), "an idle sender is disconnected")
        }
        try harness.attack("a sender at 1 byte per second", logged: "sender disconnected") {
            let slow = try Sender(port: harness.daemon.port)
            for byte in gop.stream.prefix(3) {
                try slow.send([byte][...])
                sleep(1)
            }
            slow.close()
            _ = slow.closedByPeer(within: 5)
        }
        try harness.attack("sender killed mid-NAL", logged: "sender disconnected") {
            try harness.sendTCP(Array(gop.stream.prefix(gop.stream.count / 2)))
        }
        harness.expectLoggedEverything()
        #expect(harness.daemon.stop() == 0)
    }

    @Test func rtpAttacks() throws {
        let harness = try HostileHarness(transport: "rtp", settings: ["codec": "\"h264\""])
        var random = SeededGenerator(seed: 11)
        func rtp(_ payload: [UInt8], sequence: UInt16, payloadType: UInt8 = 96, marker: Bool = false) -> [UInt8] {
            [0x80, (marker ? 0x80 : 0) | payloadType, UInt8(sequence >> 8), UInt8(sequence & 0xFF), 0, 0, 0x10, 0,
             0x12, 0x34, 0x56, 0x78] + payload
        }
        try harness.attack("RTP with a wrong payload type", logged: "wrong_payload_type", counted: "streamrecvd_rtp_payloads_dropped_total") {
            sendDatagrams((0..<20).map { rtp([0x65, 1, 2, 3], sequence: UInt16($0), payloadType: 33) }, port: harness.daemon.port)
        }
        try harness.attack("bad FU-A sequences", logged: "fragment_without_start", counted: "streamrecvd_rtp_payloads_dropped_total") {
            // End without start, start twice, a middle fragment alone.
            sendDatagrams([rtp([0x7C, 0x45, 1, 2], sequence: 100), rtp([0x7C, 0x85, 1], sequence: 101),
                           rtp([0x7C, 0x85, 2], sequence: 102), rtp([0x7C, 0x05, 3], sequence: 104)], port: harness.daemon.port)
        }
        try harness.attack("STAP-A with a huge count", logged: "malformed_aggregation", counted: "streamrecvd_rtp_payloads_dropped_total") {
            var payload: [UInt8] = [0x78]
            for _ in 0..<2000 { payload += [0, 1, 0x09] }  // 2000 one-byte NAL units
            payload += [0xFF, 0xFF, 0x65]                    // a length past the end
            sendDatagrams([rtp(payload, sequence: 200)], port: harness.daemon.port)
        }
        try harness.attack("malformed RTP headers", logged: "not RTP") {
            let malformed: [[UInt8]] = [
                [0x00, 96, 0, 1],                                          // too short, version 0
                [0x40] + [UInt8](repeating: 0, count: 20),                 // version 1
                [0x8F, 96, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1],                  // 15 CSRCs announced, none present
                [0x90, 96, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0xFF, 0xFF], // extension longer than the packet
                [0xA0, 96, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0x65, 200],       // padding longer than the payload
            ]
            sendDatagrams(malformed, port: harness.daemon.port)
        }
        try harness.attack("random datagrams", logged: nil) {
            sendDatagrams((0..<200).map { _ in (0..<Int.random(in: 1...1400, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) } },
                          port: harness.daemon.port, pauseMicroseconds: 100)
        }
        harness.expectLoggedEverything()
        #expect(harness.daemon.stop() == 0)
    }

    @Test func rawUDPRandomDatagrams() throws {
        let harness = try HostileHarness(transport: "udp")
        var random = SeededGenerator(seed: 13)
        try harness.attack("random datagrams over raw UDP", logged: "discarded", counted: "streamrecvd_discarded_bytes_total") {
            sendDatagrams((0..<100).map { _ in (0..<1316).map { _ in UInt8.random(in: 0...255, using: &random) } }, port: harness.daemon.port)
        }
        harness.expectLoggedEverything()
        #expect(harness.daemon.stop() == 0)
    }
}
