import Bitstream
import CoreMetrics
import Logging
import NIOConcurrencyHelpers
import SharedFrames

/// Bytes and RTP packets to NAL units and access units, on the decode thread.
extension DecodeSession {
    // MARK: - Annex B (tcp://, udp://)

    func receive(_ bytes: [UInt8], at time: UInt64) {
        sender.received(bytes: bytes.count)
        telemetry.received(bytes: bytes.count)
        appendAnnexB(bytes[...], at: time)
    }

    /// Annex B bytes of the stream (all of a tcp:// or udp:// read, a PES payload of srt://). `mediaTimestamp`: the
    /// presentation time of access units that begin in these bytes, when the transport says.
    func appendAnnexB(_ bytes: ArraySlice<UInt8>, at time: UInt64, mediaTimestamp: Int64? = nil, recordingArrival: Bool = true) {
        if recordingArrival { arrivals.record(offset: annexB.bytesIn, time: time, mediaTimestamp: mediaTimestamp) }
        annexB.append(bytes) { collect($0, at: time) }
        processCollectedUnits()
        // The next access unit's first bytes are in: close the one in progress now, not once that NAL unit is whole.
        // This, the end of the input and an end-of-sequence NAL unit are the only ends Annex B has: the daemon never
        // closes an access unit on a guess (a pause in the bytes), because a wrong guess damages the frame and
        // every frame that refers to it (docs/latency.md). Senders that want their last frame at once send the
        // next access unit's delimiter right after it, as `streamrecvctl send` does.
        if let prefix = annexB.unitInProgress, assembler.startsAccessUnit(prefix) { endAccessUnit() }
    }

    /// An Annex B ingest event: NAL units are collected (they are handed to the assembler with the first bytes of
    /// the unit after them), defects counted and logged.
    func collect(_ event: AnnexBIngest.Event, at arrival: UInt64? = nil) {
        let time = arrival ?? clock.now()
        switch event {
        case .nalUnit(let unit):
            nalUnitScratch.append(unit)
        case .discarded(let bytes, let total, let inOversizedUnit):
            telemetry.metrics.discardedBytes.increment(by: bytes)
            if !inOversizedUnit {
                telemetry.log(.warning, key: "garbage", now: time, "bytes outside any NAL unit discarded (\(total) so far)")
            }
        case .defect(let defect, let count, let total):
            telemetry.defect(defect, count: count)
            switch defect {
            case .oversizedNALUnit:
                telemetry.log(.warning, key: "oversized-nal", now: time,
                              "NAL unit over \(configuration.maxAccessUnitBytes) bytes discarded to the next start code")
            default:
                telemetry.log(.warning, key: "empty-nal", now: time, "start codes with no NAL unit between them skipped (\(total) so far)")
            }
        }
    }

    // MARK: - RTP (rtp://, rtsp://, whip)

    /// What the transport's RTP receiver made of one datagram `bytes` long, in order: packets to depacketize (the
    /// marker bit ends the access unit at once), a source change, packets it discarded.
    func receive(_ events: [RTPOrderedEvent], bytes: Int, at time: UInt64) {
        sender.received(bytes: bytes)
        telemetry.received(bytes: bytes)
        var lastSSRC: UInt32?
        for event in events {
            switch event {
            case .packet(let packet):
                lastSSRC = packet.ssrc
                framing.withRTP { $0.push(packet) { rtpEventScratch.append($0) } }
            case .sourceChanged(let ssrc, let restarted):
                framing.withRTP { $0.sourceChanged(to: ssrc, restarted: restarted) { rtpEventScratch.append($0) } }
            case .discarded(let reason):
                rtpEventScratch.append(.discarded(reason))
            }
        }
        handleCollectedRTPEvents(at: time, packetSSRC: lastSSRC)
    }

