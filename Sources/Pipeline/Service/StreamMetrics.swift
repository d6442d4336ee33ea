import Bitstream
import CoreMetrics

/// One stream's metrics, through swift-metrics: counters the decode thread bumps as it goes, gauges for what the
/// stream is doing now, and the latency from access unit complete to frame published. Every series carries the
/// `stream` label. Without a `metrics` endpoint the factory is swift-metrics' no-op one: nothing is kept.
/// Nothing here allocates per frame (swift-prometheus counters and histograms are atomics behind a lock).
final class StreamMetrics: Sendable {
    /// Why a frame (or an access unit that would have become one) was not published.
    enum DropReason: String, CaseIterable, Sendable {
        /// Larger than max_width × max_height.
        case tooLarge = "too_large"
        /// A pixel format the ring cannot carry.
        case pixelFormat = "pixel_format"
        /// Decoded after lost data while loss_policy = keyframe.
        case withheld
        /// The frame does not fit a slot.
        case slotCapacity = "slot_capacity"
        /// The shared-memory object vanished and could not be re-created.
        case ringUnavailable = "ring_unavailable"
        /// The larger ring the frame needs was still being made after half a second, and no more frames could be
        /// held for it (`HeldFrames`).
        case awaitingRing = "awaiting_ring"
        /// Its pixels could not be written into the slot (a failed GPU download).
        case writeFailed = "write_failed"
        /// rtp://: packets of the picture arrived, none of its slices could be used (its first fragment was lost).
        case lost
        /// Given to the decoder, which never output it (its data or its references were damaged or missing).
        case undecodable
    }

    /// Why a new sender replaced the current one.
    enum TakeoverReason: String, CaseIterable, Sendable {
        /// second_sender = "takeover".
        case policy
        /// The current sender had delivered no video for a while.
        case stale
    }

    /// Why a connection or datagram was turned away before reaching the decoder.
    enum RefusalReason: String, CaseIterable, Sendable {
        /// The source address is not in `allow`.
        case notAllowed = "not_allowed"
        /// Another sender is streaming (second_sender = refuse).
        case secondSender = "second_sender"
        /// Over `max_connections_per_second`.
        case rateLimited = "rate_limited"
        /// srt://: the caller's encryption does not match `passphrase` (wrong, missing or unexpected).
        case passphrase
        /// whip: a WHIP request without the stream's bearer token.
        case token
    }

    let bytesReceived: Counter
    let accessUnits: Counter
    let framesDecoded: Counter
    let framesPublished: Counter
    let framesCorrupt: Counter
    let decodeErrors: Counter
    let decoderRecreations: Counter
    /// A hardware decoder that failed (before its first frame, or lost later) replaced by software.
    let hardwareFallbacks: Counter
    let connections: Counter
    let rtpPacketsLost: Counter
    let rtpPayloadsDropped: Counter
    let keyframeRequests: Counter
    let discardedBytes: Counter
    /// The shm object re-created because another process truncated or removed it.
    let ringRecreations: Counter
    /// H.264 pictures decoded slice by slice as their slices arrived (Decode/DecodeSession+Parts.swift).
    let picturesDecodedInParts: Counter
    /// Frames most of whose rows went into their slot while their picture's last slices were still arriving
    /// (Decode/FramePublisher.swift, `writeFinalRows`).
    let framesWrittenWhileDecoded: Counter
    /// udp://: datagrams lost before the decoder (kernel receive buffer full, decoder behind, cut short); srt://:
    /// batches of SRT messages dropped while the decoder was behind.
    let datagramsLost: Counter
    /// accept(2) failures on the stream's TCP listener (EMFILE, ENFILE, ENOMEM).
    let acceptErrors: Counter
    /// rtp://: a new RTP source confirmed after another (new SSRC, or sequence numbers restarted).
    let rtpSourceChanges: Counter
    /// srt://: MPEG-TS video packets missing (continuity counter gaps): SRT gave up on them (too late).
    let transportStreamContinuityErrors: Counter
    /// srt://: packets libsrt found missing (most are recovered by retransmission) and dropped for good.
    let srtPacketsLost: Counter
    let srtPacketsDropped: Counter
    /// source = "rtsp://…": sessions that reached PLAY, attempts that failed or sessions that ended (by kind,
    /// `RTSPFailure.kind`), and whether a session is playing now.
    let rtspSessions: Counter
    private let rtspFailures: [String: Counter]
    let rtspPlaying: Gauge
    private let rtpDiscarded: [RTPDiscard: Counter]
    private let ringProblems: [RingProblem: Counter]
    private let takeovers: [TakeoverReason: Counter]
    /// Senders let go because they delivered no video for idle_timeout.
    let idleDisconnects: Counter
    /// Input defects by kind: the assembler's (`AssemblerProblem.Kind`) and the splitter's.
    private let defects: [StreamDefect: Counter]
    private let dropped: [DropReason: Counter]
    private let refused: [RefusalReason: Counter]
    let hardware: Gauge
    let width: Gauge
    let height: Gauge
    let framesPerSecond: Gauge
    /// Access unit complete → frame published (decode time plus any reordering delay).
    let publishLatency: CoreMetrics.Timer
    /// Frame out of the decoder → published: the copy into the slot, or the download from GPU memory into it.
    let frameWrite: CoreMetrics.Timer
    /// Opening a decoder (and closing the one it replaces) at start and at each parameter-set change.
    let decoderCreation: CoreMetrics.Timer

    static let latencyLabel = "streamrecvd_publish_latency_seconds"
    static let writeLabel = "streamrecvd_frame_write_seconds"
    static let creationLabel = "streamrecvd_decoder_creation_seconds"

