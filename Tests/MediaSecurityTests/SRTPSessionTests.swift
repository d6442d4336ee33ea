@testable import MediaSecurity
import Testing

/// One libsrtp session in one direction (RFC 3711, RFC 7714 for AES-GCM): round trips, tampering, the replay
/// window, the rollover counter, SRTCP's index, and the limits on what it takes. Fixed keys, not a handshake:
/// what is tested here is the packet transform, whatever the keys.
@Suite struct SRTPSessionTests {
    static let profiles: [SRTPProfile] = [.aeadAes128Gcm, .aes128CmSha1_80]

    /// A sender and a receiver with the same key and salt.
    static func pair(_ profile: SRTPProfile) throws -> (sender: SRTPSession, receiver: SRTPSession) {
        (try session(profile, .outbound), try session(profile, .inbound))
    }

    static func session(_ profile: SRTPProfile, _ direction: SRTPSession.Direction) throws -> SRTPSession {
        try SRTPSession(
            profile: profile, key: (0..<16).map { UInt8($0 &* 13 &+ 5) },
            salt: (0..<profile.saltLength).map { UInt8(0xC0 | $0) }, direction: direction)
    }

    static func tagLength(_ profile: SRTPProfile) -> Int { profile == .aeadAes128Gcm ? 16 : 10 }

    static func rtp(_ sequence: UInt16) -> [UInt8] { SRTPContextTests.rtpPacket(sequence: sequence) }

    /// The header stays readable (RTP needs it to route), the payload does not, the tag is added, and the
    /// receiver gets back exactly what was sent.
    @Test(arguments: profiles)
    func aProtectedPacketHasItsPayloadHiddenAndUnprotectsToTheSameBytes(profile: SRTPProfile) throws {
        let (sender, receiver) = try Self.pair(profile)
        let packet = Self.rtp(4711)
        let protected = try sender.protect(packet, rtcp: false).get()
        #expect(protected.count == packet.count + Self.tagLength(profile))
        #expect(protected[..<12] == packet[..<12], "the RTP header is sent in the clear")
        #expect(protected[12..<packet.count] != packet[12...], "the payload is encrypted")
        #expect(try receiver.unprotect(protected, rtcp: false).get() == packet)
    }

