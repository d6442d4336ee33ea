import Bitstream
import Foundation
import SharedFrames

/// Bytes and RTP packets to NAL units and access units, on the decode thread.
extension StreamWorker {
    // MARK: - Annex B (tcp://, udp://)

    func receive(_ bytes: [UInt8], at time: UInt64) {
        let pendingUnit = splitter.completeLookingUnitHeader
        let previousArrival = lastArrival
        lastArrival = time
        arrivals.append((splitter.statistics.bytesIn, time, nil))
        if arrivals.count > 4096 { arrivals.removeFirst(2048) }
        bytesThisConnection += Int64(bytes.count)
        writer.count(\.bytesReceived, UInt64(bytes.count))
        metrics.bytesReceived.increment(by: Int64(bytes.count))
        let before = splitter.statistics
        splitter.append(bytes) { nalUnitScratch.append($0) }
        let after = splitter.statistics
        metrics.discardedBytes.increment(by: after.discardedBytes - before.discardedBytes)
        if after.oversizedNALUnits > before.oversizedNALUnits {
            metrics.defect("oversized_nal_unit", count: after.oversizedNALUnits - before.oversizedNALUnits)
            log.log(.warning, key: "oversized-nal", now: time,
                    "NAL unit over \(configuration.maxAccessUnitBytes) bytes discarded to the next start code")
        }
        let continuations = after.continuationsAfterFlush - before.continuationsAfterFlush
        if let flushed = idleFlushed, bytes.contains(where: { $0 != 0 }) {
            idleFlushed = nil
            if continuations > 0 {
                prematureIdleFlush(gap: time &- flushed.after, pts: flushed.pts, now: time)
            } else {
                idleFlush?.flushWasRight()
            }
        } else if pendingUnit != nil, !AnnexBSplitter.startsWithStartCode(bytes[...]), time > previousArrival {
            // The bytes went on with a unit that looked complete: a gap inside a NAL unit the interval must cover.
            idleFlush?.continued(afterGap: time - previousArrival)
        }
        if after.discardedBytes > before.discardedBytes && after.oversizedNALUnits == before.oversizedNALUnits
            && continuations == 0 {
            log.log(.warning, key: "garbage", now: time, "bytes outside any NAL unit discarded (\(after.discardedBytes) so far)")
        }
        if after.emptyNALUnits > before.emptyNALUnits {
            metrics.defect("empty_nal_unit", count: after.emptyNALUnits - before.emptyNALUnits)
            log.log(.warning, key: "empty-nal", now: time, "start codes with no NAL unit between them skipped (\(after.emptyNALUnits) so far)")
        }
        processCollectedUnits()
        // The next access unit's first bytes are in: close the one in progress now, not once that NAL unit is whole.
        if let prefix = splitter.unitInProgress, assembler.startsAccessUnit(prefix) { endAccessUnit() }
    }

    // MARK: - Idle flush

    /// When to close the access unit in progress if no bytes come: after a complete-looking unit that can end a
    /// picture, the policy's interval after the last bytes arrived (and never at once: the event loop may hold
    /// bytes it has not handed over yet). Nil: wait for work without a deadline.
    func idleFlushDeadline() -> UInt64? {
        guard let policy = idleFlush, connection != nil, let header = splitter.completeLookingUnitHeader,
              let codec = assembler.codec else { return nil }
        let endsPicture: Bool
        switch codec {
        case .h264:
            let type = header & 0x1f
            endsPicture = (1...5).contains(type) || (assembler.hasPictureInProgress && type == 12)  // slice; filler
        case .h265:
            let type = (header >> 1) & 0x3f
            endsPicture = type < 32 || (assembler.hasPictureInProgress && (type == 38 || type == 40))  // VCL; FD, suffix SEI
        }
        guard endsPicture else { return nil }
        return max(lastArrival + policy.interval, MonotonicClock.nanoseconds() + policy.minimum / 4)
    }

