/// The receiving end of one RTP video stream, the same for rtp://, rtsp:// and WHIP, and the one place the daemon's
/// RTCP feedback is made: which packets are the stream's (source validation, a new source followed, RTX repairs
/// unwrapped, RFC 4588), in which order (`RTPPacketOrder`), which are missing and asked for again (generic NACK, RFC 4585 §6.2.1), the reception statistics and receiver
/// reports (RFC 3550 §6.4.2), and keyframe requests (PLI, RFC 4585 §6.3.1, or FIR, RFC 5104 §4.3.1) paced by an
/// interval.
///
/// No I/O and no clock: every input carries its time, the stream's packets come out of `receive` in sequence order
/// for the depacketizer, and what to send comes out of `poll(now:)`, with `nextDeadline` saying when to poll again. The transport that owns it protects (SRTP) and addresses what comes
/// out; one owner drives it.
public struct RTPReceiver: Sendable {
    public enum KeyframeRequest: Sendable, Equatable {
        case pictureLossIndication
        case fullIntraRequest
    }

    public struct Configuration: Sendable, Equatable {
        /// This receiver's SSRC in every RTCP packet it makes.
        public var localSSRC: UInt32
        public var cname = "streamrecvd"
        public var clockRate: UInt32 = 90000
        /// The video's payload type; nil: every packet the transport lets through is the video.
        public var payloadType: UInt8?
        /// RTX packets (RFC 4588) of this type repeat lost ones; nil: no RTX.
        public var retransmissionPayloadType: UInt8?
        /// Gaps are asked for again (generic NACK): only where the sender retransmits.
        public var requestsRetransmissions = false
        /// How keyframes are asked for; nil: never.
        public var keyframeRequest: KeyframeRequest?
        /// Nanoseconds between two keyframe requests while one is wanted (the request itself may be lost).
        public var keyframeRequestInterval: UInt64 = 1_000_000_000
        /// Each new source's first packet asks for a keyframe: a sender may start mid-GOP, and a restarted encoder's
        /// first picture may refer to what it never sent.
        public var asksNewSourcesForKeyframes = false
        /// Receiver reports every this many nanoseconds, the first `firstReportDelay` after the start; nil: none.
        public var reportInterval: UInt64? = 1_000_000_000
        public var firstReportDelay: UInt64 = 1_000_000_000
        /// Reports go out before the first packet too (an RR without a block: an RTSP server sees the client alive).
        public var reportsBeforeMedia = false
        /// Packets a late one may be overtaken by and still be put back in its place.
        public var reorderWindow = 16
        /// The transport authenticated every packet (SRTP): a new SSRC is the sender's new source at its first packet
        /// (followed at most twice a second, never back), where anyone else's must first pass probation (RFC 3550
        /// appendix A.1) and the statistics follow only the source that did.
        public var authenticatedSources = false

        public init(localSSRC: UInt32 = .random(in: 1...UInt32.max)) {
            self.localSSRC = localSSRC
        }
    }

    /// What a packet is to the decoder.
    public enum Reception: Sendable, Equatable {
        /// The video, as it came.
        case media
        /// An RTX packet answering one of our requests: the packet it repeats, as the current source's.
        case repaired(RTPPacket)
        /// Nothing for the decoder: an RTX padding probe or late answer, another payload type, a source not followed.
        case ignored
    }

    /// RTCP to send to the sender, each a compound packet of its own.
    public enum Feedback: Sendable, Equatable {
        /// Generic NACK naming `sequenceNumbers` missing packets.
        case retransmissionRequest([UInt8], sequenceNumbers: Int)
        case keyframeRequest([UInt8])
        case receiverReport([UInt8])

        public var packet: [UInt8] {
            switch self {
            case .retransmissionRequest(let packet, _), .keyframeRequest(let packet), .receiverReport(let packet): packet
            }
        }
    }

    /// The sender moved to another SSRC (an encoder restart), and the receiver followed.
    public struct SourceChange: Sendable, Equatable {
        public var from: UInt32
        public var to: UInt32
    }

