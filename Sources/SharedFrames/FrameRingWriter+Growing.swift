import Glibc

/// Moving the stream to an object sized for its frames, made on another thread (`RingObjectMaker`): the decode
/// thread never waits more than `longestWaitForRing` for it, however large the ring and however loaded the machine.
/// (A ring someone else removed or truncated is still replaced at once, same size, on the writer's thread: that takes
/// the daemon's user or root.)
extension FrameRingWriter {
    /// The longest a frame waits for the object it needs: the first frame of a stream (or of a larger format)
    /// is published as soon as its ring is made, which takes milliseconds for common sizes. Past this, frames that
    /// do not fit the current object are refused (`awaitingRing`: the daemon holds them until the new one is ready);
    /// decoding goes on. Half a second keeps a decode queue (8 MiB at least) from overflowing below 128 Mbit/s, and
    /// well within a sender's 2 s hold.
    public static let longestWaitForRing: UInt64 = 500_000_000

    /// Makes sure an object whose slots hold `frameBytes` is being made, unless one at least this large is already
    /// under way (growing wins over shrinking). One object is made at a time: a larger size asked for meanwhile is
    /// made next, so a sender whose SPS changes size every few milliseconds cannot have dozens of rings, each up to
    /// ring_size_limit, being made in /dev/shm at once. False when the size limit refuses even two slots of it, or
    /// it failed within the last second.
    @discardableResult
    func requestObject(capacity frameBytes: Int) -> Bool {
        let now = MonotonicClock.nanoseconds()
        // A size that just failed is not tried again for a second: not an attempt (and a file made) per frame.
        if let failed = failedResize, frameBytes >= failed.bytes, now < failed.time &+ 1_000_000_000 { return false }
        guard let slots = configuration.slots(forCapacity: frameBytes) else {
            failedResize = (frameBytes, now)
            onEvent(.failed("frames of \(frameBytes) bytes need more than ring_size_limit (\(configuration.sizeLimit) bytes) even in 2 slots"))
            return false
        }
        var capacity = frameBytes
        if let maker {
            if maker.capacity >= frameBytes { return true }
            // A shrink under way gives way to growth at once; a smaller growth is finished first.
            if !maker.isFinished && maker.capacity > geometry.slotDataCapacity {
                nextCapacity = max(nextCapacity ?? 0, frameBytes)
                return true
            }
            maker.abandon()
            capacity = max(frameBytes, nextCapacity ?? 0)
        }
        nextCapacity = nil
        let slotsForIt = capacity == frameBytes ? slots : (configuration.slots(forCapacity: capacity) ?? slots)
        maker = RingObjectMaker(capacity: capacity, slots: slotsForIt, configuration: configuration, delay: objectMakingDelay)
        return true
    }

    /// Installs the object under way once it is made, if its slots hold frames of `frameBytes` (one made for a
    /// format that has already passed is thrown away), and starts the next one asked for meanwhile. Waits for it
    /// until `deadline` at most.
    func installMadeObject(forFrameBytes frameBytes: Int, waitingUntil deadline: UInt64 = 0) {
        guard let maker else { return }
        maker.wait(until: deadline)
        guard let made = maker.take() else { return }
        self.maker = nil
        defer {
            if let next = nextCapacity {
                nextCapacity = nil
                if next > geometry.slotDataCapacity { requestObject(capacity: next) }
            }
        }
        let now = MonotonicClock.nanoseconds()
        switch made {
        case .failure(let error):
            failedResize = (maker.capacity, now)
            onEvent(.failed("\(error)"))
        case .success(let made) where made.geometry.slotDataCapacity < frameBytes:
            made.object.discard()
        case .success(let made):
            let before = geometry.totalSize
            // Someone may have shrunk the object we are leaving: that is still worth saying.
            let damaged = object.map { $0.faulted || $0.isShrunk } ?? false
            guard install(made) else {
                failedResize = (maker.capacity, now)
                return
            }
            failedResize = nil
            if damaged { onEvent(.recreated(.truncated)) }
            if geometry.slotCount < configuration.slotCount {
                onEvent(.slotsLimited(wanted: configuration.slotCount, slots: geometry.slotCount, limit: configuration.sizeLimit))
            }
            onEvent(.resized(fromBytes: before, toBytes: geometry.totalSize, slots: geometry.slotCount))
        }
    }

    /// Whether a new object for frames of `frameBytes` is still being made.
    func isMakingObject(for frameBytes: Int) -> Bool {
        guard let maker else { return false }
        // Or one is asked for next, once the smaller one under way is done.
        return maker.capacity >= frameBytes || (nextCapacity ?? 0) >= frameBytes
    }

    /// The object under way is no longer wanted (the writer closes, or stands down for another writer). Removed
    /// at once if made, otherwise by its thread when done.
    func abandonMaking() {
        maker?.abandon()
        maker = nil
        nextCapacity = nil
    }
}
