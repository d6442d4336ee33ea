import Bitstream
@testable import Pipeline
import Testing

/// Which whole access units go to the decoder, without one.
@Suite struct AccessUnitAdmissionTests {
    static func unit(_ codec: VideoCodec = .h264, types: [UInt8], slices: Int, width: Int = 1280, height: Int = 720) -> AccessUnit {
        let format = SequenceFormat(codec: codec, codedWidth: width, codedHeight: height, crop: [0, 0, 0, 0],
                                    chromaFormat: .yuv420, bitDepthLuma: 8, bitDepthChroma: 8, profile: 100, level: 40)
        return AccessUnit(codec: codec, data: [], nalUnitTypes: types, streamOffset: 0, sliceCount: slices, randomAccess: nil,
                          ppsId: nil, format: format, parameterSets: nil, displayOrientation: nil, end: .explicit)
    }

    static func admit(_ unit: AccessUnit, lostWithin: Bool = false) -> AccessUnitAdmission {
        AccessUnitAdmission(unit, maxWidth: 1920, maxHeight: 1088, lostWithin: lostWithin)
    }

    @Test func aPictureWithinTheLimitsIsDecoded() {
        #expect(Self.admit(Self.unit(types: [9, 7, 8, 5], slices: 1)) == .decode)
        #expect(Self.admit(Self.unit(types: [1], slices: 1, width: 1920, height: 1088)) == .decode)
        #expect(Self.admit(Self.unit(.h265, types: [35, 32, 33, 34, 19], slices: 1)) == .decode)
    }

    /// Either side over its limit refuses the picture, whatever the other side.
    @Test func aPictureLargerThanTheLimitsIsRefused() {
        #expect(Self.admit(Self.unit(types: [5], slices: 1, width: 1936, height: 720)) == .tooLarge(width: 1936, height: 720))
        #expect(Self.admit(Self.unit(types: [5], slices: 1, width: 640, height: 1090)) == .tooLarge(width: 640, height: 1090))
        // Even one with nothing to decode: its size alone says no.
        #expect(Self.admit(Self.unit(types: [9], slices: 0, width: 4096, height: 2160), lostWithin: true)
            == .tooLarge(width: 4096, height: 2160))
    }

    /// A delimiter or parameter sets alone have nothing to decode; an end of sequence alone still goes (it changes
    /// how the next random-access picture is decoded).
    @Test func anAccessUnitWithoutAPictureIsDecodedOnlyForAnEndOfSequence() {
        #expect(Self.admit(Self.unit(types: [9], slices: 0)) == .nothingToDecode(pictureLost: false))
        #expect(Self.admit(Self.unit(types: [7, 8], slices: 0)) == .nothingToDecode(pictureLost: false))
        #expect(Self.admit(Self.unit(types: [10], slices: 0)) == .decode)
        #expect(Self.admit(Self.unit(types: [11], slices: 0)) == .decode)
        #expect(Self.admit(Self.unit(.h265, types: [35], slices: 0)) == .nothingToDecode(pictureLost: false))
        #expect(Self.admit(Self.unit(.h265, types: [36], slices: 0)) == .decode)
        // The same types read as the other codec's mean something else: H.264's 10 is an H.265 slice type.
        #expect(Self.admit(Self.unit(.h265, types: [10], slices: 0)) == .nothingToDecode(pictureLost: false))
    }

    /// rtp://: data lost inside an access unit that then holds no slice: its picture was lost.
    @Test func anAccessUnitThatLostItsSlicesCountsItsPictureLost() {
        #expect(Self.admit(Self.unit(types: [9], slices: 0), lostWithin: true) == .nothingToDecode(pictureLost: true))
        #expect(Self.admit(Self.unit(types: [1], slices: 1), lostWithin: true) == .decode)
    }
}
