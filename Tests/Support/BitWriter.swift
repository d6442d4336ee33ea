/// Writes RBSP bits for building parameter sets and slices in tests, including hostile ones.
public struct BitWriter {
    public private(set) var bytes: [UInt8] = []
    private var bitCount = 0

    public init() {}

    public mutating func u(_ count: Int, _ value: UInt64) {
        for shift in stride(from: count - 1, through: 0, by: -1) { bit((value >> UInt64(shift)) & 1 == 1) }
    }

    public mutating func bit(_ set: Bool) {
        if bitCount % 8 == 0 { bytes.append(0) }
        if set { bytes[bytes.count - 1] |= 0x80 >> UInt8(bitCount % 8) }
        bitCount += 1
    }

    public mutating func flag(_ set: Bool) { bit(set) }

    public mutating func ue(_ value: UInt64) {
        let coded = value + 1
        let length = 64 - coded.leadingZeroBitCount
        u(length - 1, 0)
        u(length, coded)
    }

    public mutating func se(_ value: Int64) {
        ue(value > 0 ? UInt64(2 * value - 1) : UInt64(-2 * value))
    }

    /// rbsp_trailing_bits(): a stop bit, then zeros to the byte boundary.
    public mutating func trailingBits() {
        bit(true)
        while bitCount % 8 != 0 { bit(false) }
    }
}

/// Inserts emulation_prevention_three_bytes (7.4.1): RBSP to the escaped form carried in a NAL unit.
public func escapeRBSP(_ rbsp: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    var zeros = 0
    for byte in rbsp {
        if zeros >= 2 && byte <= 3 {
            out.append(3)
            zeros = 0
        }
        out.append(byte)
        zeros = byte == 0 ? zeros + 1 : 0
    }
    return out
}

/// An Annex B stream of the given NAL units, each behind a 4-byte start code.
public func annexB(_ units: [[UInt8]]) -> [UInt8] {
    units.flatMap { [0, 0, 0, 1] + $0 }
}

/// Deterministic generator for property tests (SplitMix64): failures reproduce from the seed.
public struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
