import Bitstream
import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

/// A minimal RTP packetizer for tests: small NAL units aggregated (STAP-A / AP), large ones fragmented (FU-A / FU).
struct TestPacketizer {
    let codec: VideoCodec
    let mtu: Int
    var sequence: UInt16 = 1000
    var packets: [[UInt8]] = []

    init(codec: VideoCodec, mtu: Int = 1200) {
        self.codec = codec
        self.mtu = mtu
    }

    mutating func packet(_ payload: [UInt8], marker: Bool, timestamp: UInt32 = 90_000, payloadType: UInt8 = 96) {
        var bytes: [UInt8] = [0x80, (marker ? 0x80 : 0) | payloadType, UInt8(sequence >> 8), UInt8(sequence & 0xFF)]
        bytes += [UInt8(timestamp >> 24), UInt8((timestamp >> 16) & 0xFF), UInt8((timestamp >> 8) & 0xFF), UInt8(timestamp & 0xFF)]
        bytes += [0xDE, 0xAD, 0xBE, 0xEF]
        packets.append(bytes + payload)
        sequence &+= 1
    }

    mutating func send(accessUnit units: [[UInt8]], timestamp: UInt32) {
        var small: [[UInt8]] = []
        func flushSmall(marker: Bool) {
            if small.count == 1 {
                packet(small[0], marker: marker, timestamp: timestamp)
            } else if small.count > 1 {
                var payload: [UInt8] = codec == .h264 ? [0x18 | (small.map { $0[0] & 0x60 }.max() ?? 0)] : [48 << 1, 1]
                for unit in small { payload += [UInt8(unit.count >> 8), UInt8(unit.count & 0xFF)] + unit }
                packet(payload, marker: marker, timestamp: timestamp)
            }
            small = []
        }
        for (index, unit) in units.enumerated() {
            let last = index == units.count - 1
            if unit.count + 3 <= mtu / 4 {
                small.append(unit)
                if last { flushSmall(marker: true) }
                continue
            }
            flushSmall(marker: false)
            if unit.count <= mtu {
                packet(unit, marker: last, timestamp: timestamp)
                continue
            }
            let headerLength = codec == .h264 ? 1 : 2
            let body = Array(unit[headerLength...])
            var offset = 0
            while offset < body.count {
                let chunk = Array(body[offset..<min(body.count, offset + mtu)])
                let start = offset == 0
                offset += chunk.count
                let end = offset == body.count
                let flags: UInt8 = (start ? 0x80 : 0) | (end ? 0x40 : 0)
                let prefix: [UInt8] = codec == .h264
                    ? [(unit[0] & 0xE0) | 28, flags | (unit[0] & 0x1F)]
                    : [(unit[0] & 0x81) | (49 << 1), unit[1], flags | ((unit[0] >> 1) & 0x3F)]
                packet(prefix + chunk, marker: last && end, timestamp: timestamp)
            }
        }
    }
}

func depacketize(_ packets: [[UInt8]], codec: VideoCodec, maximum: Int = 1 << 20) -> (units: [[UInt8]], events: [RTPDepacketizerEvent], stats: RTPDepacketizer.Statistics) {
    var depacketizer = RTPDepacketizer(codec: codec, maximumNALUnitSize: maximum)
    var units: [[UInt8]] = []
    var events: [RTPDepacketizerEvent] = []
    for datagram in packets {
        guard let packet = try? RTPPacket(parsing: datagram[...]) else { continue }
        depacketizer.push(packet) { event in
            if case .nalUnit(let unit, _) = event { units.append(Array(unit.bytes)) } else { events.append(event) }
        }
    }
    return (units, events, depacketizer.statistics)
}

func nalUnits(_ stream: [UInt8]) -> [[UInt8]] {
    var splitter = AnnexBSplitter()
    var units: [[UInt8]] = []
    splitter.append(stream) { units.append(Array($0.bytes)) }
    splitter.flush { units.append(Array($0.bytes)) }
    return units
}

