/// What the transport stream demuxer finds in MPEG-TS bytes.
public enum TransportStreamEvent: Sendable, Equatable {
    /// The program map names the video elementary stream to follow (the first H.264 or H.265 stream of the first
    /// program), for the first time or a different one than before.
    case videoStream(codec: VideoCodec, pid: UInt16)
    /// The program has no H.264 or H.265 stream; its streams' types, in order. Reported once per program map.
    case noSupportedVideo(streamTypes: [UInt8])
    /// A PES packet of the video stream begins. `startsAccessUnit`: its header says an access unit begins in it
    /// (a PTS, or data_alignment_indicator), so the access unit before it is complete; otherwise it continues one
    /// (13818-1 lets an access unit span PES packets). `pts`: 90 kHz ticks.
    case pesStart(pts: Int64?, startsAccessUnit: Bool)
    /// Bytes of the video stream's PES payload (Annex B), in order.
    case payload(ArraySlice<UInt8>)
    /// The PES packet declared its length and all of it is in. Not an access unit's end by itself: the next PES
    /// packet may continue the access unit (it then has no PTS).
    case pesEnd
    /// The video bytes have a hole here: packets of the video stream were lost (`continuityGap`), or a PES packet
    /// was cut off (an unusable header, the program switching to another stream mid-packet).
    case videoLost(continuityGap: Bool)
    /// Bytes that were not used, and why.
    case discarded(TransportStreamDrop, bytes: Int)
}

public enum TransportStreamDrop: String, Sendable, Equatable, CaseIterable {
    /// Bytes outside 188-byte packets beginning with 0x47 (garbage, or a cut packet).
    case lostSync = "lost_sync"
    /// Packets with the transport error indicator set: the link layer marked them damaged.
    case transportError = "transport_error"
    /// Packets of the video stream whose payload is scrambled (encrypted at the TS level): cannot be decoded.
    case scrambled
    /// A PAT or PMT section that is cut, too long or fails its CRC.
    case malformedSection = "malformed_section"
    /// Video bytes before the first PES header (a sender joined mid-packet), or after a PES packet's declared end.
    case outsidePES = "outside_pes"
    /// A video PES header that cannot be used (cut, wrong start code, lengths that disagree): its packet is lost.
    case malformedPES = "malformed_pes"
}

/// MPEG-TS (ISO/IEC 13818-1) to the Annex B bytes of one video stream: PAT, then PMT, then the PES packets of the
/// first H.264 or H.265 stream. Pure and incremental: bytes may be split anywhere; payload events are views of the
/// input (or of one reused 188-byte carry buffer), valid during the call. A PES packet with a PTS (or data_alignment_indicator)
/// begins an access unit; FFmpeg, OBS and GStreamer's mpegtsmux put one access unit in each PES packet.
public struct TransportStreamDemuxer {
    public static let packetSize = 188
    static let syncByte: UInt8 = 0x47

    public struct Statistics: Sendable, Equatable {
        public var packets = 0
        public var videoPackets = 0
        public var pesPackets = 0
        public var continuityErrors = 0
        public var discarded: [TransportStreamDrop: Int] = [:]
        public init() {}
    }

    private enum PESState: Equatable {
        /// Until the next payload unit start: at the beginning, and after an unusable PES header.
        case waitingForStart
        /// `remaining`: payload bytes still to come when the header declared a length (nil: unbounded, as video
        /// PES packets usually are, or no longer known after a loss).
        case inPES(remaining: Int?)
    }

    public private(set) var statistics = Statistics()
    public private(set) var videoPID: UInt16?
    public private(set) var videoCodec: VideoCodec?
    private var pmtPID: UInt16?
    private var pat = SectionAssembler()
    private var pmt = SectionAssembler()
    private var pes = PESState.waitingForStart
    private var lastContinuity: UInt8?
    private var reportedUnsupported: [UInt8]?
    /// The start of a packet cut by the end of the previous append.
    private var carry: [UInt8] = []

    public init() {
        carry.reserveCapacity(Self.packetSize)
    }

    public mutating func append(_ bytes: [UInt8], _ emit: (TransportStreamEvent) -> Void) {
        append(bytes[...], emit)
    }

    public mutating func append(_ bytes: ArraySlice<UInt8>, _ emit: (TransportStreamEvent) -> Void) {
        var position = bytes.startIndex
        if !carry.isEmpty {
            let take = min(Self.packetSize - carry.count, bytes.count)
            carry.append(contentsOf: bytes[position..<position + take])
            position += take
            guard carry.count == Self.packetSize else { return }
            do {
                let packet = carry[...]
                parse(packet, emit)
            }
            carry.removeAll(keepingCapacity: true)
        }
        while position < bytes.endIndex {
            // A packet is taken where a sync byte begins it and another follows it (when the bytes reach that far):
            // a stray 0x47 in garbage does not swallow the real packet behind it.
            let end = position + Self.packetSize
            if bytes[position] != Self.syncByte || (end < bytes.endIndex && bytes[end] != Self.syncByte) {
                let next = Self.resynchronise(bytes, from: position + 1)
                discard(.lostSync, bytes: next - position, emit)
                position = next
                continue
            }
            guard end <= bytes.endIndex else {
                carry.append(contentsOf: bytes[position...])
                return
            }
            parse(bytes[position..<end], emit)
            position = end
        }
    }

