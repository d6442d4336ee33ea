import Bitstream
import Testing

@Suite struct RTSPTransportHeaderTests {
    @Test func transportHeadersAreRead() {
        let header = RTSPTransportHeader(parsing: "RTP/AVP;unicast;client_port=5000-5001;server_port=6970-6971;ssrc=5354524D;source=\"10.0.0.9\"")
        #expect(!header.isInterleaved && header.serverPorts == .init(first: 6970, second: 6971))
        #expect(header.ssrc == 0x5354_524d && header.source == "10.0.0.9")
        let tcp = RTSPTransportHeader(parsing: "RTP/AVP/TCP;unicast;interleaved=2;ssrc=123456789")
        #expect(tcp.isInterleaved && tcp.interleaved == .init(first: 2, second: 3) && tcp.ssrc == nil)
    }
}
