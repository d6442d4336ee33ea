import Bitstream
import StreamrecvTestSupport
import Testing

/// The receiving side of transport-cc on a virtual clock: what it reports, when, and what a sender rebuilds.
@Suite struct TransportWideFeedbackRecorderTests {
    static let millisecond: UInt64 = 1_000_000
    /// Far from zero, as a monotonic clock is.
    static let start: UInt64 = 5_000_000_000_123

    /// The arrival times a sender rebuilds from messages (reference time, then the deltas), by sequence number.
    static func rebuilt(_ messages: [TransportWideFeedback]) -> [UInt16: UInt64] {
        var times: [UInt16: UInt64] = [:]
        for message in messages {
            var time = Int64(message.referenceTime) * Int64(TransportWideFeedback.referenceTickNanoseconds)
            for arrival in message.received {
                time += Int64(arrival.delta) * Int64(TransportWideFeedback.deltaTickNanoseconds)
                times[arrival.sequenceNumber] = UInt64(time)
            }
        }
        return times
    }

    /// The reference time wraps at 2^24 ticks of 64 ms: the arrival modulo that.
    static func wrapped(_ time: UInt64) -> UInt64 { time % ((1 << 24) * TransportWideFeedback.referenceTickNanoseconds) }

    @Test func nothingIsSentBeforeTheIntervalAndEveryArrivalAfter() throws {
        var recorder = TransportWideFeedbackRecorder(senderSSRC: 9)
        #expect(recorder.deadline == nil && recorder.feedback(now: Self.start).isEmpty)
        var sent: [UInt16: UInt64] = [:]
        for index in 0..<30 {
            let arrival = Self.start + UInt64(index) * 1_700_000  // 1.7 ms apart
            recorder.record(sequenceNumber: UInt16(index), mediaSSRC: 77, arrival: arrival)
            sent[UInt16(index)] = arrival
        }
        #expect(recorder.deadline == Self.start + TransportWideFeedbackRecorder.interval)
        #expect(recorder.feedback(now: Self.start + 49 * Self.millisecond).isEmpty)
        let messages = recorder.feedback(now: Self.start + 50 * Self.millisecond)
        let message = try #require(messages.first)
        #expect(messages.count == 1 && message.baseSequenceNumber == 0 && message.statusCount == 30)
        #expect(message.senderSSRC == 9 && message.mediaSSRC == 77 && message.feedbackCount == 0)
        // Rounding never accumulates: every rebuilt time within half a tick.
        for (sequence, time) in Self.rebuilt(messages) {
            let truth = Self.wrapped(try #require(sent[sequence]))
            #expect(max(time, truth) - min(time, truth) <= TransportWideFeedback.deltaTickNanoseconds / 2)
        }
        #expect(recorder.deadline == nil && recorder.feedback(now: Self.start + 200 * Self.millisecond).isEmpty)
    }

    @Test func lostReorderedAndLatePacketsAreReportedAsTheyArrived() throws {
        var recorder = TransportWideFeedbackRecorder(senderSSRC: 1)
        // 65534, 65535, (0 lost), 2 before 1, across the wrap.
        for (sequence, milliseconds) in [(UInt16(65534), 0), (65535, 1), (2, 2), (1, 3)] {
            recorder.record(sequenceNumber: sequence, mediaSSRC: 5, arrival: Self.start + UInt64(milliseconds) * Self.millisecond)
        }
        let first = recorder.feedback(now: Self.start + 60 * Self.millisecond)
        #expect(first.count == 1 && first[0].baseSequenceNumber == 65534 && first[0].statusCount == 5)
        #expect(first[0].received.map(\.sequenceNumber) == [65534, 65535, 1, 2])
        // 2 arrived before 1: its delta from 1 is negative (−1 ms = −4 ticks).
        #expect(first[0].received[3].delta == -4)
        // 0 arrives late, after it was reported lost: the next message starts back at it.
        recorder.record(sequenceNumber: 0, mediaSSRC: 5, arrival: Self.start + 70 * Self.millisecond)
        recorder.record(sequenceNumber: 3, mediaSSRC: 5, arrival: Self.start + 71 * Self.millisecond)
        let second = recorder.feedback(now: Self.start + 130 * Self.millisecond)
        #expect(second.count == 1 && second[0].baseSequenceNumber == 0 && second[0].feedbackCount == 1)
        #expect(second[0].received.map(\.sequenceNumber) == [0, 1, 2, 3])
        // A duplicate (a packet the network doubled) changes nothing: no message, no deadline.
        recorder.record(sequenceNumber: 3, mediaSSRC: 5, arrival: Self.start + 140 * Self.millisecond)
        #expect(recorder.deadline == nil && recorder.feedback(now: Self.start + 200 * Self.millisecond).isEmpty)
    }

    @Test func manyArrivalsAndLongSilencesSplitIntoMessagesThatEachFit() throws {
        var recorder = TransportWideFeedbackRecorder(senderSSRC: 1)
        var generator = SeededGenerator(seed: 7)
        var truth: [UInt16: UInt64] = [:]
        var time = Self.start
        var sequence: UInt16 = 60000
        // 900 packets, some lost, in bursts, with one silence of 9 s (beyond a 16-bit delta of 250 µs ticks).
        for index in 0..<900 {
            time += index == 450 ? 9_000_000_000 : UInt64.random(in: 0...3_000_000, using: &generator)
            sequence &+= 1
            if Int.random(in: 0..<20, using: &generator) == 0 { continue }
            truth[sequence] = time
        }
        for (sequence, arrival) in truth.sorted(by: { $0.value < $1.value }) {
            recorder.record(sequenceNumber: sequence, mediaSSRC: 5, arrival: arrival)
        }
        let messages = recorder.feedback(now: time + TransportWideFeedbackRecorder.interval)
        #expect(messages.count >= 4)
        #expect(messages.allSatisfy { $0.bytes().count < 1000 && $0.received.count <= 300 })
        #expect(messages.map(\.feedbackCount) == (0..<messages.count).map(UInt8.init))
        // Every arrival once, at its time.
        #expect(messages.reduce(0) { $0 + $1.received.count } == truth.count)
        let rebuilt = Self.rebuilt(messages)
        #expect(rebuilt.count == truth.count)
        for (sequence, time) in rebuilt {
            let expected = Self.wrapped(try #require(truth[sequence]))
            #expect(max(time, expected) - min(time, expected) <= 125_000)
        }
    }

    /// A packet filling a hole far behind the last report would move the window back over everything reported since.
    @Test func aPacketFarBehindTheLastReportIsNotReported() throws {
        var recorder = TransportWideFeedbackRecorder(senderSSRC: 1)
        for sequence in 0..<100 where sequence != 5 && sequence != 80 {
            recorder.record(sequenceNumber: UInt16(sequence), mediaSSRC: 5, arrival: Self.start + UInt64(sequence) * 100_000)
        }
        #expect(recorder.feedback(now: Self.start + 60 * Self.millisecond).count == 1)
        recorder.record(sequenceNumber: 5, mediaSSRC: 5, arrival: Self.start + 70 * Self.millisecond)
        #expect(recorder.deadline == nil, "95 behind: not reported")
        recorder.record(sequenceNumber: 80, mediaSSRC: 5, arrival: Self.start + 71 * Self.millisecond)
        let late = recorder.feedback(now: Self.start + 130 * Self.millisecond)
        #expect(late.count == 1 && late[0].baseSequenceNumber == 80 && late[0].statusCount == 20)
    }

    @Test func aFloodKeepsWhatItHoldsBounded() {
        var recorder = TransportWideFeedbackRecorder(senderSSRC: 1)
        // Sequence numbers all over the place, all within one interval.
        var generator = SeededGenerator(seed: 3)
        for index in 0..<50_000 {
            recorder.record(sequenceNumber: UInt16.random(in: 0...UInt16.max, using: &generator), mediaSSRC: 5, arrival: Self.start + UInt64(index))
        }
        let messages = recorder.feedback(now: Self.start + TransportWideFeedbackRecorder.interval)
        // Scattered numbers would take a message each: at most 8 go out, each under 1000 bytes.
        #expect(messages.count == TransportWideFeedbackRecorder.maximumMessages)
        #expect(messages.allSatisfy { $0.bytes().count < 1000 })
        #expect(recorder.deadline == nil && recorder.feedback(now: Self.start + 10 * TransportWideFeedbackRecorder.interval).isEmpty)
    }
}
