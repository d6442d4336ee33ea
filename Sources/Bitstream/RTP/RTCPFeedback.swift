/// RTCP feedback that asks an RTP sender for a keyframe: a compound packet of an empty Receiver Report (RFC 3550
/// §6.4.2: every compound RTCP packet starts with a report) followed by a Picture Loss Indication (RFC 4585
/// §6.3.1) or a Full Intra Request (RFC 5104 §4.3.1).
public enum RTCPFeedback {
    public enum Kind: Sendable {
        case pictureLossIndication
        /// `sequenceNumber` must grow by one for each new request (RFC 5104 §4.3.1.1), wrapping at 256.
        case fullIntraRequest(sequenceNumber: UInt8)
    }

    /// The datagram to send: 20 bytes for a PLI, 28 for a FIR.
    /// - Parameters:
    ///   - senderSSRC: the receiver's own SSRC (any stable random value).
    ///   - mediaSSRC: the SSRC of the video stream that needs a keyframe.
    public static func keyframeRequest(_ kind: Kind, senderSSRC: UInt32, mediaSSRC: UInt32) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(28)
        // Receiver Report with no report blocks: V=2 RC=0, PT=201, length 1 (32-bit words minus one).
        bytes += [0x80, 201, 0, 1]
        bytes.appendBigEndian(senderSSRC)
        switch kind {
        case .pictureLossIndication:
            // Payload-specific feedback (PT=206), FMT=1, length 2; no FCI.
            bytes += [0x80 | 1, 206, 0, 2]
            bytes.appendBigEndian(senderSSRC)
            bytes.appendBigEndian(mediaSSRC)
        case .fullIntraRequest(let sequenceNumber):
            // FMT=4, length 4; the media source field is 0 and the FCI names the SSRC (RFC 5104 §4.3.1.2).
            bytes += [0x80 | 4, 206, 0, 4]
            bytes.appendBigEndian(senderSSRC)
            bytes.appendBigEndian(0)
            bytes.appendBigEndian(mediaSSRC)
            bytes += [sequenceNumber, 0, 0, 0]
        }
        return bytes
    }
}

extension [UInt8] {
    /// RTCP's 32-bit fields, network byte order.
    mutating func appendBigEndian(_ value: UInt32) {
        self += [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
    }
}
