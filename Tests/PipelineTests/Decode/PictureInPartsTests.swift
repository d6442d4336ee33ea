@testable import Pipeline
import Testing

@Suite struct PictureInPartsTests {
    @Test func aPictureInPartsGetsEachByteOnceAndSuspensionsEndAtAKeyframe() {
        var parts = PictureInParts()
        #expect(parts.nextPart(of: [1, 2, 3][...], slices: 1) == nil, "no picture in parts")
        parts.begin(pts: 7)
        let accessUnit: [UInt8] = Array(0..<20)
        #expect(parts.nextPart(of: accessUnit[0..<8], slices: 1).map { ($0.bytes, $0.pts, $0.newSlices) } .map { $0 == (Array(0..<8), 7, 1) } == true)
        #expect(parts.nextPart(of: accessUnit[0..<8], slices: 1) == nil, "nothing new")
        let next = parts.nextPart(of: accessUnit[0..<20], slices: 3)
        #expect(next?.bytes == Array(8..<20) && next?.newSlices == 2, "two slices came in one part")
        #expect(parts.finish() && !parts.finish() && !parts.isDecodingAPicture)
        parts.suspend()
        #expect(parts.suspended)
        parts.keyframeBegins()
        #expect(!parts.suspended)
        parts.begin(pts: 8)
        parts.suspend()
        parts.reset()
        #expect(!parts.isDecodingAPicture && !parts.suspended)
    }
}
