import CFrameRing
import FrameFormats

/// A slot opened ahead of its frame's publication (`FrameRingWriter.beginFrame`): the frame's rows are written into
/// it while the rest of its picture is still being decoded, and `publishChecked(…, continuing:)` adds the rest and
/// publishes it. Readers see the slot as the writer's (its seqlock odd) from the moment it is opened: the frame it
/// held before, the ring's oldest, is overwritten one frame earlier than it would be otherwise.
public struct EarlySlot: Equatable, Sendable {
    public let sequence: UInt64
    public let layout: FrameLayout
    /// Which opening this is: a slot let go and opened again is another.
    let serial: UInt64
}

/// The writer's side of an early slot: where it is, in which object.
struct OpenSlot {
    let slot: EarlySlot
    let index: Int
    let object: SharedMemoryObject
    let geometry: RingGeometry
}

extension FrameRingWriter {
    /// Opens the slot of the next frame for `layout`'s pixels, if the object has room for them now (nothing is made
    /// or waited for here: a frame that needs another object is published the usual way). The slot stays the
    /// writer's until the next publication, which takes it over whatever frame it carries, or `abandonFrame()`.
    public func beginFrame(layout: FrameLayout) -> EarlySlot? {
        if let openSlot {
            if openSlot.slot.layout == layout && openSlot.slot.sequence == shadow.latestSequence + 1 { return openSlot.slot }
            abandonFrame()
        }
        guard let object, !object.faulted, layout.byteCount <= geometry.slotDataCapacity else { return nil }
        earlySerial += 1
        let sequence = shadow.latestSequence + 1
        let index = Int((sequence - 1) % UInt64(geometry.slotCount))
        let early = EarlySlot(sequence: sequence, layout: layout, serial: earlySerial)
        object.withMapping { streamrecv_shm_write_begin(RingPointers(base: $0, geometry: geometry).slot(index)) }
        openSlot = OpenSlot(slot: early, index: index, object: object, geometry: geometry)
        if object.faulted {
            recover(.truncated)
            return nil
        }
        return early
    }

    /// Lets `body` write into the early slot's data (laid out as its layout); false, with nothing written, when the
    /// slot is no longer open (the object was replaced meanwhile). A fault while writing (the object truncated)
    /// moves the stream to a new object and closes the slot.
    @discardableResult
    public func writeEarly(_ early: EarlySlot, _ body: (UnsafeMutableRawBufferPointer) -> Void) -> Bool {
        guard let openSlot, openSlot.slot == early, openSlot.object === object else { return false }
        openSlot.object.withMapping { base in
            let data = RingPointers(base: base, geometry: openSlot.geometry).slotData(openSlot.index)
            body(UnsafeMutableRawBufferPointer(start: data, count: early.layout.byteCount))
        }
        if openSlot.object.faulted {
            recover(.truncated)
            return false
        }
        return true
    }

    /// Closes the early slot holding no frame (`sequence` 0): its frame will not be published.
    public func abandonFrame() {
        guard let openSlot else { return }
        self.openSlot = nil
        closeEmpty(openSlot)
    }

    /// The slot, as readers see it: no frame, the seqlock even.
    func closeEmpty(_ open: OpenSlot) {
        guard !open.object.faulted else { return }
        open.object.withMapping { base in
            let slot = RingPointers(base: base, geometry: open.geometry).slot(open.index)
            slot.pointee.sequence = 0
            streamrecv_shm_write_end(slot)
        }
    }

    /// The object changed: a slot open in the one left is closed there.
    func objectChanged() {
        guard let openSlot, openSlot.object !== object else { return }
        abandonFrame()
    }

    /// The slot `write` is about to fill takes over the open one (the open slot is always the next frame's; one
    /// elsewhere would be a stale one, closed). True when its rows are this frame's: `continuing`, the early slot
    /// whose rows the caller has written, is this one, for this frame's sequence and layout.
    func takeOpenSlot(index: Int, sequence: UInt64, layout: FrameLayout, continuing: EarlySlot?) -> Bool {
        guard let openSlot else { return false }
        guard openSlot.object === object, openSlot.index == index else {
            abandonFrame()
            return false
        }
        self.openSlot = nil
        return continuing == openSlot.slot && openSlot.slot.sequence == sequence && openSlot.slot.layout == layout
    }
}
