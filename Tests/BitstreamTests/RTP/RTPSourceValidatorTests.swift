import Bitstream
import Testing

/// RFC 3550 appendix A.1 source validation, with packets on probation held rather than dropped.
@Suite struct RTPSourceValidatorTests {
    func packet(_ sequence: UInt16, ssrc: UInt32 = 0x1111) -> RTPPacket {
        RTPPacket(marker: false, payloadType: 96, sequenceNumber: sequence, timestamp: 0, ssrc: ssrc, payload: [0x65][...])
    }

    /// Runs packets through a validator: what came out, in order ("p<seq>", "new <ssrc>", "restart <ssrc>",
    /// "discard <reason>").
    func run(_ packets: [RTPPacket], validator: inout RTPSourceValidator) -> [String] {
        var out: [String] = []
        for packet in packets {
            validator.push(packet) { event in
                switch event {
                case .packet(let packet): out.append("p\(packet.sequenceNumber)")
                case .newSource(let ssrc, let restarted): out.append("\(restarted ? "restart" : "new") \(ssrc)")
                case .discarded(let reason): out.append("discard \(reason.rawValue)")
                }
            }
        }
        return out
    }

    @Test func aSourceIsConfirmedAfterTwoPacketsInSequenceAndNothingIsLost() {
        var validator = RTPSourceValidator()
        #expect(run([packet(100)], validator: &validator) == [], "the first packet waits for probation")
        #expect(run([packet(101), packet(102)], validator: &validator) == ["new 4369", "p100", "p101", "p102"])
        #expect(validator.ssrc == 0x1111)
    }

    @Test func aStrayPacketOnProbationIsDiscardedWhenTheNextDoesNotFollow() {
        var validator = RTPSourceValidator()
        #expect(run([packet(9), packet(500), packet(501)], validator: &validator) == ["discard probation", "new 4369", "p500", "p501"])
    }

    /// One packet far ahead (a stray, or a forged one) is dropped; the stream goes on as if it had never come.
    @Test func oneJumpAheadIsDroppedAndTheStreamGoesOn() {
        var validator = RTPSourceValidator()
        _ = run([packet(1), packet(2)], validator: &validator)
        #expect(run([packet(30002), packet(3), packet(4)], validator: &validator) == ["discard sequence_jump", "p3", "p4"])
    }

    /// A sender that restarts its numbering (same SSRC): the second packet in the new sequence resynchronises,
    /// and the first is not lost.
    @Test func aRestartedSequenceResynchronisesOnItsSecondPacket() {
        var validator = RTPSourceValidator()
        _ = run([packet(65000), packet(65001)], validator: &validator)
        #expect(run([packet(30000), packet(30001), packet(30002)], validator: &validator) == ["restart 4369", "p30000", "p30001", "p30002"])
    }

    /// Wrap-around, small gaps, and packets a little late are the current source's (the reorder buffer sorts them).
    @Test func wrapGapsAndLatePacketsStayWithTheSource() {
        var validator = RTPSourceValidator()
        _ = run([packet(65534), packet(65535)], validator: &validator)
        #expect(run([packet(0), packet(5), packet(3), packet(2999)], validator: &validator) == ["p0", "p5", "p3", "p2999"])
        #expect(run([packet(2999 &- 90)], validator: &validator) == ["p2909"], "behind by less than MAX_MISORDER")
    }

    /// Two retransmissions in a row, 250 packets behind (NACK's answers at 30 Mbit/s): where anyone may send they
    /// look like a restarted numbering; from an authenticated sender they are late packets of the same source.
    @Test func retransmissionsFarBehindAreLateForAnAuthenticatedSender() {
        var open = RTPSourceValidator()
        _ = run((1000...1300).map { packet(UInt16($0)) }, validator: &open)
        #expect(run([packet(1050), packet(1051)], validator: &open) == ["restart 4369", "p1050", "p1051"])
        var authenticated = RTPSourceValidator(minimumSequential: 1, maximumLateness: RTPSourceValidator.maximumDropout)
        _ = run((1000...1300).map { packet(UInt16($0)) }, validator: &authenticated)
        #expect(run([packet(1050), packet(1051), packet(1301)], validator: &authenticated) == ["p1050", "p1051", "p1301"])
        // A jump of more than 3000 is still one.
        #expect(run([packet(9000), packet(1302)], validator: &authenticated) == ["discard sequence_jump", "p1302"])
    }

    /// A new SSRC (a restarted sender) takes over once two of its packets follow each other; a single packet with
    /// another SSRC takes nothing.
    @Test func aNewSSRCIsANewSourceAfterProbation() {
        var validator = RTPSourceValidator()
        _ = run([packet(10), packet(11)], validator: &validator)
        #expect(run([packet(40000, ssrc: 0x2222), packet(12)], validator: &validator) == ["p12"])
        #expect(run([packet(40001, ssrc: 0x2222), packet(40002, ssrc: 0x2222)], validator: &validator)
                == ["new 8738", "p40000", "p40001", "p40002"])
        #expect(validator.ssrc == 0x2222)
        #expect(run([packet(13)], validator: &validator) == [], "the old source's stragglers are no longer taken")
    }

    /// Where the transport authenticated the sender (SRTP), probation is one packet: its first source and a new
    /// SSRC of its are taken at their first packet, none held back or lost.
    @Test func anAuthenticatedSendersNewSSRCIsItsSourceAtOnce() {
        var validator = RTPSourceValidator(minimumSequential: 1)
        #expect(run([packet(10), packet(11)], validator: &validator) == ["new 4369", "p10", "p11"])
        #expect(run([packet(12, ssrc: 0x2222), packet(13, ssrc: 0x2222)], validator: &validator) == ["new 8738", "p12", "p13"])
        #expect(validator.ssrc == 0x2222)
        #expect(validator.statistics.discarded.isEmpty)
    }
}
