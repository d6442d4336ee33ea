import CSRTP

/// Why a packet was refused. Expected on a hostile or lossy path, so a value, not a thrown error.
public enum SRTPFailure: Error, Sendable, Equatable {
    /// The authentication tag did not match: a forged, corrupted or wrongly keyed packet.
    case authenticationFailed
    /// A packet index the replay window has seen already, or one too old for it.
    case replayed
    /// Too short or too long to be an SRTP/SRTCP packet, or a header libsrtp cannot parse.
    case malformed
    /// Any other libsrtp status (`srtp_err_status_t`).
    case other(Int32)

    init(status: srtp_err_status_t) {
        switch status {
        case srtp_err_status_auth_fail: self = .authenticationFailed
        case srtp_err_status_replay_fail, srtp_err_status_replay_old: self = .replayed
        case srtp_err_status_bad_param, srtp_err_status_parse_err: self = .malformed
        default: self = .other(Int32(bitPattern: status.rawValue))
        }
    }
}

/// libsrtp refused the keys or policy (wrong key lengths, or srtp_init failed).
public struct SRTPSetupError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// The one owner of a libsrtp session (`srtp_t`) with one wildcard-SSRC policy, freed in deinit.
final class SRTPSession {
    enum Direction {
        case inbound, outbound
    }

    /// srtp_init() once per process; Swift runs a static initialiser exactly once, whichever thread asks first.
    private static let libraryStatus: UInt32 = srtp_init().rawValue

    /// UDP carries at most 65,507 bytes; anything longer is not a packet from the network.
    static let largestPacket = 65_507

    private let session: OpaquePointer
    /// Inbound: the SSRCs libsrtp has a stream for, bounded (SRTPStreamRoster.swift).
    private var roster: SRTPStreamRoster?

    init(profile: SRTPProfile, key: [UInt8], salt: [UInt8], direction: Direction) throws(SRTPSetupError) {
        guard SRTPSession.libraryStatus == srtp_err_status_ok.rawValue else {
            throw SRTPSetupError(description: "srtp_init failed with status \(SRTPSession.libraryStatus)")
        }
        guard key.count == profile.keyLength, salt.count == profile.saltLength else {
            throw SRTPSetupError(description: "\(profile) takes a \(profile.keyLength)-byte key and a "
                + "\(profile.saltLength)-byte salt, not \(key.count) and \(salt.count)")
        }
        var created: OpaquePointer?
        var master = key + salt  // libsrtp's layout: the key, then the salt
        let status = master.withUnsafeMutableBufferPointer { master in
            var policy = SRTPSession.policy(for: profile, direction: direction)
            policy.key = master.baseAddress
            return srtp_create(&created, &policy)  // derives the session keys; keeps no pointer to `master`
        }
        master.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
        guard status == srtp_err_status_ok, let created else {
            throw SRTPSetupError(description: "srtp_create failed with status \(status.rawValue)")
        }
        session = created
        roster = direction == .inbound ? SRTPStreamRoster() : nil
    }

    deinit {
        srtp_dealloc(session)
    }

    /// Every SSRC of one direction shares the keys (WHIP's BUNDLE: video, audio and RTX on one transport).
    /// The replay window stays libsrtp's default (128), and a sender may not repeat an index (allow_repeat_tx 0).
    private static func policy(for profile: SRTPProfile, direction: Direction) -> srtp_policy_t {
        var policy = srtp_policy_t()
        switch profile {
        case .aes128CmSha1_80:
            srtp_crypto_policy_set_rtp_default(&policy.rtp)  // AES-128-CM with HMAC-SHA1-80
            srtp_crypto_policy_set_rtcp_default(&policy.rtcp)
        case .aeadAes128Gcm:
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp)
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp)
        }
        policy.ssrc.type = direction == .inbound ? ssrc_any_inbound : ssrc_any_outbound
        policy.window_size = 0
        policy.allow_repeat_tx = 0
        policy.next = nil
        return policy
    }

    func unprotect(_ packet: [UInt8], rtcp: Bool) -> Result<[UInt8], SRTPFailure> {
        // 12 bytes of RTP header, or 8 of RTCP header: libsrtp checks more, this keeps the lengths in range.
        guard packet.count >= (rtcp ? 8 : 12), packet.count <= SRTPSession.largestPacket else {
            return .failure(.malformed)
        }
        let result = transform(packet, room: 0) { session, bytes, length in
            rtcp ? srtp_unprotect_rtcp(session, bytes, length) : srtp_unprotect(session, bytes, length)
        }
        if case .success = result, let ssrc = Self.ssrc(of: packet, rtcp: rtcp), let evicted = roster?.use(ssrc) {
            _ = srtp_remove_stream(session, evicted.bigEndian)  // libsrtp takes it in network byte order
        }
        return result
    }

    /// The SSRC libsrtp keys the packet's stream by: RTP's header, or SRTCP's first sender (both in the clear).
    private static func ssrc(of packet: [UInt8], rtcp: Bool) -> UInt32? {
        let offset = rtcp ? 4 : 8
        guard packet.count >= offset + 4 else { return nil }
        return packet[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }

    func protect(_ packet: [UInt8], rtcp: Bool) -> Result<[UInt8], SRTPFailure> {
        guard packet.count >= (rtcp ? 8 : 12), packet.count <= SRTPSession.largestPacket else {
            return .failure(.malformed)
        }
        // Room for the tag and MKI, and for SRTCP's E flag and index as well.
        return transform(packet, room: Int(SRTP_MAX_TRAILER_LEN) + 4) { session, bytes, length in
            rtcp ? srtp_protect_rtcp(session, bytes, length) : srtp_protect(session, bytes, length)
        }
    }

    /// Runs libsrtp in place on a copy of `packet` with `room` spare bytes behind it, and trims the copy to the
    /// length libsrtp reports.
    private func transform(
        _ packet: [UInt8], room: Int,
        _ operation: (OpaquePointer, UnsafeMutableRawPointer, UnsafeMutablePointer<Int32>) -> srtp_err_status_t
    ) -> Result<[UInt8], SRTPFailure> {
        var buffer = packet
        buffer.append(contentsOf: repeatElement(0, count: room))
        var length = Int32(packet.count)
        let status = buffer.withUnsafeMutableBytes { operation(session, $0.baseAddress!, &length) }
        guard status == srtp_err_status_ok else { return .failure(SRTPFailure(status: status)) }
        guard length >= 0, Int(length) <= buffer.count else { return .failure(.other(-1)) }
        buffer.removeSubrange(Int(length)...)
        return .success(buffer)
    }
}
