import Bitstream
import FuzzSupport

/// A datagram on a WebRTC port: classified (RFC 7983), then, whatever the class, read as STUN: parsed, every
/// accessor read, MESSAGE-INTEGRITY checked with a stand-in HMAC (the last 20 bytes it covers, so the fuzzer can
/// reach the matching path), FINGERPRINT checked. Whatever parses must serialize and parse back to itself, and a
/// success response to its transaction must parse and pass both checks. Nothing may trap.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSTUN(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    _ = MultiplexedPacketKind.classify(input)
    let standIn: ([UInt8], [UInt8]) -> [UInt8] = { _, covered in Array(covered.suffix(20)) }
    _ = STUNMessage.verifyMessageIntegrity(of: input, key: [1, 2, 3], hmacSHA1: standIn)
    let fingerprinted = STUNMessage.hasValidFingerprint(input)
    guard let message = try? STUNMessage.parse(input) else {
        precondition(!fingerprinted, "a valid FINGERPRINT on a message that does not parse")
        return 0
    }
    _ = (message.username, message.priority, message.useCandidate, message.iceControlling, message.iceControlled)
    // The screening before parsing never drops a binding request that parses with an ICE username.
    if message.method == STUNMessage.binding, message.messageClass == .request, let username = message.username.map({ Array($0.utf8) }),
       let colon = username.firstIndex(of: UInt8(ascii: ":")) {
        let fragment = STUNMessage.bindingRequestLocalFragment(input)
        precondition(fragment.map { Array(input[$0]) } == Array(username[..<colon]), "the screening dropped a request that parses")
    }
    _ = (message.hasMessageIntegrity, message.hasFingerprint, message.errorCode?.reason, message.xorMappedAddress)
    let reparsed = try? STUNMessage.parse(message.serialized())
    precondition(reparsed == message, "serialize then parse changed the message")
    respond(to: message, standIn: standIn)
    return 0
}

/// A success response to the parsed message, to the address its first bytes make up; then an error response and
/// a request that echo its username.
private func respond(to message: STUNMessage, standIn: ([UInt8], [UInt8]) -> [UInt8]) {
    let id = message.transactionID
    let address = id[0] & 1 == 0
        ? STUNAddress(.ipv4(Array(id[0..<4])), port: UInt16(id[4]) << 8 | UInt16(id[5]))
        : STUNAddress(.ipv6(Array(id[0..<12]) + Array(id[0..<4])), port: UInt16(id[4]) << 8 | UInt16(id[5]))
    let response = STUNMessage.bindingSuccessResponse(transactionID: id, mappedAddress: address,
                                                      integrityKey: id, hmacSHA1: standIn)
    let parsed = try? STUNMessage.parse(response)
    precondition(parsed?.xorMappedAddress == address, "the mapped address did not come back")
    precondition(STUNMessage.hasValidFingerprint(response), "our own FINGERPRINT does not check")
    precondition(STUNMessage.verifyMessageIntegrity(of: response, key: id, hmacSHA1: standIn), "our own MAC does not check")
    let reason = message.username ?? ""
    let error = STUNMessage.bindingErrorResponse(transactionID: id, code: 300 + Int(id[6]) % 400, reason: reason,
                                                 integrityKey: nil, hmacSHA1: standIn)
    precondition(STUNMessage.hasValidFingerprint(error), "our own error response's FINGERPRINT does not check")
    let request = STUNMessage.bindingRequest(transactionID: id, username: reason, priority: message.priority ?? 0,
                                             role: .controlled(tiebreaker: message.iceControlling ?? 0),
                                             useCandidate: message.useCandidate, integrityKey: id, hmacSHA1: standIn)
    let parsedRequest = try? STUNMessage.parse(request)
    precondition(parsedRequest?.username == reason && parsedRequest?.useCandidate == message.useCandidate,
                 "our own request does not come back")
}

@_cdecl("FuzzSTUN_main")
public func main(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runFuzzer(argc, argv, fuzzSTUN)
}
