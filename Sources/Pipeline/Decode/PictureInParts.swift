/// Early-close control for H.264 pictures decoded slice by slice (DecodeSession+Parts.swift): which picture is
/// being decoded in parts, how much of its access unit the decoder has had, and whether parts are suspended (a
/// picture came out damaged: whole access units with FFmpeg's concealment until the next keyframe).
struct PictureInParts {
    /// The picture being decoded in parts: its pts, how many bytes of its access unit the decoder has had, and how
    /// many of its slices.
    private(set) var current: (pts: Int64, fed: Int, slices: Int)?
    private(set) var suspended = false
    /// The bytes of one part, reused: a part is copied out of the assembler's buffer, which keeps growing.
    private var scratch: [UInt8] = []

    var isDecodingAPicture: Bool { current != nil }

    /// The picture with this pts is decoded in parts from now on.
    mutating func begin(pts: Int64) { current = (pts, 0, 0) }

    /// `accessUnitSoFar` is the picture's access unit as far as it has arrived: the part the decoder has not had
    /// (with the picture's pts), if there is one. The array is this stage's buffer, reused for the next part.
    /// `slices`: how many slices the access unit holds so far; the part says how many of them are new in it.
    mutating func nextPart(of accessUnitSoFar: ArraySlice<UInt8>, slices: Int) -> (bytes: [UInt8], pts: Int64, newSlices: Int)? {
        guard let part = current, accessUnitSoFar.count > part.fed else { return nil }
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: accessUnitSoFar[(accessUnitSoFar.startIndex + part.fed)...])
        current!.fed = accessUnitSoFar.count
        current!.slices = max(part.slices, slices)
        return (scratch, part.pts, slices - part.slices)
    }

    /// The picture's access unit is complete; true when it was being decoded in parts (then it is finished).
    mutating func finish() -> Bool {
        guard current != nil else { return false }
        current = nil
        return true
    }

    /// The picture's access unit was dropped (too large): the decoder sees no more of it.
    mutating func abandon() { current = nil }

    /// A picture came out damaged, or a decode failed: whole access units until the next keyframe.
    mutating func suspend() { suspended = true }

    /// A keyframe begins: a suspension ends (whether or not the keyframe is itself decoded in parts).
    mutating func keyframeBegins() { suspended = false }

    /// A new byte stream: nothing carried over.
    mutating func reset() {
        current = nil
        suspended = false
    }
}
