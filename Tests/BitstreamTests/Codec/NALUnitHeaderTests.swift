@testable import Bitstream
import Testing

/// The one- and two-byte NAL unit headers (H.264 7.3.1, H.265 7.3.1.2) and what each type means.
@Suite struct NALUnitHeaderTests {
    // MARK: H.264

    @Test func anH264HeaderByteSplitsIntoItsThreeFields() {
        // 0x67 = 0 11 00111: an SPS with nal_ref_idc 3.
        let sps = H264NALUnitHeader(byte: 0x67)
        #expect(!sps.forbiddenZeroBit && sps.nalRefIdc == 3 && sps.type == .sps)
        // 0x41 = 0 10 00001: a non-IDR slice with nal_ref_idc 2.
        let slice = H264NALUnitHeader(byte: 0x41)
        #expect(slice.nalRefIdc == 2 && slice.type == .slice)
        // 0x06 = 0 00 00110: SEI, which must have nal_ref_idc 0.
        let sei = H264NALUnitHeader(byte: 0x06)
        #expect(sei.nalRefIdc == 0 && sei.type == .sei)
    }

    @Test func theForbiddenBitIsReportedNotHidden() {
        // Set, with every other bit clear, and set with every other bit set: the type must not absorb it.
        let set = H264NALUnitHeader(byte: 0x80)
        #expect(set.forbiddenZeroBit && set.nalRefIdc == 0 && set.type.rawValue == 0)
        let all = H264NALUnitHeader(byte: 0xFF)
        #expect(all.forbiddenZeroBit && all.nalRefIdc == 3 && all.type.rawValue == 31)
    }

    @Test func anH264TypeKeepsOnlyItsFiveBits() {
        // Whatever byte a type is built from, it is nal_unit_type: 0xE5 and 0x05 are both an IDR slice.
        #expect(H264NALUnitType(rawValue: 0xE5) == .idrSlice)
        #expect(H264NALUnitType(rawValue: 0x20).rawValue == 0)
        #expect(H264NALUnitType(rawValue: 0x3F).description == "31")
    }

    @Test func onlyBaseLayerSlicesAreVCLAndOnlyPrimarySlicesCarryAHeader() {
        let vcl = (0...31).filter { H264NALUnitType(rawValue: UInt8($0)).isVCL }
        #expect(vcl == [1, 2, 3, 4, 5])
        // Partitions B and C hold only slice data (7.3.2.9): no header to compare pictures with.
        let withHeader = (0...31).filter { H264NALUnitType(rawValue: UInt8($0)).carriesSliceHeader }
        #expect(withHeader == [1, 2, 5])
        // Extension slices (20, 21) and auxiliary slices (19) are not base-layer VCL.
        #expect(!H264NALUnitType.auxiliarySlice.isVCL && !H264NALUnitType.sliceExtension.isVCL)
    }

    // MARK: H.265

    @Test func anH265HeaderSplitsIntoTypeLayerAndTemporalId() {
        // 40 01: forbidden 0, type 32 (VPS), layer 0, nuh_temporal_id_plus1 1.
        let vps = H265NALUnitHeader(firstByte: 0x40, secondByte: 0x01)
        #expect(!vps.forbiddenZeroBit && vps.type == .vps && vps.layerId == 0 && vps.temporalIdPlus1 == 1)
        #expect(vps.temporalId == 0)
        // 26 01: type 19 (IDR_W_RADL).
        #expect(H265NALUnitHeader(firstByte: 0x26, secondByte: 0x01).type == .idrWRADL)
        // 02 03: TRAIL_R in temporal sub-layer 2.
        let trail = H265NALUnitHeader(firstByte: 0x02, secondByte: 0x03)
        #expect(trail.type == .trailR && trail.temporalId == 2)
    }

    @Test func theLayerIdStraddlesTheTwoBytes() {
        // nuh_layer_id's top bit is the last bit of the first byte: 0x41 0x09 = type 32, layer 0b1_00001 = 33.
        let header = H265NALUnitHeader(firstByte: 0x41, secondByte: 0x09)
        #expect(header.type == .vps && header.layerId == 33 && header.temporalIdPlus1 == 1)
        // All bits set: type 63, layer 63, nuh_temporal_id_plus1 7, and the forbidden bit.
        let all = H265NALUnitHeader(firstByte: 0xFF, secondByte: 0xFF)
        #expect(all.forbiddenZeroBit && all.type.rawValue == 63 && all.layerId == 63 && all.temporalIdPlus1 == 7)
        #expect(all.temporalId == 6)
    }

