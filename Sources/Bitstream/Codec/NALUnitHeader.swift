/// H.264 `nal_unit_type` (Table 7-1). A struct, not an enum: every 5-bit value can arrive from the network.
public struct H264NALUnitType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue & 0x1F }

    public static let slice = Self(rawValue: 1)
    public static let dataPartitionA = Self(rawValue: 2)
    public static let dataPartitionB = Self(rawValue: 3)
    public static let dataPartitionC = Self(rawValue: 4)
    public static let idrSlice = Self(rawValue: 5)
    public static let sei = Self(rawValue: 6)
    public static let sps = Self(rawValue: 7)
    public static let pps = Self(rawValue: 8)
    public static let accessUnitDelimiter = Self(rawValue: 9)
    public static let endOfSequence = Self(rawValue: 10)
    public static let endOfStream = Self(rawValue: 11)
    public static let fillerData = Self(rawValue: 12)
    public static let spsExtension = Self(rawValue: 13)
    public static let prefix = Self(rawValue: 14)
    public static let subsetSPS = Self(rawValue: 15)
    public static let depthParameterSet = Self(rawValue: 16)
    public static let auxiliarySlice = Self(rawValue: 19)
    public static let sliceExtension = Self(rawValue: 20)
    public static let sliceExtensionDepth = Self(rawValue: 21)

    /// Slices of the primary coded picture that carry a slice header (7.4.1.2.4 applies to them).
    public var carriesSliceHeader: Bool { self == .slice || self == .idrSlice || self == .dataPartitionA }
    /// VCL NAL units of the base layer (types 1...5).
    public var isVCL: Bool { (1...5).contains(rawValue) }

    public var description: String { String(rawValue) }
}

/// A parsed one-byte H.264 NAL unit header (7.3.1).
public struct H264NALUnitHeader: Hashable, Sendable {
    public var forbiddenZeroBit: Bool
    public var nalRefIdc: UInt8
    public var type: H264NALUnitType

    public init(byte: UInt8) {
        forbiddenZeroBit = byte & 0x80 != 0
        nalRefIdc = (byte >> 5) & 0x3
        type = H264NALUnitType(rawValue: byte)
    }
}

/// H.265 `nal_unit_type` (Table 7-1 of H.265).
public struct H265NALUnitType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue & 0x3F }

    public static let trailN = Self(rawValue: 0)
    public static let trailR = Self(rawValue: 1)
    public static let raslR = Self(rawValue: 9)
    public static let blaWLP = Self(rawValue: 16)
    public static let blaWRADL = Self(rawValue: 17)
    public static let blaNLP = Self(rawValue: 18)
    public static let idrWRADL = Self(rawValue: 19)
    public static let idrNLP = Self(rawValue: 20)
    public static let cra = Self(rawValue: 21)
    public static let vps = Self(rawValue: 32)
    public static let sps = Self(rawValue: 33)
    public static let pps = Self(rawValue: 34)
    public static let accessUnitDelimiter = Self(rawValue: 35)
    public static let endOfSequence = Self(rawValue: 36)
    public static let endOfBitstream = Self(rawValue: 37)
    public static let fillerData = Self(rawValue: 38)
    public static let prefixSEI = Self(rawValue: 39)
    public static let suffixSEI = Self(rawValue: 40)

    /// Coded slice segments (types 0...31; 10...15 and 22...31 are reserved VCL types).
    public var isVCL: Bool { rawValue < 32 }
    /// Slice segment types that are defined (not reserved) and so can be parsed.
    public var isDefinedSlice: Bool { rawValue <= 9 || (16...21).contains(rawValue) }
    /// Intra random-access point picture (BLA, IDR, CRA; 22 and 23 are reserved IRAP types).
    public var isIRAP: Bool { (16...23).contains(rawValue) }
    public var isIDR: Bool { self == .idrWRADL || self == .idrNLP }

    public var description: String { String(rawValue) }
}

/// A parsed two-byte H.265 NAL unit header (7.3.1.2 of H.265).
public struct H265NALUnitHeader: Hashable, Sendable {
    public var forbiddenZeroBit: Bool
    public var type: H265NALUnitType
    public var layerId: UInt8
    /// `nuh_temporal_id_plus1`; zero is forbidden by the spec.
    public var temporalIdPlus1: UInt8

    public init(firstByte: UInt8, secondByte: UInt8) {
        forbiddenZeroBit = firstByte & 0x80 != 0
        type = H265NALUnitType(rawValue: firstByte >> 1)
        layerId = ((firstByte & 1) << 5) | (secondByte >> 3)
        temporalIdPlus1 = secondByte & 0x7
    }

    public var temporalId: Int { Int(temporalIdPlus1) - 1 }
}

/// What a NAL unit does to the access unit it arrives in (H.264 7.4.1.2.3, H.265 7.4.2.4.4). The one home of these
/// rules: `AccessUnitAssembler.push` and `startsAccessUnit` (which closes an access unit from the next one's first
/// bytes) both follow it, and so the inspector.
public enum NALUnitRole: Sendable, Equatable {
    /// Begins a new access unit when it follows a picture: parameter sets, SEI, a delimiter, prefix and reserved
    /// types that must precede the first slice.
    case beginsAccessUnit
    /// A slice (segment) of the primary picture: whether it begins a new picture is its header's to say.
    case slice
    /// Ends the access unit it is in (end of sequence, end of stream).
    case endsAccessUnit
    /// Belongs to the access unit it is in: partitions B and C, filler data, suffix SEI, extensions, others.
    case withinAccessUnit
}

extension H264NALUnitType {
    public var role: NALUnitRole {
        switch rawValue {
        case 6, 7, 8, 9, 14...18: .beginsAccessUnit
        case 1, 2, 5: .slice
        case 10, 11: .endsAccessUnit
        default: .withinAccessUnit
        }
    }
}

extension H265NALUnitType {
    public var role: NALUnitRole {
        switch rawValue {
        case 32...35, 39, 41...44, 48...55: .beginsAccessUnit
        case 0...31: .slice
        case 36, 37: .endsAccessUnit
        default: .withinAccessUnit
        }
    }
}
