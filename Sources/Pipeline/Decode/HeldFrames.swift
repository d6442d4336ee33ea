import FrameFormats
import SharedFrames

/// Frames decoded while the larger ring they need is still being made (`FrameRingWriter.longestWaitForRing` has
/// passed), in order, each in memory of its own: published once the ring is there instead of lost. On a loaded
/// machine a 68 MiB ring took over half a second, and the stream's first frames went with it. No more are kept
/// than the ring has slots (a reader could not take more from one burst) nor than `byteLimit`: past that the oldest
/// goes, and the one after it carries the discontinuity flag. Owned by the publisher, on the decode thread.
final class HeldFrames {
    struct Frame {
        let layout: FrameLayout
        var metadata: FrameMetadata
        let pixels: UnsafeMutableRawBufferPointer
    }

    /// The most bytes of pixels one stream keeps waiting for its ring (21 1080p NV12 frames; 2 of 4K P010).
    static let byteLimit = 64 << 20

    private var frames: [Frame] = []
    private var startIndex = 0
    private(set) var bytes = 0
    let countLimit: Int

    init(countLimit: Int) {
        self.countLimit = max(1, countLimit)
    }

    deinit {
        for frame in frames[startIndex...] { frame.pixels.deallocate() }
    }

    var isEmpty: Bool { startIndex == frames.count }
    var count: Int { frames.count - startIndex }
    var first: Frame? { isEmpty ? nil : frames[startIndex] }

    /// Whether a frame of `byteCount` could ever be kept.
    func canEverHold(_ byteCount: Int) -> Bool { byteCount <= Self.byteLimit }

    /// Whether a frame of `byteCount` fits beside those kept now.
    func hasRoom(for byteCount: Int) -> Bool { count < countLimit && bytes + byteCount <= Self.byteLimit }

    /// Keeps a frame whose pixels `fill` writes (false: it could not, and nothing is kept).
    func append(layout: FrameLayout, metadata: FrameMetadata, fill: (UnsafeMutableRawBufferPointer) -> Bool) -> Bool {
        let pixels = UnsafeMutableRawBufferPointer.allocate(byteCount: layout.byteCount, alignment: 64)
        guard fill(pixels) else {
            pixels.deallocate()
            return false
        }
        frames.append(Frame(layout: layout, metadata: metadata, pixels: pixels))
        bytes += layout.byteCount
        return true
    }

    /// The oldest kept frame is no longer kept; its memory is freed after `body` has seen it.
    func removeFirst(_ body: (Frame) -> Void = { _ in }) {
        guard let frame = first else { return }
        body(frame)
        frame.pixels.deallocate()
        bytes -= frame.layout.byteCount
        startIndex += 1
        if startIndex == frames.count {
            frames.removeAll(keepingCapacity: true)
            startIndex = 0
        } else if startIndex >= 32 && startIndex * 2 >= frames.count {
            // A long wait drops the oldest again and again: the records let go do not pile up meanwhile.
            frames.removeFirst(startIndex)
            startIndex = 0
        }
    }

    /// The oldest kept frame follows a gap now (the one before it was let go).
    func markFirstDiscontinuous() {
        guard !isEmpty else { return }
        frames[startIndex].metadata.flags.insert(.discontinuity)
    }
}