    func handleCollectedRTPEvents(at time: UInt64, packetSSRC: UInt32?) {
        for index in rtpEventScratch.indices {
            switch rtpEventScratch[index] {
            case .packet(let offset, let mediaTimestamp):
                // Recorded in sequence order, at the depacketizer's offset: an access unit's first byte names its packet.
                arrivals.record(offset: offset, time: time, mediaTimestamp: mediaTimestamp)
            case .nalUnit(let unit):
                // Within one RTP timestamp the marker ends the access unit: a repeated parameter set between its
                // slices must not cut the picture in two (each half would be published as a damaged frame).
                if assembler.repeatsParameterSetWithinPicture(unit) {
                    telemetry.log(.debug, key: "rtp-repeated-parameter-set", now: time,
                                  "a parameter set repeated between the slices of a picture skipped (the sender's payloader puts them there)")
                    continue
                }
                push(unit)
            case .endOfAccessUnit:
                endAccessUnit()
            case .lost(let count, let offset):
                telemetry.metrics.rtpPacketsLost.increment(by: Int64(count))
                noteLoss(at: offset)
                lossInAccessUnit = true
                telemetry.log(.warning, key: "rtp-loss", now: time, "\(count) RTP packet(s) lost (\(framing.rtp?.lostPackets ?? 0) so far)")
            case .truncated(let offset):
                noteLoss(at: offset)
                lossInAccessUnit = true
                telemetry.log(.warning, key: "rtp-truncated", now: time,
                              "the RTP source stopped inside an access unit (its last packets never came): that frame follows loss_policy")
            case .dropped(let reason, let offset):
                telemetry.metrics.rtpPayloadsDropped.increment()
                // A duplicate or another payload type's packet takes nothing from the video; other drops leave a hole.
                if reason != .duplicate && reason != .wrongPayloadType { noteLoss(at: offset) }
                telemetry.log(.warning, key: "rtp-\(reason.rawValue)", now: time, "RTP payload dropped: \(reason.rawValue)")
            case .discarded(let reason):
                telemetry.metrics.rtpDiscarded(reason)
                telemetry.log(.warning, key: "rtp-discard-\(reason.rawValue)", now: time,
                              "RTP packet discarded: \(reason.rawValue) (RFC 3550 source validation)")
            case .sourceChanged(let ssrc, let restarted):
                // What came before belongs to another stream: decode it to the end, then start afresh.
                telemetry.metrics.rtpSourceChanges.increment()
                finishInput()
                startAfresh()
                applySessionMedia()  // rtsp://: the SDP's codec and parameter sets hold for the new source too
                telemetry.log(.warning, key: "rtp-source", now: time, restarted
                              ? "RTP sequence numbers restarted (SSRC \(ssrc)): the sender restarted; resynchronised"
                              : "new RTP source (SSRC \(ssrc)) replaces the previous one: resynchronised")
            }
        }
        rtpEventScratch.removeAll(keepingCapacity: true)
        // The receiver asks again every keyframe_request_interval until told a keyframe arrived.
        if loss.needsKeyframe, let ssrc = framing.rtp?.ssrc ?? packetSSRC { wantKeyframe(of: ssrc, now: time) }
    }

    /// Tells the stream's RTP receiver that a keyframe of `source` is wanted, once per loss (it paces the requests).
    private func wantKeyframe(of source: UInt32, now: UInt64) {
        keyframeWish.want(source) { source in
            guard worker.signalKeyframe(.wanted(source)) else { return false }
            telemetry.log(.info, key: "keyframe-request", now: now,
                          "asked the sender for a keyframe (RTCP \(configuration.rtp.keyframeRequest.rawValue.uppercased()))")
            return true
        }
    }

    /// The keyframe wanted is here (`healed`), or moot (a new source or sender): the receiver stops asking.
    func settleKeyframeWish(healed: Bool) {
        keyframeWish.settle { _ = worker.signalKeyframe(healed ? .arrived : .dropped) }
    }

    // MARK: - NAL units to access units

    /// The NAL units collected in `nalUnitScratch`, to the assembler; the scratch array is emptied (its views of
    /// the splitter's carry buffer must be gone before the next append). Each goes with the first bytes of the one
    /// after it, where they are in: they tell whether a slice was its picture's last.
    func processCollectedUnits() {
        for index in nalUnitScratch.indices {
            let next = index + 1 < nalUnitScratch.count ? nalUnitScratch[index + 1].bytes : annexB.unitInProgress
            push(nalUnitScratch[index], next: next)
        }
        nalUnitScratch.removeAll(keepingCapacity: true)
    }

    /// One NAL unit to the assembler. A slice it took or a picture it completed is video: the sender is making
    /// progress (garbage, zero bytes, parameter sets sent again and again, NAL units of no use are not).
    /// `next`: the first bytes of the NAL unit after it, when they are in.
    func push(_ unit: NALUnit, next: ArraySlice<UInt8>? = nil) {
        let slices = assembler.slicesInProgress
        assembler.push(unit) { eventScratch.append($0) }
        var progress = false
        var completed = false
        for case .accessUnit(let unit) in eventScratch {
            completed = true
            if unit.hasPicture { progress = true }
        }
        // The slice count restarts when the unit began a new access unit.
        let sliceJoined = assembler.slicesInProgress > (completed ? 0 : slices)
        if progress || sliceJoined { reportProgress(now: clock.now()) }
        handleCollectedEvents()
        if sliceJoined { decodeNewSlice(last: next.map { assembler.startsAccessUnit($0) } ?? false) }
    }

    /// Closes the access unit in progress (RTP marker, next unit's first bytes, end of input).
    func endAccessUnit() {
        assembler.endAccessUnit { eventScratch.append($0) }
        handleCollectedEvents()
    }

    func handleCollectedEvents() {
        for index in eventScratch.indices { handle(eventScratch[index]) }
        // Emptied only now: the access units in it are decoded, so the assembler gets its buffers back.
        eventScratch.removeAll(keepingCapacity: true)
    }

    /// The arrival of byte `offset` of the stream: its chunk's or packet's time, and RTP timestamp.
    func arrival(ofOffset offset: Int64) -> (time: UInt64, mediaTimestamp: Int64?) {
        arrivals.arrival(ofOffset: offset) ?? (clock.now(), nil)
    }
}