    /// The deadline passed with no bytes. The sender's event loop may still hold bytes the kernel has (it may not
    /// have run: two busy cores): a barrier through it comes back after every read that was ready, and only then,
    /// if no bytes came, is the access unit flushed. One event-loop round trip, tens of microseconds when idle.
    func requestIdleBarrier() {
        guard let eventLoop = senderEventLoop.withLockedValue({ $0 }) else {
            flushIdleTransport()
            return
        }
        barrierCount &+= 1
        let token = barrierCount
        pendingBarrier = token
        barrierToken.withLockedValue { $0 = token }
        eventLoop.execute(barrierTask)
    }

    /// The transport went quiet after a complete-looking NAL unit: hand it and its access unit on now.
    func flushIdleTransport() {
        splitter.flush { nalUnitScratch.append($0) }
        processCollectedUnits()
        let firstPTS = nextPTS
        endAccessUnit()
        idleFlushed = (lastArrival, nextPTS > firstPTS ? firstPTS : nil)
        metrics.idleFlushes.increment()
    }

    func recordIdleFlushInterval() {
        if let interval = idleFlush?.interval { metrics.idleFlushInterval.record(Double(interval) / 1e9) }
    }

    /// Bytes after an idle flush continued the unit it closed (or a slice continued its picture): the sender
    /// paused inside a frame for `gap`. The interval backs off; the frame is damaged, and so are those that
    /// refer to it until the next keyframe.
    func prematureIdleFlush(gap: UInt64, pts: Int64?, now: UInt64) {
        idleFlush?.flushWasPremature(gap: gap)
        recordIdleFlushInterval()
        metrics.defect("premature_idle_flush")
        noteLoss(at: splitter.statistics.bytesIn)
        if let pts, pending[pts] != nil { pending[pts]!.afterLoss = true }
        let interval = Double(idleFlush?.interval ?? 0) / 1e6
        log.log(.warning, key: "premature-flush", now: now,
                "the sender paused \(String(format: "%.1f", Double(gap) / 1e6)) ms inside a NAL unit after an idle flush: frames flagged corrupt until the next keyframe; idle interval now \(String(format: "%.2f", interval)) ms")
    }

    // MARK: - RTP (rtp://)

    /// One datagram: validated as RTP from the stream's source, put in order, depacketized; the marker bit ends
    /// the access unit at once.
    func receivePacket(_ datagram: [UInt8], at time: UInt64) {
        bytesThisConnection += Int64(datagram.count)
        writer.count(\.bytesReceived, UInt64(datagram.count))
        metrics.bytesReceived.increment(by: Int64(datagram.count))
        let packet: RTPPacket
        do {
            packet = try RTPPacket(parsing: datagram[...])
        } catch {
            log.log(.warning, key: "rtp-header", now: time, "datagram is not RTP: \(error); dropped")
            return
        }
        rtp?.push(packet) { rtpEventScratch.append($0) }
        handleCollectedRTPEvents(at: time, packetSSRC: packet.ssrc)
    }

    func handleCollectedRTPEvents(at time: UInt64, packetSSRC: UInt32?) {
        for index in rtpEventScratch.indices {
            switch rtpEventScratch[index] {
            case .packet(let offset, let mediaTimestamp):
                // Recorded in sequence order, at the depacketizer's offset: an access unit's first byte names its packet.
                arrivals.append((offset, time, mediaTimestamp))
                if arrivals.count > 4096 { arrivals.removeFirst(2048) }
            case .nalUnit(let unit):
                push(unit)
            case .endOfAccessUnit:
                endAccessUnit()
            case .lost(let count, let offset):
                metrics.rtpPacketsLost.increment(by: Int64(count))
                noteLoss(at: offset)
                log.log(.warning, key: "rtp-loss", now: time, "\(count) RTP packet(s) lost (\(rtp?.lostPackets ?? 0) so far)")
            case .dropped(let reason, let offset):
                metrics.rtpPayloadsDropped.increment()
                // A duplicate or another payload type's packet takes nothing from the video; other drops leave a hole.
                if reason != .duplicate && reason != .wrongPayloadType { noteLoss(at: offset) }
                log.log(.warning, key: "rtp-\(reason.rawValue)", now: time, "RTP payload dropped: \(reason.rawValue)")
            case .discarded(let reason):
                metrics.rtpDiscarded(reason)
                log.log(.warning, key: "rtp-discard-\(reason.rawValue)", now: time, "RTP packet discarded: \(reason.rawValue) (RFC 3550 source validation)")
            case .sourceChanged(let ssrc, let restarted):
                // What came before belongs to another stream: decode it to the end, then start afresh.
                metrics.rtpSourceChanges.increment()
                finishInput()
                startAfresh()
                log.log(.warning, key: "rtp-source", now: time, restarted
                        ? "RTP sequence numbers restarted (SSRC \(ssrc)): the sender restarted; resynchronised"
                        : "new RTP source (SSRC \(ssrc)) replaces the previous one: resynchronised")
            }
        }
        rtpEventScratch.removeAll(keepingCapacity: true)
        // Asked again every keyframe_request_interval until a keyframe arrives: the request itself may be lost.
        if loss.needsKeyframe, let ssrc = rtp?.ssrc ?? packetSSRC { requestKeyframe(mediaSSRC: ssrc, now: time) }
    }

