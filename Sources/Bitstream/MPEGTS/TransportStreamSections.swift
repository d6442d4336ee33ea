/// PSI sections (PAT, PMT) gathered from the payloads of one PID's packets. A section may start anywhere after a
/// packet's pointer field and span packets; it is handed out once whole and its CRC matches.
struct SectionAssembler {
    /// PSI sections are at most 1024 bytes (section_length ≤ 1021).
    static let maximumSectionSize = 1024
    private var buffer: [UInt8] = []
    private var collecting = false
    private var malformedBytes = 0

    mutating func push(_ payload: ArraySlice<UInt8>, unitStart: Bool, _ complete: (ArraySlice<UInt8>) -> Void) {
        var payload = payload
        if unitStart {
            guard let pointer = payload.first.map(Int.init), pointer < payload.count else {
                fail(payload.count)
                return
            }
            let start = payload.startIndex + 1
            // The pointer's bytes end the section in progress; a new one begins after them.
            if collecting { gather(payload[start..<start + pointer], complete) }
            if collecting { fail(buffer.count) }
            buffer.removeAll(keepingCapacity: true)
            collecting = true
            payload = payload[(start + pointer)...]
        }
        guard collecting else { return }
        gather(payload, complete)
    }

    /// Bytes of sections found malformed since the last call.
    mutating func takeMalformedBytes() -> Int {
        defer { malformedBytes = 0 }
        return malformedBytes
    }

    private mutating func gather(_ bytes: ArraySlice<UInt8>, _ complete: (ArraySlice<UInt8>) -> Void) {
        var bytes = bytes
        while collecting, !bytes.isEmpty {
            if buffer.isEmpty && bytes.first == 0xff {
                collecting = false  // stuffing: no more sections in this packet
                return
            }
            let wanted = (expectedLength ?? 3) - buffer.count
            let take = bytes.prefix(max(0, wanted))
            buffer.append(contentsOf: take)
            bytes = bytes.dropFirst(take.count)
            guard let length = expectedLength else { continue }
            guard length <= Self.maximumSectionSize else {
                fail(buffer.count + bytes.count)
                return
            }
            guard buffer.count == length else { continue }
            if MPEGCRC32.checksum(buffer[...]) == 0 { complete(buffer[...]) } else { malformedBytes += buffer.count }
            buffer.removeAll(keepingCapacity: true)
        }
    }

    /// The whole section's size once its 3-byte header is in.
    private var expectedLength: Int? {
        guard buffer.count >= 3 else { return nil }
        return 3 + (Int(buffer[1] & 0x0f) << 8 | Int(buffer[2]))
    }

    private mutating func fail(_ bytes: Int) {
        malformedBytes += bytes
        buffer.removeAll(keepingCapacity: true)
        collecting = false
    }
}

/// The CRC-32 of MPEG-2 sections: polynomial 0x04C11DB7, initial value all ones, no reflection; a section with its
/// CRC appended checks to zero.
enum MPEGCRC32 {
    static let table: [UInt32] = (0..<256).map { byte in
        var crc = UInt32(byte) << 24
        for _ in 0..<8 { crc = crc & 0x8000_0000 != 0 ? (crc << 1) ^ 0x04c1_1db7 : crc << 1 }
        return crc
    }

    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xffff_ffff
        for byte in bytes { crc = (crc << 8) ^ table[Int((crc >> 24) ^ UInt32(byte))] }
        return crc
    }
}