    /// Whether a keyframe of which source is wanted.
    private enum KeyframeNeed: Sendable {
        case satisfied
        /// A new source's: asked for once.
        case once(source: UInt32)
        /// The decoder's (it lost packets): asked for every interval until it heals.
        case wanted(source: UInt32)
    }

    /// After a change, other SSRCs are not followed for this long: a sender juggling SSRCs (each change restarts the
    /// decode side and asks for a keyframe) gets at most two a second.
    public static let sourceChangeInterval: UInt64 = 500_000_000

    public let configuration: Configuration
    public private(set) var statistics: RTPReceptionStatistics
    private var order: RTPPacketOrder
    /// Reused for every packet: no allocation per packet in steady state.
    private var ordered: [RTPOrderedEvent] = []
    private var loss = LossRecovery()
    /// The SSRC the sender left at its last change: its late packets are dropped, not followed back to.
    private var previousSSRC: UInt32?
    private var lastSourceChange: UInt64?
    private var pendingSourceChange: SourceChange?
    private var keyframe = KeyframeNeed.satisfied
    private var lastKeyframeRequest: UInt64?
    private var firSequenceNumber: UInt8 = 0
    private var nextReport: UInt64?

    /// - Parameter now: the start, from which the first report is timed.
    public init(_ configuration: Configuration, now: UInt64) {
        self.configuration = configuration
        statistics = RTPReceptionStatistics(clockRate: configuration.clockRate)
        order = RTPPacketOrder(reorderWindow: configuration.reorderWindow, authenticatedSources: configuration.authenticatedSources)
        nextReport = configuration.reportInterval.map { _ in now &+ configuration.firstReportDelay }
    }

    /// The current source's SSRC, once a packet of the video has arrived.
    public var ssrc: UInt32? { statistics.ssrc }

    // MARK: - Inputs

    /// A packet from the sender (already admitted by the transport: its address, SRTP), at its arrival. `deliver`
    /// gets what is now in order for the depacketizer: this packet, others it released from the reorder window, a
    /// source change, or a packet discarded by source validation.
    public mutating func receive(_ packet: RTPPacket, now: UInt64, _ deliver: (RTPOrderedEvent) -> Void) -> Reception {
        let reception: Reception
        if let rtx = configuration.retransmissionPayloadType, packet.payloadType == rtx {
            guard let original = repaired(packet) else { return .ignored }
            reception = .repaired(original)
        } else {
            if let video = configuration.payloadType, packet.payloadType != video { return .ignored }
            reception = .media
        }
        let media = if case .repaired(let original) = reception { original } else { packet }
        // The statistics count each packet once, at its arrival, where it is of the source already confirmed; where
        // anyone may send, a new source's first packets count when it is confirmed (they come out then), and a
        // stranger's never count.
        let confirmed = order.ssrc
        if configuration.authenticatedSources {
            if media.ssrc != statistics.ssrc, !follow(media.ssrc, now: now) { return .ignored }
            record(media, now: now)
        } else if media.ssrc == confirmed {
            record(media, now: now)
        }
        var events = ordered
        ordered = []
        events.removeAll(keepingCapacity: true)
        order.push(media) { events.append($0) }
        for event in events {
            if !configuration.authenticatedSources, case .packet(let released) = event, released.ssrc != confirmed {
                if released.ssrc != statistics.ssrc { adopt(released.ssrc, now: now) }
                record(released, now: now)
            }
            deliver(event)
        }
        ordered = events
        return reception
    }

    /// The sender is gone: what the reorder window and probation still hold, in order.
    public mutating func flush(_ deliver: (RTPOrderedEvent) -> Void) {
        order.flush(deliver)
    }

    /// Another sender took the stream's place (rtp://: another address): its packets are ordered, counted and
    /// validated afresh. A keyframe wanted of the one before is moot; the requests' pacing stays.
    public mutating func senderChanged() {
        order = RTPPacketOrder(reorderWindow: configuration.reorderWindow, authenticatedSources: configuration.authenticatedSources)
        statistics = RTPReceptionStatistics(clockRate: configuration.clockRate)
        loss = LossRecovery()
        previousSSRC = nil
        lastSourceChange = nil
        pendingSourceChange = nil
        keyframe = .satisfied
    }

