import Glibc

extension ConfigurationReport {
    /// Whether `[webrtc]`'s sockets could be bound now: a port another program holds would end the daemon at start
    /// (before READY=1). Only a warning: the program holding it may be the running daemon itself, checked before a
    /// restart, or systemd holding it for socket activation.
    public mutating func checkPorts(_ configuration: DaemonConfiguration) {
        guard let webrtc = configuration.webrtc else { return }
        for (key, address, type) in [("listen", webrtc.http, SOCK_STREAM), ("media", webrtc.media, SOCK_DGRAM)] {
            guard let problem = Self.bindProblem(host: address.host, port: address.port, type: Int32(type.rawValue)) else { continue }
            warnings.append("[webrtc] \(key) = \"\(address.host):\(address.port)\" cannot be bound now (\(problem)): the daemon will not start while that lasts (the running daemon, or streamrecvd-whip.socket and streamrecvd-whip-media.socket, which it then takes the sockets from, may be what holds it)")
        }
    }

    /// Binds a socket of `type` to `host:port` (its first address) and closes it at once; the error, or nil when it
    /// could be bound (or the host does not resolve: the configuration's own checks say so).
    static func bindProblem(host: String, port: Int, type: Int32) -> String? {
        var hints = addrinfo()
        hints.ai_socktype = type
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else { return nil }
        defer { freeaddrinfo(list) }
        let descriptor = socket(first.pointee.ai_family, type | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return String(cString: strerror(errno)) }
        defer { close(descriptor) }
        // As the daemon binds: the HTTP listener with SO_REUSEADDR (a TIME_WAIT leftover is no conflict), media without.
        var one: Int32 = 1
        if type == Int32(SOCK_STREAM.rawValue) { setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size)) }
        return bind(descriptor, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 ? nil : String(cString: strerror(errno))
    }
}
