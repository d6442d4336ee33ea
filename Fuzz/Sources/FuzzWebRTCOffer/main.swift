import Bitstream
import FuzzSupport

/// This server's side of every answer: two host candidates (IPv4 and IPv6), credentials at their shortest.
private let local = WebRTCAnswer.LocalParameters(
    iceUsernameFragment: "fuzz", icePassword: "0123456789abcdefABCD+/",
    fingerprintSHA256: [UInt8](repeating: 0xab, count: 32), candidates: [("192.0.2.1", 5000), ("2001:db8::1", 5002)],
    sessionID: 1)

/// A WHIP offer as anyone who can POST to the endpoint may write it: read and, when it reads, answered. The answer
/// must be CRLF lines of `<letter>=` printable text that read back as SDP with the offer's m-sections (same mids,
/// same kinds), exactly one of them accepted (recvonly, the negotiated payload type and its RTX alone) and a BUNDLE group of
/// that one mid. Nothing may trap.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWebRTCOffer(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let text = String(decoding: bytes(data, size), as: UTF8.self)
    guard let offer = try? WebRTCOffer.parse(text),
          let (sdp, video) = try? WebRTCAnswer.make(for: offer, local: local, codecs: [.h264, .h265]) else { return 0 }
    precondition(sdp.hasPrefix("v=0\r\n") && sdp.hasSuffix("\r\n"), "the answer is not CRLF-terminated SDP")
    for line in sdp.utf8.split(separator: 0x0a) {
        precondition(line.count >= 3 && line.last == 0x0d && line.dropFirst().first == UInt8(ascii: "="), "a line is not <type>=<value>")
        precondition(line.dropLast().allSatisfy { $0 >= 0x20 && $0 != 0x7f }, "a control byte in the answer")
    }
    let answer: WebRTCOffer
    do { answer = try WebRTCOffer.parse(sdp) } catch { preconditionFailure("the answer does not read back: \(error)") }
    precondition(answer.media.map(\.mid) == offer.media.map(\.mid) && answer.media.map(\.kind) == offer.media.map(\.kind))
    // One BUNDLE group: the video and the audio taken beside it (to be dropped), the transport's section first.
    let taken = [video.mid] + (video.acceptedAudio.map { [$0.mid] } ?? [])
    let group = answer.bundleGroups.first ?? []
    precondition(answer.bundleGroups.count == 1 && Set(group) == Set(taken) && group.count == taken.count && answer.iceLite,
                 "the BUNDLE group is not the accepted mids alone")
    precondition(group.first == video.transportMid, "the transport is not the group's first section's")
    let accepted = answer.media.filter { !$0.isRejected }
    precondition(accepted.count == taken.count && accepted.allSatisfy { $0.direction == .recvonly })
    let acceptedVideo = accepted.first { $0.mid == video.mid }!
    // The negotiated type, and its RTX (apt = that type) when the offer had one.
    let expected = [video.payloadType] + (video.retransmissionPayloadType.map { [$0] } ?? [])
    precondition(acceptedVideo.payloads.map(\.payloadType) == expected && video.clockRate == 90000)
    if let retransmission = video.retransmissionPayloadType {
        precondition(acceptedVideo.payload(retransmission)?.parameters["apt"] == String(video.payloadType), "RTX without its apt")
    }
    if let audio = video.acceptedAudio {
        let section = accepted.first { $0.mid == audio.mid }!
        // One audio type, colliding with nothing of the video's: a packet's type tells the two apart.
        precondition(section.kind == .audio && section.payloads.map(\.payloadType) == [audio.payloadType] && !expected.contains(audio.payloadType))
    }
    precondition(video.packetizationMode == 0 || video.packetizationMode == 1)
    return 0
}

@_cdecl("FuzzWebRTCOffer_main")
public func main(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runFuzzer(argc, argv, fuzzWebRTCOffer)
}
