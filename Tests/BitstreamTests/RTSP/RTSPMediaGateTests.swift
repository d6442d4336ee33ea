import Bitstream
import Testing

@Suite struct RTSPMediaGateTests {
    @Test func theMediaGateTakesOnlyTheServersPortsAndSource() {
        func rtp(_ ssrc: UInt32) -> [UInt8] { [0x80, 96, 0, 1, 0, 0, 0, 0] + (0..<4).map { UInt8(truncatingIfNeeded: ssrc >> (24 - 8 * $0)) } }
        var named = RTSPMediaGate(serverPorts: (6970, 6971), ssrc: 0x5354_524d)
        #expect(rtp(0x5354_524d).withUnsafeBytes { named.admitRTP($0, fromPort: 6972) } == .foreignPort(6972))
        #expect(rtp(0x5354_524d).withUnsafeBytes { named.admitRTP($0, fromPort: 6970) } == .accepted)
        #expect(rtp(0x4556_494c).withUnsafeBytes { named.admitRTP($0, fromPort: 6970) } == .foreignSource(0x4556_494c))
        #expect([0x40, 96].withUnsafeBytes { named.admitRTP($0, fromPort: 6970) } == .malformed)
        #expect(named.admitsRTCP(fromPort: 6971) && !named.admitsRTCP(fromPort: 6970))
        #expect(named.owns(0x5354_524d) && !named.owns(0x4556_494c))
        // A camera that names one SSRC and sends another from its named port: that one is taken, then held.
        var misnamed = RTSPMediaGate(serverPorts: (6970, 6971), ssrc: 1)
        #expect(rtp(2).withUnsafeBytes { misnamed.admitRTP($0, fromPort: 6972) } == .foreignPort(6972))
        #expect(rtp(2).withUnsafeBytes { misnamed.admitRTP($0, fromPort: 6970) } == .acceptedOtherThanNamed(named: 1))
        #expect(rtp(1).withUnsafeBytes { misnamed.admitRTP($0, fromPort: 6970) } == .foreignSource(1) && misnamed.ssrc == 2)
        // Nothing named: the first valid packet's port and SSRC are the server's from then on.
        var learning = RTSPMediaGate(serverPorts: nil, ssrc: nil)
        #expect(!learning.admitsRTCP(fromPort: 5001) && !learning.owns(7))
        #expect(rtp(7).withUnsafeBytes { learning.admitRTP($0, fromPort: 5000) } == .accepted)
        #expect(rtp(7).withUnsafeBytes { learning.admitRTP($0, fromPort: 5002) } == .foreignPort(5002))
        #expect(rtp(8).withUnsafeBytes { learning.admitRTP($0, fromPort: 5000) } == .foreignSource(8))
        #expect(learning.admitsRTCP(fromPort: 5001) && learning.ssrc == 7)
        // Interleaved: no ports, the SSRC rule holds.
        var interleaved = RTSPMediaGate(serverPorts: nil, interleaved: true, ssrc: nil)
        #expect(rtp(1).withUnsafeBytes { interleaved.admitRTP($0, fromPort: nil) } == .accepted)
        #expect(rtp(2).withUnsafeBytes { interleaved.admitRTP($0, fromPort: nil) } == .foreignSource(2))
    }
}