    /// The next plausible packet start after lost sync: a sync byte followed by another one packet later (or by
    /// the end of the bytes at hand).
    private static func resynchronise(_ bytes: ArraySlice<UInt8>, from start: Int) -> Int {
        var index = start
        while index < bytes.endIndex {
            if bytes[index] == syncByte && (index + packetSize >= bytes.endIndex || bytes[index + packetSize] == syncByte) {
                return index
            }
            index += 1
        }
        return bytes.endIndex
    }

    private mutating func discard(_ reason: TransportStreamDrop, bytes: Int, _ emit: (TransportStreamEvent) -> Void) {
        guard bytes > 0 else { return }
        statistics.discarded[reason, default: 0] += bytes
        emit(.discarded(reason, bytes: bytes))
    }

    // MARK: - Packets

    private mutating func parse(_ packet: ArraySlice<UInt8>, _ emit: (TransportStreamEvent) -> Void) {
        let base = packet.startIndex
        statistics.packets += 1
        let flags = packet[base + 1]
        let pid = UInt16(flags & 0x1f) << 8 | UInt16(packet[base + 2])
        if flags & 0x80 != 0 {
            // Damaged on the way: dropped whole; a video packet's absence then shows as a continuity gap.
            discard(.transportError, bytes: Self.packetSize, emit)
            return
        }
        let unitStart = flags & 0x40 != 0
        let control = packet[base + 3]
        let scrambling = control >> 6
        let adaptation = (control >> 4) & 0x3
        let continuity = control & 0xf
        var payloadStart = base + 4
        var discontinuity = false
        if adaptation & 0x2 != 0 {
            let length = Int(packet[base + 4])
            payloadStart = base + 5 + length
            if length > 0 { discontinuity = packet[base + 5] & 0x80 != 0 }
            // An adaptation field longer than the packet leaves no payload (and is malformed): nothing to read.
            guard payloadStart <= packet.endIndex else { return }
        }
        let hasPayload = adaptation & 0x1 != 0
        let payload = packet[payloadStart..<packet.endIndex]
        if pid == videoPID {
            statistics.videoPackets += 1
            guard hasPayload else { return }
            if let last = lastContinuity, !discontinuity {
                if continuity == last { return }  // a duplicate packet (allowed once by the standard)
                if continuity != (last &+ 1) & 0xf { videoLost(emit) }
            }
            lastContinuity = continuity
            guard scrambling == 0 else {
                discard(.scrambled, bytes: payload.count, emit)
                return
            }
            video(payload, unitStart: unitStart, emit)
        } else if pid == 0 || pid == pmtPID {
            guard hasPayload else { return }
            table(pid == 0 ? \.pat : \.pmt, payload, unitStart: unitStart, emit)
        }
    }

    /// A PAT or PMT payload. The assembler is taken out of `self` while it works, because what a whole section says
    /// changes `self`.
    private mutating func table(_ path: WritableKeyPath<Self, SectionAssembler>, _ payload: ArraySlice<UInt8>,
                                unitStart: Bool, _ emit: (TransportStreamEvent) -> Void) {
        var assembler = self[keyPath: path]
        self[keyPath: path] = SectionAssembler()
        assembler.push(payload, unitStart: unitStart) { section in
            if path == \.pat { programAssociation(section, emit) } else { programMap(section, emit) }
        }
        let malformed = assembler.takeMalformedBytes()
        self[keyPath: path] = assembler
        if malformed > 0 { discard(.malformedSection, bytes: malformed, emit) }
    }

    private mutating func videoLost(_ emit: (TransportStreamEvent) -> Void) {
        statistics.continuityErrors += 1
        // A lost packet may have held part of this PES packet: its declared length no longer says where it ends.
        if case .inPES = pes { pes = .inPES(remaining: nil) }
        emit(.videoLost(continuityGap: true))
    }

    // MARK: - PES