    /// A sender that holds the keys and changes SSRC on every packet: libsrtp keeps at most
    /// `SRTPStreamRoster.capacity` streams, so the oldest SSRC's stream (and its replay window) is gone once that
    /// many others came after it, while the recent ones keep theirs.
    @Test(arguments: profiles)
    func aSenderOfEverNewSSRCsLeavesAtMostTheRostersStreams(profile: SRTPProfile) throws {
        let (sender, receiver) = try Self.pair(profile)
        let capacity = UInt32(SRTPStreamRoster.capacity)
        let packets = try (0...capacity).map { try sender.protect(SRTPContextTests.rtpPacket(sequence: 1, ssrc: 0x100 + $0), rtcp: false).get() }
        for packet in packets.dropLast() { #expect(throws: Never.self) { try receiver.unprotect(packet, rtcp: false).get() } }
        // All of them fit: the first SSRC's stream still knows its packet.
        #expect(receiver.unprotect(packets[0], rtcp: false) == .failure(.replayed))
        #expect(throws: Never.self) { try receiver.unprotect(packets[Int(capacity)], rtcp: false).get() }
        // One more SSRC: the first, unused the longest (a refused replay uses nothing), lost its stream, so its packet
        // is taken again; the second and the newest still refuse theirs.
        #expect(receiver.unprotect(packets[1], rtcp: false) == .failure(.replayed))
        #expect(receiver.unprotect(packets[Int(capacity)], rtcp: false) == .failure(.replayed))
        #expect(throws: Never.self) { try receiver.unprotect(packets[0], rtcp: false).get() }
        // Ten thousand more: each is taken, and the session stays at the roster's size.
        for ssrc in UInt32(0x10000)..<UInt32(0x10000 + 10_000) {
            let packet = try sender.protect(SRTPContextTests.rtpPacket(sequence: 7, ssrc: ssrc, payload: 20), rtcp: false).get()
            #expect(throws: Never.self) { try receiver.unprotect(packet, rtcp: false).get() }
        }
    }

    /// A flipped bit anywhere (header, payload or tag) is refused, and the refusals leave the session as it was:
    /// the genuine packet still gets through, once.
    @Test(arguments: profiles)
    func aTamperedPacketIsRefusedAndChangesNothing(profile: SRTPProfile) throws {
        let (sender, receiver) = try Self.pair(profile)
        let protected = try sender.protect(Self.rtp(9), rtcp: false).get()
        let tag = protected.count - Self.tagLength(profile)
        for index in [1, 3, 8, 12, protected.count / 2, tag, protected.count - 1] {
            var tampered = protected
            tampered[index] ^= 0x04
            #expect(receiver.unprotect(tampered, rtcp: false) == .failure(.authenticationFailed), "byte \(index)")
        }
        #expect(try receiver.unprotect(protected, rtcp: false).get() == Self.rtp(9))
        #expect(receiver.unprotect(protected, rtcp: false) == .failure(.replayed))
    }

    /// The replay window (128 packets, RFC 3711 §3.3.2): a packet seen before is refused; one that never came is
    /// taken late while the window still covers it, and refused once it has fallen behind the window.
    @Test(arguments: profiles)
    func theReplayWindowTakesLatePacketsOnceAndOnlyWithinIt(profile: SRTPProfile) throws {
        let (sender, receiver) = try Self.pair(profile)
        let protected = try (0...200).map { try sender.protect(Self.rtp(UInt16($0)), rtcp: false).get() }
        for sequence in 1...200 where sequence != 150 {
            #expect(throws: Never.self) { try receiver.unprotect(protected[sequence], rtcp: false).get() }
        }
        #expect(try receiver.unprotect(protected[150], rtcp: false).get() == Self.rtp(150), "50 behind: in the window")
        #expect(receiver.unprotect(protected[150], rtcp: false) == .failure(.replayed), "the second time")
        #expect(receiver.unprotect(protected[0], rtcp: false) == .failure(.replayed), "200 behind: too old")
        #expect(receiver.unprotect(protected[200], rtcp: false) == .failure(.replayed), "the newest, again")
    }

    /// A sender never uses a packet index twice (allow_repeat_tx is 0): the same keystream twice would give away
    /// the XOR of two payloads.
    @Test(arguments: profiles)
    func aSenderRefusesToProtectTheSameSequenceNumberTwice(profile: SRTPProfile) throws {
        let (sender, _) = try Self.pair(profile)
        #expect(throws: Never.self) { try sender.protect(Self.rtp(77), rtcp: false).get() }
        #expect(sender.protect(Self.rtp(77), rtcp: false) == .failure(.replayed))
        #expect(throws: Never.self) { try sender.protect(Self.rtp(78), rtcp: false).get() }
    }

    /// RFC 3711 §3.3.1: past 65535 the sequence number starts again at 0 and the rollover counter counts the
    /// wraps; the receiver guesses it from how far a number lies from the highest one seen, so packets reordered
    /// across the wrap still decrypt. A receiver that never saw the wrap assumes counter 0, and the packet then
    /// fails authentication: proof that the counter is part of the index the keys are used with.
    @Test(arguments: profiles)
    func theRolloverCounterCarriesAcrossTheSequenceNumberWrap(profile: SRTPProfile) throws {
        let (sender, inOrder) = try Self.pair(profile)
        let sequences: [UInt16] = [65_533, 65_534, 65_535, 0, 1, 2]
        let protected = try sequences.map { try sender.protect(Self.rtp($0), rtcp: false).get() }
        for (sequence, packet) in zip(sequences, protected) {
            #expect(try inOrder.unprotect(packet, rtcp: false).get() == Self.rtp(sequence), "seq \(sequence)")
        }

        let reordered = try Self.session(profile, .inbound)
        for position in [2, 4, 3, 1] {  // 65535, then 1 (counter 1), late 0 (counter 1), late 65534 (counter 0)
            let result = reordered.unprotect(protected[position], rtcp: false)
            #expect(try result.get() == Self.rtp(sequences[position]), "seq \(sequences[position])")
        }
        #expect(reordered.unprotect(protected[4], rtcp: false) == .failure(.replayed))

        let lateJoiner = try Self.session(profile, .inbound)
        #expect(lateJoiner.unprotect(protected[4], rtcp: false) == .failure(.authenticationFailed))
    }

    /// A forgery with a sequence number far ahead must not move the receiver's idea of the highest packet: had
    /// it done so, the next genuine packet would be guessed to be in the next roll-over and refused.
    @Test(arguments: profiles)
    func aForgeryFarAheadDoesNotMoveTheRolloverGuess(profile: SRTPProfile) throws {
        let (sender, receiver) = try Self.pair(profile)
        let tenth = try sender.protect(Self.rtp(10), rtcp: false).get()
        let eleventh = try sender.protect(Self.rtp(11), rtcp: false).get()
        #expect(throws: Never.self) { try receiver.unprotect(tenth, rtcp: false).get() }
        var forged = eleventh
        forged[2] = 0x9C  // sequence number 40,000 or so: more than 2^15 ahead
        #expect(receiver.unprotect(forged, rtcp: false) == .failure(.authenticationFailed))
        #expect(try receiver.unprotect(eleventh, rtcp: false).get() == Self.rtp(11))
    }

    /// SRTCP (RFC 3711 §3.4) adds the E flag (set: encrypted) and a 31-bit index that grows by one per packet,
    /// before the tag for AES-CM, after it for AES-GCM (RFC 7714 §9). Each report decrypts once.
    @Test(arguments: profiles)
    func reportsRoundTripWithTheEncryptedFlagAndAnIndexThatCountsUp(profile: SRTPProfile) throws {
        let (sender, receiver) = try Self.pair(profile)
        let report = SRTPContextTests.receiverReport
        let protected = try (0..<3).map { _ in try sender.protect(report, rtcp: true).get() }
        let indexAt = profile == .aeadAes128Gcm ? report.count + 16 : report.count
        var indexes: [UInt32] = []
        for packet in protected {
            #expect(packet.count == report.count + 4 + Self.tagLength(profile))
            #expect(packet[..<8] == report[..<8], "the first RTCP header is sent in the clear")
            #expect(packet[8..<report.count] != report[8...], "the rest is encrypted")
            let field = packet[indexAt..<indexAt + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            #expect(field & 0x8000_0000 != 0, "E flag")
            indexes.append(field & 0x7FFF_FFFF)
            #expect(try receiver.unprotect(packet, rtcp: true).get() == report)
        }
        #expect(indexes == [indexes[0], indexes[0] + 1, indexes[0] + 2], "\(indexes)")
        #expect(receiver.unprotect(protected[1], rtcp: true) == .failure(.replayed))
        var forged = protected[2]
        forged[indexAt + 2] ^= 0x01  // an index never seen, 256 ahead: authenticated like the rest
        #expect(receiver.unprotect(forged, rtcp: true) == .failure(.authenticationFailed))
    }

    /// Shorter than a header, or longer than UDP can carry, is malformed; the longest UDP payload is still a
    /// packet, and is judged by its tag.
    @Test(arguments: profiles)
    func packetsOutsideTheLengthsUDPAndTheHeadersAllowAreMalformed(profile: SRTPProfile) throws {
        let (sender, receiver) = try Self.pair(profile)
        #expect(sender.protect(Array(Self.rtp(1).prefix(11)), rtcp: false) == .failure(.malformed))
        #expect(sender.protect(Array(SRTPContextTests.receiverReport.prefix(7)), rtcp: true) == .failure(.malformed))
        #expect(receiver.unprotect(Array(Self.rtp(1).prefix(11)), rtcp: false) == .failure(.malformed))
        #expect(receiver.unprotect(Array(repeating: 0x80, count: 7), rtcp: true) == .failure(.malformed))
        let longest = Array(repeating: UInt8(0x80), count: SRTPSession.largestPacket)
        #expect(SRTPSession.largestPacket == 65_507)
        #expect(receiver.unprotect(longest, rtcp: false) == .failure(.authenticationFailed))
        #expect(receiver.unprotect(longest + [0], rtcp: false) == .failure(.malformed))
        #expect(sender.protect(Self.rtp(1) + Array(repeating: 0, count: 65_500), rtcp: false) == .failure(.malformed))
    }

    /// Keys must have the profile's lengths; the error says which were expected and which were given.
    @Test func keysOfAnotherProfilesLengthsAreRefusedWithTheLengthsNamed() throws {
        let error = #expect(throws: SRTPSetupError.self) {
            try SRTPSession(profile: .aeadAes128Gcm, key: Array(repeating: 1, count: 16),
                            salt: Array(repeating: 2, count: 14), direction: .inbound)
        }
        #expect(error?.description.contains("12-byte salt") == true, "\(String(describing: error))")
        #expect(error?.description.contains("not 16 and 14") == true)
        #expect(throws: SRTPSetupError.self) {
            try SRTPSession(profile: .aes128CmSha1_80, key: Array(repeating: 1, count: 15),
                            salt: Array(repeating: 2, count: 14), direction: .outbound)
        }
    }
}
