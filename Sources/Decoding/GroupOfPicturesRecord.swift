/// What a hardware decoder's fallback needs to lose nothing: the access units since the last random-access point
/// (bounded in bytes), to feed again to a software decoder, and the pts of the frames already handed out since
/// then, so that the replay does not hand them out twice. Kept only while a fallback is possible.
struct GroupOfPicturesRecord {
    let maximumBytes: Int
    private(set) var inputs: [DecoderInput] = []
    private var bytes = 0
    /// Since the last random-access point, every access unit is kept (not too many bytes, not begun mid-GOP).
    private(set) var isComplete = false
    private var output: Set<Int64> = []
    /// Set while the record's inputs are fed again: frames handed out before are then withheld.
    var isReplaying = false

    init(maximumBytes: Int) { self.maximumBytes = maximumBytes }

    var holdsInputs: Bool { !inputs.isEmpty }

    /// Keeps `input` (or, when `keeping` is false, forgets everything: no fallback can need it).
    mutating func remember(_ input: DecoderInput, keeping: Bool) {
        guard keeping else {
            if !inputs.isEmpty || !output.isEmpty { forget() }
            return
        }
        if input.isRandomAccess {
            inputs.removeAll(keepingCapacity: true)
            output.removeAll(keepingCapacity: true)
            bytes = 0
            isComplete = true
        }
        guard isComplete else { return }
        if bytes + input.data.count > maximumBytes {
            forget()
            return
        }
        inputs.append(input)
        bytes += input.data.count
    }

    private mutating func forget() {
        inputs.removeAll()
        output.removeAll()
        bytes = 0
        isComplete = false
    }

    /// Whether a frame with `pts` should be handed out: not when it was, and this is the replay.
    func shouldHandOut(pts: Int64) -> Bool { !(isReplaying && output.contains(pts)) }

    /// A frame was handed out (recorded only while a fallback is possible).
    mutating func noteHandedOut(pts: Int64) {
        if isComplete { output.insert(pts) }
    }
}