    /// What the sender's RTCP said: its report, when it is the current source's, times our reports' delay fields.
    public mutating func receive(_ news: RTPReceptionStatistics.SenderNews, now: UInt64) {
        if let report = news.senderReport, report.ssrc == statistics.ssrc {
            statistics.recordSenderReport(ntpTimestamp: report.ntpTimestamp, arrival: now)
        }
    }

    /// The decoder lost what it needs of `source`: a keyframe is asked for at the next poll (unless one was asked for
    /// within the interval), then every interval until `keyframeArrived`. Ignored for another source than the
    /// current one (a wish that crossed a source change: the new source is not asked for the old one's keyframe).
    public mutating func keyframeWanted(of source: UInt32) {
        if let current = statistics.ssrc, current != source { return }
        keyframe = .wanted(source: source)
    }

    /// The decoder healed: its requests stop, and its next loss is asked for at once. A new source's own request is
    /// not the decoder's: it stays, and so does its pacing.
    public mutating func keyframeArrived() {
        guard case .wanted = keyframe else { return }
        keyframe = .satisfied
        lastKeyframeRequest = nil
    }

    /// The decoder no longer waits for the keyframe it wanted (its source or sender changed, nothing healed): the
    /// requests stop, and the next is still paced from the last one, so that a sender changing its source at every
    /// packet does not get a request for each.
    public mutating func keyframeNoLongerWanted() {
        guard case .wanted = keyframe else { return }
        keyframe = .satisfied
    }

    // MARK: - Outputs

    /// What to send now: NACKs due, a keyframe request due, a receiver report due, in that order.
    public mutating func poll(now: UInt64) -> [Feedback] {
        var feedback: [Feedback] = []
        if configuration.requestsRetransmissions, let ssrc = statistics.ssrc { appendRetransmissionRequests(of: ssrc, now: now, to: &feedback) }
        if let request = dueKeyframeRequest(now: now) { feedback.append(.keyframeRequest(request)) }
        if let interval = configuration.reportInterval, let due = nextReport, now >= due,
           statistics.ssrc != nil || configuration.reportsBeforeMedia {
            nextReport = now &+ interval
            feedback.append(.receiverReport(statistics.report(senderSSRC: configuration.localSSRC, cname: configuration.cname, now: now)))
        }
        return feedback
    }

    /// When `poll` may have something new without a new input: a NACK to send or send again, the next retry of a
    /// wanted keyframe, the next report.
    public var nextDeadline: UInt64? {
        let keyframeDue: UInt64? = switch keyframe {
        case _ where configuration.keyframeRequest == nil, .satisfied: nil
        case .once, .wanted: lastKeyframeRequest.map { $0 &+ configuration.keyframeRequestInterval } ?? 0
        }
        let reportDue = statistics.ssrc != nil || configuration.reportsBeforeMedia ? nextReport : nil
        let retransmissionDue = configuration.requestsRetransmissions && statistics.ssrc != nil ? loss.nextDeadline : nil
        func earlier(_ first: UInt64?, _ second: UInt64?) -> UInt64? { first.map { first in second.map { min(first, $0) } ?? first } ?? second }
        return earlier(earlier(keyframeDue, reportDue), retransmissionDue)
    }

    /// The source change since the last call, if any: for the transport's counter and log.
    public mutating func takeSourceChange() -> SourceChange? {
        defer { pendingSourceChange = nil }
        return pendingSourceChange
    }

    /// Packets asked for that arrived since the last call.
    public mutating func takeRecoveredCount() -> Int { loss.takeRecoveredCount() }

    /// Losses given up on since the last call.
    public mutating func takeUnrecoveredCount() -> Int { loss.takeUnrecoveredCount() }

    // MARK: - Inside