    @Test func aZeroTemporalIdPlusOneIsKeptForTheCallerToRefuse() {
        // nuh_temporal_id_plus1 = 0 is forbidden (7.4.2.2); the header keeps it, so TemporalId is −1.
        let header = H265NALUnitHeader(firstByte: 0x40, secondByte: 0x00)
        #expect(header.temporalIdPlus1 == 0 && header.temporalId == -1)
    }

    @Test func anH265TypeKeepsOnlyItsSixBits() {
        #expect(H265NALUnitType(rawValue: 0x40 | 33) == .sps)
        #expect(H265NALUnitType(rawValue: 0xFF).rawValue == 63)
    }

    @Test func h265TypeClassesFollowTable7_1() {
        let all = (0...63).map { H265NALUnitType(rawValue: UInt8($0)) }
        #expect(all.filter(\.isVCL).map(\.rawValue) == Array(0...31))
        // RSV_VCL_N10…RSV_VCL_N14 (10…15) and RSV_IRAP_VCL22…RSV_VCL31 (22…31) are reserved.
        #expect(all.filter(\.isDefinedSlice).map(\.rawValue) == Array(0...9) + Array(16...21))
        // 22 and 23 are reserved IRAP types: still IRAP, but not a defined slice.
        #expect(all.filter(\.isIRAP).map(\.rawValue) == Array(16...23))
        #expect(all.filter(\.isIDR) == [.idrWRADL, .idrNLP])
        #expect(!H265NALUnitType.cra.isIDR && H265NALUnitType.cra.isIRAP)
    }

    // MARK: Roles

    /// The NAL-type rules that decide where access units begin and end (H.264 7.4.1.2.3, H.265 7.4.2.4.4).
    @Test func nalUnitRolesFollowTheSpecification() {
        let h264 = (0...31).map { H264NALUnitType(rawValue: UInt8($0)).role }
        #expect(h264[1] == .slice && h264[2] == .slice && h264[5] == .slice)
        #expect([3, 4, 12, 13, 19, 20, 21, 0].allSatisfy { h264[$0] == .withinAccessUnit })
        #expect([6, 7, 8, 9, 14, 15, 16, 17, 18].allSatisfy { h264[$0] == .beginsAccessUnit })
        #expect(h264[10] == .endsAccessUnit && h264[11] == .endsAccessUnit)
        let h265 = (0...63).map { H265NALUnitType(rawValue: UInt8($0)).role }
        #expect((0...31).allSatisfy { h265[$0] == .slice })
        #expect([32, 33, 34, 35, 39, 41, 44, 48, 55].allSatisfy { h265[$0] == .beginsAccessUnit })
        #expect([38, 40, 45, 47, 56, 63].allSatisfy { h265[$0] == .withinAccessUnit })
        #expect(h265[36] == .endsAccessUnit && h265[37] == .endsAccessUnit)
    }

    @Test func everyTypeHasExactlyTheRoleItsRangeGives() {
        // The complete partition, so that a type moved between ranges is caught, not only the sampled ones.
        let h264Begins = Set([6, 7, 8, 9] + Array(14...18))
        for raw in 0...31 {
            let role = H264NALUnitType(rawValue: UInt8(raw)).role
            let expected: NALUnitRole = [1, 2, 5].contains(raw) ? .slice
                : [10, 11].contains(raw) ? .endsAccessUnit
                : h264Begins.contains(raw) ? .beginsAccessUnit : .withinAccessUnit
            #expect(role == expected, "H.264 type \(raw)")
        }
        let h265Begins = Set(Array(32...35) + [39] + Array(41...44) + Array(48...55))
        for raw in 32...63 {
            let role = H265NALUnitType(rawValue: UInt8(raw)).role
            let expected: NALUnitRole = [36, 37].contains(raw) ? .endsAccessUnit
                : h265Begins.contains(raw) ? .beginsAccessUnit : .withinAccessUnit
            #expect(role == expected, "H.265 type \(raw)")
        }
    }
}
