import Bitstream
import Foundation
import Glibc

/// The datagrams FFmpeg's RTP muxer sends for `file` (`ffmpeg -re -i FILE -c copy -f rtp`), captured on a UDP socket
/// on loopback: a real packetizer's output, to replay, drop or reorder in tests.
public func captureRTP(of file: String, packetSize: Int = 1200) throws -> [[UInt8]] {
    let receiver = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    defer { close(receiver) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(receiver, $0, length); return getsockname(receiver, $0, &length) }
    }
    var buffer = 8 << 20
    setsockopt(receiver, SOL_SOCKET, SO_RCVBUF, &buffer, socklen_t(MemoryLayout<Int>.size))
    let port = UInt16(bigEndian: address.sin_port)
    try runChecked("ffmpeg", ["-v", "error", "-re", "-i", file, "-c", "copy", "-f", "rtp",
                              "rtp://127.0.0.1:\(port)?pkt_size=\(packetSize)"])
    var datagrams: [[UInt8]] = []
    var bytes = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = recv(receiver, &bytes, bytes.count, Int32(MSG_DONTWAIT))
        if count <= 0 { break }
        datagrams.append(Array(bytes[0..<count]))
    }
    return datagrams
}

/// Sends datagrams to a UDP port on loopback, one every `pauseMicroseconds`, from `socket` when given (it stays
/// open) or from a fresh socket.
public func sendDatagrams(_ datagrams: [[UInt8]], port: Int, pauseMicroseconds: UInt32 = 1000, from socket: Int32? = nil) {
    let sender = socket ?? Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    defer { if socket == nil { close(sender) } }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    for datagram in datagrams {
        _ = datagram.withUnsafeBytes { bytes in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(sender, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        if pauseMicroseconds > 0 { usleep(pauseMicroseconds) }
    }
}

/// A UDP socket bound to `host`:`port` (0: any free port; any 127.x.y.z is loopback); nil when the port is taken.
public func boundDatagramSocket(port: Int = 0, host: String = "127.0.0.1") -> (descriptor: Int32, port: Int)? {
    let descriptor = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr(host)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(descriptor, pointer, length) == 0 && getsockname(descriptor, pointer, &length) == 0
        }
    }
    guard bound else {
        close(descriptor)
        return nil
    }
    return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
}

/// A datagram socket on a port below the kernel's ephemeral range (32768 and up): once closed, its port is not
/// handed to another test's `bind(0)` before this test binds it again (a reload that takes the freed port).
public func boundDatagramSocketOutsideEphemeralRange(host: String = "127.0.0.1") -> (descriptor: Int32, port: Int)? {
    for _ in 0..<200 {
        if let bound = boundDatagramSocket(port: Int.random(in: 20000..<30000), host: host) { return bound }
    }
    return nil
}

/// The next datagram on `descriptor` within `seconds`, or nil.
public func receiveDatagram(_ descriptor: Int32, within seconds: Double) -> [UInt8]? {
    var poll = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
    guard Glibc.poll(&poll, 1, Int32(seconds * 1000)) > 0 else { return nil }
    var buffer = [UInt8](repeating: 0, count: 65536)
    let count = recv(descriptor, &buffer, buffer.count, 0)
    return count > 0 ? Array(buffer[0..<count]) : nil
}

/// The RTP timestamp of each datagram (read by Bitstream's `RTPPacket`; a datagram that is not RTP stops the test).
public func rtpTimestamps(_ datagrams: [[UInt8]]) throws -> [UInt32] {
    try datagrams.map { datagram throws(RTPError) in try RTPPacket(parsing: datagram[...]).timestamp }
}
