import Bitstream
import FuzzSupport

/// What an RTSP server sends, as the client reads it: the connection's bytes split as the first input byte says
/// (1 to 256 per append), each response's body read as SDP and each WWW-Authenticate header as a challenge, each
/// Transport header parsed, and each interleaved frame's payload read as RTCP and passed through the media gate.
/// Nothing may trap, and no more bytes come out than went in.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRTSP(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    guard let control = input.first else { return 0 }
    let chunk = Int(control) + 1
    var parser = RTSPStreamParser()
    var gate = RTSPMediaGate(serverPorts: nil, interleaved: true, ssrc: nil)
    var offset = 1
    var out = 0
    while offset < input.count {
        let end = min(input.count, offset + chunk)
        parser.append(input[offset..<end])
        offset = end
        do {
            while let event = try parser.next() {
                switch event {
                case .response(let response):
                    out += response.body.count
                    if let text = String(validating: response.body, as: UTF8.self) {
                        _ = try? SessionDescription(parsing: text)
                    }
                    if let transport = response.header("Transport") { _ = RTSPTransportHeader(parsing: transport) }
                    _ = RTSPChallenge.offer(in: response.headers(named: "WWW-Authenticate"), allowingBasic: false)
                    if let challenge = RTSPChallenge(headers: response.headers(named: "WWW-Authenticate")) {
                        _ = challenge.authorization(user: "u", password: "p", method: "DESCRIBE", uri: "rtsp://h/",
                                                    count: 1, clientNonce: "c") { _ in [UInt8](repeating: 0, count: 16) }
                    }
                case .request:
                    break
                case .interleaved(_, let payload):
                    out += payload.count
                    _ = payload.withUnsafeBytes { RTPReceptionStatistics.news(in: $0) }
                    _ = payload.withUnsafeBytes { gate.admitRTP($0, fromPort: nil) }
                }
            }
        } catch {
            return 0  // the connection would be closed here
        }
    }
    precondition(out <= input.count, "more bytes out than in")
    return 0
}

@_cdecl("FuzzRTSP_main")
public func main(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runFuzzer(argc, argv, fuzzRTSP)
}
