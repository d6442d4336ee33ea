import NIOConcurrencyHelpers
import NIOCore

/// Byte arrays handed from the network event loop to a decode thread and back, so that a steady stream makes no
/// heap allocation per read: the event loop copies a read into a recycled array (`copy`), the decode thread
/// returns it once the splitter is done with it (`recycle`). An array still referenced elsewhere when it comes
/// back (held by a slice still in use, say) is simply copied on its next use: correct, just not free.
final class ByteArrayPool: Sendable {
    /// Arrays kept at most, and the largest kept (a keyframe read whole may be bigger: that one is freed): at
    /// most 4 MiB held per stream. A steady stream has one or two arrays in flight.
    static let capacity = 8
    static let largestKept = 512 << 10
    private let free = NIOLockedValueBox<[[UInt8]]>([])

    init() {
        free.withLockedValue { $0.reserveCapacity(Self.capacity) }
    }

    /// The readable bytes of `buffer` in a recycled array (or a new one when none is free).
    func copy(_ buffer: ByteBuffer) -> [UInt8] {
        var bytes = take()
        buffer.withUnsafeReadableBytes { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// An empty recycled array (or a new one when none is free), for a reader that fills it itself.
    func take() -> [UInt8] {
        var bytes = free.withLockedValue { $0.popLast() } ?? []
        bytes.removeAll(keepingCapacity: true)
        return bytes
    }

    /// Takes an array back for a later `copy`.
    func recycle(_ bytes: [UInt8]) {
        guard bytes.capacity <= Self.largestKept else { return }
        free.withLockedValue { free in
            if free.count < Self.capacity { free.append(bytes) }
        }
    }
}
