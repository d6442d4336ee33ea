import Glibc

extension ConfigurationReport {
    /// Whether `[webrtc]`'s sockets could be bound now: a port another program holds would end the daemon at start
    /// (before READY=1). Only a warning: the program holding it may be the running daemon itself, checked before a
    /// restart.
    public mutating func checkPorts(_ configuration: DaemonConfiguration) {
        guard let webrtc = configuration.webrtc else { return }
        for (key, address, type) in [("listen", webrtc.http, SOCK_STREAM), ("media", webrtc.media, SOCK_DGRAM)] {
            guard let host = BindAddress.resolve(address.host)?.first,
                  let problem = Self.bindProblem(host, port: address.port, type: Int32(type.rawValue)) else { continue }
            warnings.append("[webrtc] \(key) = \"\(address.host):\(address.port)\" cannot be bound now (\(problem)): the daemon will not start while that lasts (the running daemon may be what holds it)")
        }
    }

    /// Binds a socket of `type` to `address:port` and closes it at once; the error, or nil when it could be bound.
    static func bindProblem(_ address: BindAddress, port: Int, type: Int32) -> String? {
        let descriptor = socket(address.isIPv6 ? AF_INET6 : AF_INET, type | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return String(cString: strerror(errno)) }
        defer { close(descriptor) }
        // As the daemon binds: the HTTP listener with SO_REUSEADDR (a TIME_WAIT leftover is no conflict), media without.
        var one: Int32 = 1
        if type == Int32(SOCK_STREAM.rawValue) { setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size)) }
        let result: Int32
        if address.isIPv6 {
            var socketAddress = sockaddr_in6()
            socketAddress.sin6_family = sa_family_t(AF_INET6)
            socketAddress.sin6_port = in_port_t(UInt16(port).bigEndian)
            withUnsafeMutableBytes(of: &socketAddress.sin6_addr) { $0.copyBytes(from: address.bytes) }
            result = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        } else {
            var socketAddress = sockaddr_in()
            socketAddress.sin_family = sa_family_t(AF_INET)
            socketAddress.sin_port = in_port_t(UInt16(port).bigEndian)
            withUnsafeMutableBytes(of: &socketAddress.sin_addr) { $0.copyBytes(from: address.bytes) }
            result = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        return result == 0 ? nil : String(cString: strerror(errno))
    }
}