    private mutating func video(_ payload: ArraySlice<UInt8>, unitStart: Bool, _ emit: (TransportStreamEvent) -> Void) {
        var payload = payload
        if unitStart {
            statistics.pesPackets += 1
            guard let header = PESHeader(payload) else {
                // The access unit is lost with its header; its bytes are skipped up to the next PES packet.
                pes = .waitingForStart
                discard(.malformedPES, bytes: payload.count, emit)
                emit(.videoLost(continuityGap: false))
                return
            }
            emit(.pesStart(pts: header.pts, startsAccessUnit: header.pts != nil || header.dataAligned))
            pes = .inPES(remaining: header.payloadLength)
            payload = payload[(payload.startIndex + header.headerLength)...]
        }
        guard case .inPES(let remaining) = pes else {
            discard(.outsidePES, bytes: payload.count, emit)
            return
        }
        var used = payload
        if let remaining {
            used = payload.prefix(remaining)
            discard(.outsidePES, bytes: payload.count - used.count, emit)
            pes = .inPES(remaining: remaining - used.count)
        }
        if !used.isEmpty { emit(.payload(used)) }
        if case .inPES(remaining: 0) = pes {
            pes = .waitingForStart
            emit(.pesEnd)
        }
    }

    // MARK: - Program tables

    private mutating func programAssociation(_ section: ArraySlice<UInt8>, _ emit: (TransportStreamEvent) -> Void) {
        let base = section.startIndex
        guard section[base] == 0x00, section.count >= 12, section[base + 5] & 0x1 != 0 else { return }
        var index = base + 8
        while index + 4 <= section.endIndex - 4 {
            let program = UInt16(section[index]) << 8 | UInt16(section[index + 1])
            let pid = UInt16(section[index + 2] & 0x1f) << 8 | UInt16(section[index + 3])
            index += 4
            guard program != 0 else { continue }  // the network information table's PID
            if pid != pmtPID {
                pmtPID = pid
                pmt = SectionAssembler()
            }
            return
        }
    }

    private mutating func programMap(_ section: ArraySlice<UInt8>, _ emit: (TransportStreamEvent) -> Void) {
        let base = section.startIndex
        guard section[base] == 0x02, section.count >= 16, section[base + 5] & 0x1 != 0 else { return }
        let programInfoLength = Int(section[base + 10] & 0x0f) << 8 | Int(section[base + 11])
        var index = base + 12 + programInfoLength
        var types: [UInt8] = []
        while index + 5 <= section.endIndex - 4 {
            let type = section[index]
            let pid = UInt16(section[index + 1] & 0x1f) << 8 | UInt16(section[index + 2])
            let infoLength = Int(section[index + 3] & 0x0f) << 8 | Int(section[index + 4])
            index += 5 + infoLength
            types.append(type)
            guard let codec = Self.codec(streamType: type) else { continue }
            reportedUnsupported = nil
            if pid != videoPID || codec != videoCodec {
                // The old stream's PES packet in progress will never end: its access unit is cut off.
                if case .inPES = pes { emit(.videoLost(continuityGap: false)) }
                videoPID = pid
                videoCodec = codec
                lastContinuity = nil
                pes = .waitingForStart
                emit(.videoStream(codec: codec, pid: pid))
            }
            return
        }
        if reportedUnsupported != types {
            reportedUnsupported = types
            emit(.noSupportedVideo(streamTypes: types))
        }
    }

    static func codec(streamType: UInt8) -> VideoCodec? {
        switch streamType {
        case 0x1b: return .h264
        case 0x24: return .h265
        default: return nil
        }
    }
}

/// The fixed part of a PES header and the optional fields the demuxer uses.
struct PESHeader {
    /// Bytes up to the payload.
    var headerLength: Int
    /// Payload bytes the packet declares; nil when unbounded (PES_packet_length 0).
    var payloadLength: Int?
    var pts: Int64?
    /// data_alignment_indicator: the payload begins with an access unit (or a NAL unit, for some muxers).
    var dataAligned: Bool

    init?(_ bytes: ArraySlice<UInt8>) {
        let base = bytes.startIndex
        guard bytes.count >= 9, bytes[base] == 0, bytes[base + 1] == 0, bytes[base + 2] == 1 else { return nil }
        let streamID = bytes[base + 3]
        // Video stream IDs (0xE0–0xEF) and extended ones (0xFD, used for HEVC by some muxers) carry the optional header.
        guard streamID & 0xf0 == 0xe0 || streamID == 0xfd, bytes[base + 6] & 0xc0 == 0x80 else { return nil }
        let declared = Int(bytes[base + 4]) << 8 | Int(bytes[base + 5])
        dataAligned = bytes[base + 6] & 0x04 != 0
        let dataLength = Int(bytes[base + 8])
        headerLength = 9 + dataLength
        guard bytes.count >= headerLength else { return nil }
        if declared == 0 {
            payloadLength = nil
        } else {
            guard declared >= 3 + dataLength else { return nil }
            payloadLength = declared - 3 - dataLength
        }
        if bytes[base + 7] & 0x80 != 0, dataLength >= 5 {
            let p = base + 9
            let high = Int64(bytes[p] >> 1) & 0x7
            let middle = Int64(bytes[p + 1]) << 7 | Int64(bytes[p + 2] >> 1)
            let low = Int64(bytes[p + 3]) << 7 | Int64(bytes[p + 4] >> 1)
            pts = high << 30 | middle << 15 | low
        }
    }
}