    private mutating func record(_ packet: RTPPacket, now: UInt64) {
        statistics.record(ssrc: packet.ssrc, sequenceNumber: packet.sequenceNumber, timestamp: packet.timestamp, arrival: now)
        loss.received(packet.sequenceNumber, now: now)
    }

    /// Whether a packet of another SSRC than the current one starts the sender's new source (an encoder restart):
    /// followed at once, with loss recovery and RTX mapped to it (the statistics start afresh on their own). Not
    /// followed: the SSRC just left (late packets), or any within `sourceChangeInterval` of the last change.
    private mutating func follow(_ ssrc: UInt32, now: UInt64) -> Bool {
        if statistics.ssrc != nil {
            if ssrc == previousSSRC { return false }
            if let last = lastSourceChange, now &- last < Self.sourceChangeInterval { return false }
        }
        adopt(ssrc, now: now)
        return true
    }

    /// `ssrc` is the current source from now on: loss recovery and RTX map to it (the statistics start afresh on
    /// their own at its first packet).
    private mutating func adopt(_ ssrc: UInt32, now: UInt64) {
        if let current = statistics.ssrc {
            previousSSRC = current
            lastSourceChange = now
            pendingSourceChange = SourceChange(from: current, to: ssrc)
            loss.restart()
        }
        // What the decoder wanted of the source before is moot; the pacing stays, but where the new source is asked.
        if configuration.asksNewSourcesForKeyframes {
            keyframe = .once(source: ssrc)
            lastKeyframeRequest = nil
        } else {
            keyframe = .satisfied
        }
    }

    /// The packet an RTX packet repeats (RFC 4588 §4: the original sequence number, then the original payload), as
    /// the current source's whatever the repair SSRC (the offer's FID group may be absent, and a restarted sender
    /// picks a new one); nil unless it answers one of our requests (a padding probe, a late answer about the source
    /// before).
    private func repaired(_ rtx: RTPPacket) -> RTPPacket? {
        guard rtx.payload.count > 2, let ssrc = statistics.ssrc, let video = configuration.payloadType else { return nil }
        let original = UInt16(rtx.payload[rtx.payload.startIndex]) << 8 | UInt16(rtx.payload[rtx.payload.startIndex + 1])
        guard loss.isMissing(original) else { return nil }
        return RTPPacket(marker: rtx.marker, payloadType: video, sequenceNumber: original,
                         timestamp: rtx.timestamp, ssrc: ssrc, payload: rtx.payload.dropFirst(2))
    }

    private mutating func appendRetransmissionRequests(of ssrc: UInt32, now: UInt64, to feedback: inout [Feedback]) {
        let missing = loss.due(now: now)
        guard !missing.isEmpty else { return }
        for chunk in RTCPTransportFeedback.genericNACKEntryGroups(lost: missing) {
            let named = chunk.reduce(0) { $0 + 1 + $1.lostBitmask.nonzeroBitCount }
            feedback.append(.retransmissionRequest(
                RTCPTransportFeedback.genericNACK(senderSSRC: configuration.localSSRC, mediaSSRC: ssrc, entries: chunk),
                sequenceNumbers: named))
        }
    }

    private mutating func dueKeyframeRequest(now: UInt64) -> [UInt8]? {
        guard let kind = configuration.keyframeRequest else { return nil }
        let source: UInt32
        switch keyframe {
        case .satisfied: return nil
        case .once(let wanted), .wanted(let wanted): source = wanted
        }
        // A `now` older than the last request (read before it, by another caller) is not yet due either.
        if let last = lastKeyframeRequest, now < last.addingReportingOverflow(configuration.keyframeRequestInterval).partialValue { return nil }
        lastKeyframeRequest = now
        if case .once = keyframe { keyframe = .satisfied }
        let request: RTCPFeedback.Kind
        switch kind {
        case .pictureLossIndication:
            request = .pictureLossIndication
        case .fullIntraRequest:
            firSequenceNumber &+= 1
            request = .fullIntraRequest(sequenceNumber: firSequenceNumber)
        }
        return RTCPFeedback.keyframeRequest(request, senderSSRC: configuration.localSSRC, mediaSSRC: source)
    }
}
