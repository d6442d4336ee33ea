import CFFmpeg
import Synchronization

/// One opened device context per accelerator, shared by every decoder of the process.
///
/// Opening a CUDA context takes about 0.3 s and the driver does it one at a time. On an H200 (docs/decoding.md),
/// 48 streams that each opened their own took 14 s to start, and the last of 48 senders connecting together waited
/// 5 s for its decoder. Each stream also kept its own context, which the GPU switches between. FFmpeg's CLI shares one
/// device per type between its decoders in the same way. Every decoder takes its own reference (`av_buffer_ref`), so
/// dropping the shared one never pulls a context from under a decoder.
///
/// A device reported lost is dropped here (`drop`): the next decoder opens a fresh one. The streams still using the
/// old one find out for themselves and fall back (StreamDecoder). At most one drop a minute per accelerator: a
/// sender whose stream makes a working decoder fail must not make every stream wait for a new context again and again.
enum SharedHardwareDevices {
    static let dropInterval: UInt64 = 60_000_000_000

    /// The process's own reference to an opened device context. Non-Sendable; it lives inside its slot's mutex.
    private final class OpenedContext {
        var reference: UnsafeMutablePointer<AVBufferRef>?
        init(_ reference: UnsafeMutablePointer<AVBufferRef>) { self.reference = reference }
        deinit { av_buffer_unref(&reference) }
    }

    /// One lock per accelerator: a slow open (a VDPAU display that does not answer) holds up only the decoders that
    /// want that accelerator, and decoders starting together wait for one open instead of each making their own.
    private final class Slot: Sendable {
        struct State {
            var opened: OpenedContext?
            /// When the last context was dropped (CLOCK_MONOTONIC nanoseconds).
            var droppedAt: UInt64?
        }
        let state = Mutex(State())
    }

    private static let slots: [HardwareAccelerator: Slot] = Dictionary(
        uniqueKeysWithValues: HardwareAccelerator.allCases.map { ($0, Slot()) })

    /// A new reference to the shared context of `accelerator`, opened with `open` when there is none. The caller
    /// owns the reference. A failed open is not remembered: the next decoder tries again.
    static func reference(
        _ accelerator: HardwareAccelerator, open: () -> Result<UnsafeMutablePointer<AVBufferRef>, HardwareProbeFailure>
    ) -> Result<UnsafeMutablePointer<AVBufferRef>, HardwareProbeFailure> {
        slots[accelerator]!.state.withLock { state -> Result<UnsafeMutablePointer<AVBufferRef>, HardwareProbeFailure> in
            if state.opened == nil {
                switch open() {
                case .success(let context): state.opened = OpenedContext(context)
                case .failure(let failure): return .failure(failure)
                }
            }
            guard let shared = state.opened?.reference, let reference = av_buffer_ref(shared) else {
                return .failure(HardwareProbeFailure(reason: "out of memory referencing the device context"))
            }
            return .success(reference)
        }
    }

    /// Forgets the shared context of `accelerator` when `context` refers to it (a device taken for lost), unless
    /// one was dropped less than `dropInterval` before `now`. A context already replaced is left alone: a stream
    /// that reports late does not drop its successor. Returns whether it dropped.
    @discardableResult
    static func drop(_ accelerator: HardwareAccelerator, context: UnsafeMutablePointer<AVBufferRef>, now: UInt64 = monotonicNanoseconds()) -> Bool {
        let lost = Int(bitPattern: context.pointee.data)
        return slots[accelerator]!.state.withLock { state in
            guard let shared = state.opened?.reference, Int(bitPattern: shared.pointee.data) == lost else { return false }
            if let dropped = state.droppedAt, now &- dropped < dropInterval { return false }
            state.opened = nil
            state.droppedAt = now
            return true
        }
    }

    /// Forgets whatever is open for `accelerator` (tests).
    static func dropAll(_ accelerator: HardwareAccelerator) {
        slots[accelerator]!.state.withLock { $0 = Slot.State() }
    }

    /// Whether a shared context of `accelerator` is open (tests).
    static func isOpen(_ accelerator: HardwareAccelerator) -> Bool {
        slots[accelerator]!.state.withLock { $0.opened != nil }
    }
}
