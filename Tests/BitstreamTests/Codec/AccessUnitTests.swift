import Bitstream
import Testing

/// What an assembled access unit says about itself, and the names `streamrecvctl inspect` prints for it.
@Suite struct AccessUnitTests {
    static func unit(sliceCount: Int = 1, randomAccess: RandomAccessKind? = nil) -> AccessUnit {
        AccessUnit(codec: .h264, data: [0, 0, 0, 1, 0x65, 0x88], nalUnitTypes: [5], streamOffset: 0, sliceCount: sliceCount,
                   randomAccess: randomAccess, ppsId: 0, format: nil, parameterSets: nil, displayOrientation: nil,
                   end: .explicit)
    }

    @Test func everyRandomAccessKindMakesAKeyframeAndNoneDoesNot() {
        // A recovery point (intra refresh) is as much a place to start decoding as an IDR.
        for kind in [RandomAccessKind.idr, .cra, .bla, .recoveryPoint] {
            #expect(Self.unit(randomAccess: kind).isKeyframe, "\(kind)")
        }
        #expect(!Self.unit(randomAccess: nil).isKeyframe)
    }

    @Test func onlyAnAccessUnitWithASliceHasAPicture() {
        // Parameter sets and SEI alone (sliceCount 0) are not a picture to decode.
        #expect(!Self.unit(sliceCount: 0).hasPicture)
        #expect(Self.unit(sliceCount: 1).hasPicture)
        #expect(Self.unit(sliceCount: 8160).hasPicture)
    }

    @Test func optionalFactsDefaultToUnknownNotToTrue() {
        // An access unit built without them must not claim to be a reference or to start with the first slice.
        let unit = Self.unit()
        #expect(!unit.beginsWithFirstSlice && !unit.isReference)
        #expect(unit.recoveryFrameCount == nil && unit.frameNum == nil)
    }

    @Test func theNamesInspectPrintsAreStable() {
        // Printed in inspect's JSON lines and summary: renaming a case must not change them.
        #expect([RandomAccessKind.idr, .cra, .bla, .recoveryPoint].map(\.rawValue) == ["idr", "cra", "bla", "recovery_point"])
        #expect([AccessUnitEnd.nextAccessUnit, .endOfSequence, .explicit].map(\.rawValue) == ["next_au", "end_of_sequence", "explicit"])
    }
}