@Suite struct RTPDepacketizerTests {
    @Test(arguments: [("h264", "yuv420p"), ("h265", "yuv420p")])
    func roundTripThroughAggregatesAndFragments(codec: String, pixelFormat: String) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: codec, size: "320x240", frames: 12, encoderParameters: codec == "h264" ? "slices=4" : "",
                                              in: directory, name: "s.\(codec)")
        let stream = [UInt8](try Data(contentsOf: url))
        let videoCodec = VideoCodec(rawValue: codec)!
        var packetizer = TestPacketizer(codec: videoCodec)
        for (index, unit) in accessUnits(of: stream).enumerated() {
            packetizer.send(accessUnit: nalUnits(unit.data), timestamp: UInt32(index * 3600))
        }
        let result = depacketize(packetizer.packets, codec: videoCodec)
        #expect(result.units == nalUnits(stream))
        #expect(result.events.filter { if case .endOfAccessUnit = $0 { return true } else { return false } }.count == 12)
        #expect(result.stats.lostPackets == 0 && result.stats.dropped.isEmpty)
    }

    @Test func lossInsideAFragmentDropsOnlyThatNALUnit() {
        var packetizer = TestPacketizer(codec: .h264, mtu: 100)
        let big = [UInt8(0x65)] + [UInt8](repeating: 0x42, count: 450)
        packetizer.send(accessUnit: [[0x67, 1, 2], [0x68, 3]], timestamp: 0)
        packetizer.send(accessUnit: [big], timestamp: 3000)
        packetizer.send(accessUnit: [[0x41, 9, 9]], timestamp: 6000)
        var packets = packetizer.packets
        packets.remove(at: 3)  // a middle fragment of the big unit
        let result = depacketize(packets, codec: .h264)
        #expect(result.units == [[0x67, 1, 2], [0x68, 3], [0x41, 9, 9]])
        #expect(result.stats.lostPackets == 1)
        #expect(result.stats.dropped[.incompleteFragment] == 1)
        #expect(result.stats.dropped[.fragmentWithoutStart] ?? 0 >= 1)
    }

    @Test func duplicatesWrongPayloadTypesAndBadAggregatesAreDropped() {
        var packetizer = TestPacketizer(codec: .h264)
        packetizer.send(accessUnit: [[0x41, 1]], timestamp: 0)
        packetizer.packet([0x41, 2], marker: true, payloadType: 97)
        packetizer.packet([0x18, 0, 200, 0x41, 3], marker: true)   // STAP-A whose size runs past the packet
        packetizer.packet([0x1A, 1, 2, 3], marker: true)           // MTAP16: interleaved mode, unsupported
        var packets = packetizer.packets
        packets.insert(packets[0], at: 1)                          // duplicate
        let result = depacketize(packets, codec: .h264)
        #expect(result.units == [[0x41, 1]])
        #expect(result.stats.dropped == [.duplicate: 1, .wrongPayloadType: 1, .malformedAggregation: 1, .unsupportedPacketType: 1])
    }

    @Test func oversizedFragmentIsDroppedWithoutGrowingMemory() {
        var packetizer = TestPacketizer(codec: .h265, mtu: 1000)
        packetizer.send(accessUnit: [[0x26, 0x01] + [UInt8](repeating: 0x11, count: 50_000)], timestamp: 0)
        let result = depacketize(packetizer.packets, codec: .h265, maximum: 10_000)
        #expect(result.units.isEmpty)
        #expect(result.stats.dropped[.oversizedNALUnit] == 1)
    }

    @Test func randomDatagramsNeverCrash() {
        var generator = SeededGenerator(seed: 77)
        for codec in VideoCodec.allCases {
            var depacketizer = RTPDepacketizer(codec: codec, payloadType: 96, maximumNALUnitSize: 4096)
            for _ in 0..<20_000 {
                var datagram = (0..<Int.random(in: 0...80, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
                if datagram.count > 2 { datagram[0] = 0x80; datagram[1] = 96 }
                guard let packet = try? RTPPacket(parsing: datagram[...]) else { continue }
                depacketizer.push(packet) { event in
                    if case .nalUnit(let unit, _) = event { #expect(unit.bytes.count <= 4096) }
                }
            }
        }
    }

    /// FFmpeg's own RTP packetizer as the sender (`-f rtp` to a UDP socket on loopback): the NAL units that come
    /// out are the source's, in order.
    @Test(arguments: ["h264", "h265"])
    func depacketizesFFmpegsRTP(codec: String) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: codec, size: "640x360", frames: 10, in: directory, name: "r.\(codec)")
        let datagrams = try captureRTP(of: url.path)
        let source = nalUnits([UInt8](try Data(contentsOf: url)))
        let result = depacketize(datagrams, codec: VideoCodec(rawValue: codec)!)
        #expect(result.stats.lostPackets == 0 && result.stats.dropped.isEmpty)
        // FFmpeg sends the parameter sets it took from the stream in band as well; compare the slices exactly and
        // require every source NAL unit in order.
        var remaining = result.units[...]
        for unit in source {
            guard let found = remaining.firstIndex(of: unit) else {
                Issue.record("source NAL unit of \(unit.count) bytes missing")
                return
            }
            remaining = remaining[(found + 1)...]
        }
    }
}