    init(stream: String, factory: any MetricsFactory = NOOPMetricsHandler.instance) {
        let labels = [("stream", stream)]
        func counter(_ name: String, _ extra: [(String, String)] = []) -> Counter {
            Counter(label: "streamrecvd_\(name)", dimensions: labels + extra, factory: factory)
        }
        func gauge(_ name: String) -> Gauge { Gauge(label: "streamrecvd_\(name)", dimensions: labels, factory: factory) }
        bytesReceived = counter("received_bytes_total")
        accessUnits = counter("access_units_total")
        framesDecoded = counter("frames_decoded_total")
        framesPublished = counter("frames_published_total")
        framesCorrupt = counter("frames_corrupt_total")
        decodeErrors = counter("decode_errors_total")
        decoderRecreations = counter("decoder_recreations_total")
        hardwareFallbacks = counter("decoder_hardware_fallbacks_total")
        connections = counter("connections_total")
        rtpPacketsLost = counter("rtp_packets_lost_total")
        rtpPayloadsDropped = counter("rtp_payloads_dropped_total")
        keyframeRequests = counter("keyframe_requests_total")
        discardedBytes = counter("discarded_bytes_total")
        ringRecreations = counter("ring_recreations_total")
        picturesDecodedInParts = counter("pictures_decoded_in_parts_total")
        framesWrittenWhileDecoded = counter("frames_written_while_decoded_total")
        datagramsLost = counter("datagrams_lost_total")
        acceptErrors = counter("accept_errors_total")
        rtpSourceChanges = counter("rtp_source_changes_total")
        transportStreamContinuityErrors = counter("ts_continuity_errors_total")
        srtPacketsLost = counter("srt_packets_lost_total")
        srtPacketsDropped = counter("srt_packets_dropped_total")
        idleDisconnects = counter("idle_disconnects_total")
        rtspSessions = counter("rtsp_sessions_total")
        rtspFailures = Dictionary(uniqueKeysWithValues: RTSPFailure.kinds.map { ($0, counter("rtsp_failures_total", [("reason", $0)])) })
        rtspPlaying = gauge("rtsp_playing")
        rtpDiscarded = Dictionary(uniqueKeysWithValues: [RTPDiscard.probation, .sequenceJump, .otherSource, .malformed].map {
            ($0, counter("rtp_packets_discarded_total", [("reason", $0.rawValue)]))
        })
        ringProblems = Dictionary(uniqueKeysWithValues: RingProblem.allCases.map {
            ($0, counter("ring_problems_total", [("kind", $0.rawValue)]))
        })
        takeovers = Dictionary(uniqueKeysWithValues: TakeoverReason.allCases.map {
            ($0, counter("sender_takeovers_total", [("reason", $0.rawValue)]))
        })
        defects = Dictionary(uniqueKeysWithValues: StreamDefect.allCases.map {
            ($0, counter("stream_defects_total", [("kind", $0.label)]))
        })
        dropped = Dictionary(uniqueKeysWithValues: DropReason.allCases.map {
            ($0, counter("frames_dropped_total", [("reason", $0.rawValue)]))
        })
        refused = Dictionary(uniqueKeysWithValues: RefusalReason.allCases.map {
            ($0, counter("refused_total", [("reason", $0.rawValue)]))
        })
        hardware = gauge("decoder_hardware")
        width = gauge("frame_width")
        height = gauge("frame_height")
        framesPerSecond = gauge("frames_per_second")
        publishLatency = CoreMetrics.Timer(label: Self.latencyLabel, dimensions: labels, factory: factory)
        decoderCreation = CoreMetrics.Timer(label: Self.creationLabel, dimensions: labels, factory: factory)
        frameWrite = CoreMetrics.Timer(label: Self.writeLabel, dimensions: labels, factory: factory)
    }

    func dropped(_ reason: DropReason) { dropped[reason]?.increment() }

    func defect(_ defect: StreamDefect, count: Int = 1) { defects[defect]?.increment(by: Int64(count)) }

    func refused(_ reason: RefusalReason) { refused[reason]?.increment() }

    func rtpDiscarded(_ reason: RTPDiscard) { rtpDiscarded[reason]?.increment() }

    func ringProblem(_ problem: RingProblem) { ringProblems[problem]?.increment() }

    func takeover(_ reason: TakeoverReason) { takeovers[reason]?.increment() }

    func rtspFailure(_ kind: String) { rtspFailures[kind]?.increment() }

    /// Removes every series of this stream from the endpoint (the stream was removed by a reload).
    func destroy() {
        for counter in [bytesReceived, accessUnits, framesDecoded, framesPublished, framesCorrupt, decodeErrors,
                        decoderRecreations, hardwareFallbacks, connections, rtpPacketsLost, rtpPayloadsDropped, keyframeRequests, discardedBytes, ringRecreations,
                        picturesDecodedInParts, framesWrittenWhileDecoded, datagramsLost, acceptErrors, rtpSourceChanges, idleDisconnects,
                        transportStreamContinuityErrors, srtPacketsLost, srtPacketsDropped, rtspSessions]
            + Array(rtspFailures.values) + Array(dropped.values) + Array(refused.values) + Array(defects.values) + Array(rtpDiscarded.values)
            + Array(ringProblems.values) + Array(takeovers.values) {
            counter.destroy()
        }
        for gauge in [hardware, width, height, framesPerSecond, rtspPlaying] { gauge.destroy() }
        publishLatency.destroy()
        frameWrite.destroy()
        decoderCreation.destroy()
    }
}
