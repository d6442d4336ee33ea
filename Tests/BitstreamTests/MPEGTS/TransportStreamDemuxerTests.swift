@testable import Bitstream
import Foundation
import StreamrecvTestSupport
import Testing

/// The MPEG-TS demuxer against FFmpeg's: the video bytes it finds must be the ones `ffmpeg -c copy` extracts.
@Suite struct TransportStreamDemuxerTests {
    struct Demuxed {
        var payload: [UInt8] = []
        var pesStarts = 0
        var continuations = 0
        var pesEnds = 0
        var losses = 0
        var pts: [Int64] = []
        var streams: [TransportStreamEvent] = []
        var discarded: [TransportStreamDrop: Int] = [:]
    }

    static func demux(_ bytes: [UInt8], chunkSizes: [Int]) -> Demuxed {
        var demuxer = TransportStreamDemuxer()
        var result = Demuxed()
        var position = 0
        var next = 0
        while position < bytes.count {
            let size = chunkSizes[next % chunkSizes.count]
            next += 1
            let end = min(bytes.count, position + size)
            demuxer.append(Array(bytes[position..<end])) { event in
                switch event {
                case .payload(let bytes): result.payload += bytes
                case .pesStart(let pts, let startsAccessUnit):
                    result.pesStarts += 1
                    if !startsAccessUnit { result.continuations += 1 }
                    if let pts { result.pts.append(pts) }
                case .pesEnd: result.pesEnds += 1
                case .videoLost(let gap): result.losses += gap ? 1 : 1000
                case .discarded(let reason, let count): result.discarded[reason, default: 0] += count
                case .videoStream, .noSupportedVideo: result.streams.append(event)
                }
            }
            position = end
        }
        return result
    }

