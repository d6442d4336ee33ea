import Bitstream
import CoreMetrics
import Logging

/// srt://: MPEG-TS to the video's Annex B bytes, on the decode thread. A PES packet whose header has a PTS (or says
/// its data is aligned) begins an access unit, so its start ends the one before it: the same moment as tcp://, where
/// the next access unit's first bytes end one (that Annex B rule still applies inside the PES payloads).
extension DecodeSession {
    func receiveTransportStream(_ bytes: [UInt8], at time: UInt64) {
        sender.received(bytes: bytes.count)
        telemetry.received(bytes: bytes.count)
        let demuxed: Void? = framing.withTransportStream { ingest in
            ingest.recordNextArrival = true
            ingest.demuxer.append(bytes) { transportStreamEventScratch.append($0) }
        }
        guard demuxed != nil else { return }
        for index in transportStreamEventScratch.indices {
            handle(transportStreamEventScratch[index], at: time)
        }
        // Emptied only now: the payloads in it are views of `bytes` and of the demuxer's carry buffer.
        transportStreamEventScratch.removeAll(keepingCapacity: true)
    }

    private func handle(_ event: TransportStreamEvent, at time: UInt64) {
        switch event {
        case .pesStart(let pts, let startsAccessUnit):
            // A continuation (no PTS, not aligned) goes on with the access unit in progress, its bytes unflushed.
            guard startsAccessUnit else { return }
            endPESPacket()
            framing.withTransportStream { ingest in
                ingest.pts = pts.map { ingest.unwrap($0) }
                ingest.recordNextArrival = true
            }
        case .payload(let bytes):
            let (record, pts) = framing.withTransportStream { ingest in
                defer { ingest.recordNextArrival = false }
                return (ingest.recordNextArrival, ingest.pts)
            } ?? (false, nil)
            appendAnnexB(bytes, at: time, mediaTimestamp: pts, recordingArrival: record)
        case .pesEnd:
            // Not an end of the access unit: the next PES packet may continue it (and a NAL unit with it). Closing
            // here would be a guess, and a wrong guess damages the frame.
            break
        case .videoLost(let continuityGap):
            noteLoss(at: annexB.bytesIn)
            if continuityGap {
                telemetry.metrics.transportStreamContinuityErrors.increment()
                telemetry.log(.warning, key: "ts-loss", now: time,
                              "MPEG-TS video packets lost (continuity counter gap; \(framing.transportStream?.demuxer.statistics.continuityErrors ?? 0) so far)")
            }
        case .discarded(let reason, let bytes):
            telemetry.metrics.discardedBytes.increment(by: Int64(bytes))
            telemetry.log(.warning, key: "ts-\(reason.rawValue)", now: time, "MPEG-TS bytes discarded: \(Self.explanation(reason))")
        case .videoStream(let codec, let pid):
            if framing.transportStream?.hasVideoStream == true {
                // Another stream now: what came before is decoded to its end, and the new one starts afresh (with
                // codec = auto, detected again), as a new RTP source does.
                finishInput()
                startAfresh()
                telemetry.log(.warning, key: "ts-switch", now: time, "MPEG-TS program now names another video stream: resynchronised")
            }
            framing.withTransportStream { $0.hasVideoStream = true }
            if let configured = configuration.codec, configured != codec {
                telemetry.log(.error, key: "ts-codec", now: time,
                              "the sender's MPEG-TS carries \(codec.rawValue) video (PID \(pid)) but codec = \"\(configured.rawValue)\": set codec = \"auto\" or \"\(codec.rawValue)\"")
            } else {
                telemetry.log(.info, key: "ts-program", now: time, "MPEG-TS program: \(codec.rawValue) video on PID \(pid)")
            }
        case .noSupportedVideo(let types):
            let names = types.map { "0x" + String($0, radix: 16) }.joined(separator: ", ")
            telemetry.log(.error, key: "ts-no-video", now: time,
                          "the sender's MPEG-TS program has no H.264 or H.265 stream (stream types: \(names.isEmpty ? "none" : names)): nothing to decode")
        }
    }

    /// A PES packet that begins an access unit has started: the one before it is over, and so is its last NAL unit.
    private func endPESPacket() {
        annexB.flush { collect($0) }
        processCollectedUnits()
        endAccessUnit()
    }

    private static func explanation(_ reason: TransportStreamDrop) -> String {
        switch reason {
        case .lostSync: return "not 188-byte packets starting with 0x47 (not MPEG-TS, or cut packets)"
        case .transportError: return "packets marked damaged (transport error indicator)"
        case .scrambled: return "video packets are scrambled (TS-level encryption cannot be decoded)"
        case .malformedSection: return "a PAT or PMT section is cut or fails its CRC"
        case .outsidePES: return "video bytes outside a PES packet (joined mid-packet, or after a PES packet's declared end)"
        case .malformedPES: return "a video PES header that cannot be used (its access unit is lost)"
        }
    }
}