    /// RTCP PLI or FIR to the sender, at most once per `keyframe_request_interval`.
    private func requestKeyframe(mediaSSRC: UInt32, now: UInt64) {
        guard configuration.keyframeRequest != .none, let send = feedbackSender.withLockedValue({ $0 }) else { return }
        if let last = lastKeyframeRequest, now >= last, now - last < UInt64(configuration.keyframeRequestInterval * 1e9) { return }
        lastKeyframeRequest = now
        let kind: RTCPFeedback.Kind
        if configuration.keyframeRequest == .fir {
            firSequenceNumber &+= 1
            kind = .fullIntraRequest(sequenceNumber: firSequenceNumber)
        } else {
            kind = .pictureLossIndication
        }
        send(RTCPFeedback.keyframeRequest(kind, senderSSRC: rtcpSSRC, mediaSSRC: mediaSSRC))
        metrics.keyframeRequests.increment()
        log.log(.info, key: "keyframe-request", now: now,
                "asked the sender for a keyframe (RTCP \(configuration.keyframeRequest.rawValue.uppercased()))")
    }

    // MARK: - NAL units to access units

    /// The NAL units the splitter put in `nalUnitScratch`, to the assembler; the scratch array is emptied (its
    /// views of the splitter's carry buffer must be gone before the next append).
    func processCollectedUnits() {
        for index in nalUnitScratch.indices { push(nalUnitScratch[index]) }
        nalUnitScratch.removeAll(keepingCapacity: true)
    }

    /// One NAL unit to the assembler. A slice it took or a picture it completed is video: the sender is making
    /// progress (garbage, zero bytes, parameter sets sent again and again, NAL units of no use are not).
    func push(_ unit: NALUnit) {
        let slices = assembler.slicesInProgress
        assembler.push(unit) { eventScratch.append($0) }
        var progress = assembler.slicesInProgress > slices
        for case .accessUnit(let unit) in eventScratch where unit.hasPicture { progress = true }
        if progress { reportProgress(now: MonotonicClock.nanoseconds()) }
        handleCollectedEvents()
    }

    /// Closes the access unit in progress (transport idle, RTP marker, next unit's first bytes, end of input).
    func endAccessUnit() {
        assembler.endAccessUnit { eventScratch.append($0) }
        handleCollectedEvents()
    }

    func handleCollectedEvents() {
        for index in eventScratch.indices { handle(eventScratch[index]) }
        // Emptied only now: the access units in it are decoded, so the assembler gets its buffers back.
        eventScratch.removeAll(keepingCapacity: true)
    }

    /// The chunk or packet that carried byte `offset` of the stream.
    func arrival(ofOffset offset: Int64) -> (time: UInt64, mediaTimestamp: Int64?) {
        for arrival in arrivals.reversed() where arrival.offset <= offset { return (arrival.time, arrival.mediaTimestamp) }
        return (arrivals.first?.time ?? MonotonicClock.nanoseconds(), arrivals.first?.mediaTimestamp)
    }
}