    /// A clip muxed by FFmpeg, and the elementary stream FFmpeg's own demuxer gets back from it.
    static func clip(codec: String, frames: Int) throws -> (ts: [UInt8], video: [UInt8]) {
        let directory = try TestEnvironment.temporaryDirectory()
        let ts = directory.appendingPathComponent("clip.ts")
        try runChecked("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-frames:v", String(frames),
                                  "-pix_fmt", "yuv420p"] + (codec == "h264" ? ["-c:v", "libx264", "-x264-params", "bframes=2"]
                                      : ["-c:v", "libx265", "-x265-params", "log-level=error"]) + ["-f", "mpegts", ts.path])
        let video = directory.appendingPathComponent("video")
        try runChecked("ffmpeg", ["-v", "error", "-y", "-i", ts.path, "-map", "0:v", "-c", "copy",
                                  "-f", codec == "h264" ? "h264" : "hevc", video.path])
        return (Array(try Data(contentsOf: ts)), Array(try Data(contentsOf: video)))
    }

    @Test(arguments: ["h264", "h265"])
    func videoBytesMatchFFmpegHoweverSplit(codec: String) throws {
        let (ts, video) = try Self.clip(codec: codec, frames: 30)
        for sizes in [[ts.count], [1316], [1, 187, 188, 189, 7, 1000], [1]] {
            let result = Self.demux(ts, chunkSizes: sizes)
            #expect(result.payload == video, "chunks \(sizes.prefix(3))")
            #expect(result.pesStarts == 30 && result.continuations == 0)
            #expect(result.losses == 0)
            #expect(result.discarded.isEmpty)
            #expect(result.streams.count == 1)
            if case .videoStream(let found, _) = result.streams.first { #expect(found.rawValue == codec) }
            #expect(result.pts.count == 30)
        }
    }

    @Test func aLostPacketIsOneLossAndGarbageIsSkipped() throws {
        let (ts, _) = try Self.clip(codec: "h264", frames: 20)
        let packets = stride(from: 0, to: ts.count, by: 188).map { Array(ts[$0..<$0 + 188]) }
        let whole = Self.demux(ts, chunkSizes: [1316])
        // The 40th packet carries video in the middle of a PES packet (no unit start).
        let cut = packets.indices.filter { packets[$0][1] & 0x40 == 0 && (Int(packets[$0][1] & 0x1f) << 8 | Int(packets[$0][2])) == 256 }[40]
        var damaged = packets
        damaged.remove(at: cut)
        var bytes = damaged.flatMap { $0 }
        let garbage: [UInt8] = [0x47, 1, 2, 3, 0x47, 0x47, 9]
        bytes.insert(contentsOf: garbage, at: 188 * 10)
        let result = Self.demux(bytes, chunkSizes: [1316, 100])
        #expect(result.losses == 1)
        #expect(result.discarded[.lostSync] == garbage.count)
        #expect(result.pesStarts == whole.pesStarts)
        let removed = packets[cut][3] & 0x20 != 0 ? 183 - Int(packets[cut][4]) : 184
        #expect(result.payload.count == whole.payload.count - removed)
    }

    @Test func boundedPESEndsAtItsLastByteAndUnsupportedProgramsAreReported() {
        var bytes = Self.pat(pmtPID: 0x100) + Self.pmt(streams: [(0x02, 0x101)])
        bytes += Self.pmt(streams: [(0x0f, 0x102), (0x24, 0x101)])
        let payload: [UInt8] = [0, 0, 0, 1, 0x40, 0x01, 0xaa, 0xbb]
        let pes: [UInt8] = [0, 0, 1, 0xe0, 0, UInt8(3 + 5 + payload.count), 0x80, 0x80, 5, 0x21, 0, 0x01, 0, 0x01] + payload
        bytes += Self.packet(pid: 0x101, unitStart: true, continuity: 0, payload: pes)
        let result = Self.demux(bytes, chunkSizes: [188])
        #expect(result.streams == [.noSupportedVideo(streamTypes: [0x02]), .videoStream(codec: .h265, pid: 0x101)])
        #expect(result.payload == payload)
        #expect(result.pesEnds == 1)
        #expect(result.pts == [0])
        #expect(result.discarded[.outsidePES] == 188 - 4 - pes.count)
    }

    @Test func damagedSectionsAndScrambledVideoAreDropped() {
        var pat = Self.pat(pmtPID: 0x100)
        pat[20] ^= 0xff
        var bytes = pat + Self.pat(pmtPID: 0x100) + Self.pmt(streams: [(0x1b, 0x101)])
        var scrambled = Self.packet(pid: 0x101, unitStart: true, continuity: 0, payload: [0, 0, 1, 0xe0, 0, 0, 0x80, 0, 0, 0, 0, 0, 1, 9])
        scrambled[3] |= 0x80
        var broken = scrambled
        broken[1] |= 0x80
        bytes += scrambled + broken
        let result = Self.demux(bytes, chunkSizes: [188])
        #expect(result.discarded[.malformedSection] ?? 0 > 0)
        #expect(result.discarded[.scrambled] == 184)
        #expect(result.discarded[.transportError] == 188)
        #expect(result.streams == [.videoStream(codec: .h264, pid: 0x101)])
        #expect(result.payload.isEmpty)
    }

    /// A PES packet without PTS or alignment continues the access unit before it; an unusable PES header and a
    /// program that switches streams mid-packet are holes, not continuity gaps.
    @Test func continuationsBrokenHeadersAndProgramSwitches() {
        var bytes = Self.pat(pmtPID: 0x100) + Self.pmt(streams: [(0x1b, 0x101)])
        let start: [UInt8] = [0, 0, 1, 0xe0, 0, 0, 0x80, 0x80, 5, 0x21, 0, 0x01, 0, 0x01, 0, 0, 0, 1, 0x09, 0xf0]
        let continuation: [UInt8] = [0, 0, 1, 0xe0, 0, 0, 0x80, 0x00, 0, 0xaa, 0xbb]
        let broken: [UInt8] = [0, 0, 1, 0xe0, 0, 0, 0x00, 0x80, 5]  // the marker bits of the optional header are not 10
        bytes += Self.packet(pid: 0x101, unitStart: true, continuity: 0, payload: start)
        bytes += Self.packet(pid: 0x101, unitStart: true, continuity: 1, payload: continuation)
        bytes += Self.packet(pid: 0x101, unitStart: true, continuity: 2, payload: broken)
        bytes += Self.packet(pid: 0x101, unitStart: true, continuity: 3, payload: start)
        bytes += Self.pmt(streams: [(0x24, 0x102)])
        let result = Self.demux(bytes, chunkSizes: [188])
        #expect(result.pesStarts == 3 && result.continuations == 1)
        #expect(result.losses == 2000, "two holes, no continuity gap: \(result.losses)")
        #expect(result.discarded[.malformedPES] == 184)
        #expect(result.streams == [.videoStream(codec: .h264, pid: 0x101), .videoStream(codec: .h265, pid: 0x102)])
    }

    // MARK: - Hand-made packets

    static func packet(pid: UInt16, unitStart: Bool, continuity: UInt8, payload: [UInt8]) -> [UInt8] {
        var packet: [UInt8] = [0x47, (unitStart ? 0x40 : 0) | UInt8(pid >> 8), UInt8(pid & 0xff), 0x10 | continuity]
        packet += payload.prefix(184)
        packet += [UInt8](repeating: 0xff, count: 188 - packet.count)
        return packet
    }

    static func section(tableID: UInt8, id: UInt16, body: [UInt8]) -> [UInt8] {
        let length = 5 + body.count + 4
        var section: [UInt8] = [tableID, 0xb0 | UInt8(length >> 8), UInt8(length & 0xff), UInt8(id >> 8), UInt8(id & 0xff), 0xc1, 0, 0]
        section += body
        let crc = MPEGCRC32.checksum(section[...])
        return section + [UInt8(crc >> 24), UInt8((crc >> 16) & 0xff), UInt8((crc >> 8) & 0xff), UInt8(crc & 0xff)]
    }

    static func pat(pmtPID: UInt16) -> [UInt8] {
        packet(pid: 0, unitStart: true, continuity: 0,
               payload: [0] + section(tableID: 0, id: 1, body: [0, 1, 0xe0 | UInt8(pmtPID >> 8), UInt8(pmtPID & 0xff)]))
    }

    static func pmt(streams: [(type: UInt8, pid: UInt16)]) -> [UInt8] {
        var body: [UInt8] = [0xe1, 0x00, 0xf0, 0x00]
        for stream in streams { body += [stream.type, 0xe0 | UInt8(stream.pid >> 8), UInt8(stream.pid & 0xff), 0xf0, 0] }
        return packet(pid: 0x100, unitStart: true, continuity: 0, payload: [0] + section(tableID: 2, id: 1, body: body))
    }
}
