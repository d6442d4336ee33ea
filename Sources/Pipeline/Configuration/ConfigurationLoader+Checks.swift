import Glibc

/// The loader's checks that go beyond one key's value: NUL characters, credentials kept outside the URL, sockets
/// that collide however they are spelt, and cameras pulled twice.
extension ConfigurationLoader {
    /// The line of a NUL byte or of a `\u0000` / `\U00000000` escape (after an even run of backslashes), if any.
    static func nulLine(_ text: String) -> Int? {
        let bytes = Array(text.utf8)
        var line = 1
        var index = 0
        while index < bytes.count {
            switch bytes[index] {
            case 0: return line
            case UInt8(ascii: "\n"): line += 1
            case UInt8(ascii: "\\"):
                let escape = bytes[(index + 1)...].prefix(9)
                if escape.starts(with: Array("u0000".utf8)) || escape.starts(with: Array("U00000000".utf8)) { return line }
                if index + 1 < bytes.count && bytes[index + 1] != UInt8(ascii: "\n") { index += 1 }  // the escaped character
            default: break
            }
            index += 1
        }
        return nil
    }

    /// Two streams pulling the same camera: allowed (two sessions), but most cameras serve few, and it is more
    /// often a copied block than a wish.
    static func sharedCameraWarnings(_ streams: [StreamConfiguration]) -> [String] {
        var warnings: [String] = []
        for (index, stream) in streams.enumerated() {
            guard let source = stream.rtsp else { continue }
            for earlier in streams[..<index] where earlier.rtsp.map({ $0.url.lowercased() == source.url.lowercased() }) ?? false {
                warnings.append("streams '\(earlier.name)' and '\(stream.name)' both pull \(source.displayURL): the camera serves each a session of its own (many allow only a few)")
            }
        }
        return warnings
    }

    /// `rtsp_user`, `rtsp_password` and `rtsp_password_file`: credentials kept out of the URL, so that the URL
    /// can be printed and the file that holds the password can be readable by the daemon alone.
    static func readCredentials(
        into source: inout RTSPSource, user: String?, password: String?, passwordFile: String?, warnings: inout [String],
        error: (String?, String) -> ConfigurationError
    ) throws(ConfigurationError) {
        if let user {
            guard source.user == nil else { throw error("rtsp_user", "rtsp_user and a user in source's URL: name the user once") }
            guard !user.isEmpty else { throw error("rtsp_user", "rtsp_user must not be empty") }
            source.user = user
        }
        let key = password != nil ? "rtsp_password" : "rtsp_password_file"
        var secret = password
        if let passwordFile {
            guard password == nil else { throw error("rtsp_password_file", "rtsp_password and rtsp_password_file: give the password once") }
            switch SecretFile.read(passwordFile) {
            case .success(let read):
                secret = read.text
                source.passwordFile = passwordFile
                if let warning = SecretFile.exposure(path: passwordFile, mode: read.mode, what: "holds an RTSP password") {
                    warnings.append(warning)
                }
            case .failure(let problem):
                throw error("rtsp_password_file", "rtsp_password_file \(passwordFile): \(problem.message)")
            }
        }
        guard let secret else { return }
        guard source.password == nil else { throw error(key, "\(key) and a password in source's URL: give the password once") }
        guard source.user != nil else { throw error(key, "\(key) needs a user: rtsp://USER@HOST/PATH or rtsp_user") }
        // The value is never repeated: the file's errors reach the journal.
        guard !secret.containsControlCharacters else { throw error(key, "the RTSP password must not contain control characters") }
        source.password = Secret(secret)
    }

    /// Names, shm names and sockets must not collide. Two listen addresses collide when they are the same protocol
    /// and port and their hosts overlap however they are spelt: "localhost" and "127.0.0.1", or a wildcard
    /// ("0.0.0.0", "::") and any address of its family ("::" takes IPv4 as well).
    static func validateUnique(
        _ configuration: DaemonConfiguration, fail: (String, String?, Int?, String?) -> ConfigurationError
    ) throws(ConfigurationError) {
        var sockets: [(what: String, listen: ListenAddress, addresses: [BindAddress])] = []
        if let metrics = configuration.metrics {
            guard let addresses = BindAddress.resolve(metrics.host) else {
                throw fail("metrics host '\(metrics.host)' does not resolve to an address", "daemon", nil, "metrics")
            }
            sockets.append(("[daemon] metrics", metrics, addresses))
        }
        if let webrtc = configuration.webrtc {
            for (key, address) in [("listen", webrtc.http), ("media", webrtc.media)] {
                guard let addresses = BindAddress.resolve(address.host) else {
                    throw fail("\(key) host '\(address.host)' does not resolve to an address", "webrtc", nil, key)
                }
                for other in sockets where other.listen.transport.isDatagram == address.transport.isDatagram
                    && other.listen.port == address.port && BindAddress.overlap(other.addresses, addresses) {
                    throw fail("[webrtc] \(key) takes the same port as \(other.what) (\(other.listen))", "webrtc", nil, key)
                }
                sockets.append(("[webrtc] \(key)", address, addresses))
            }
        }
        let streams = configuration.streams
        for (index, stream) in streams.enumerated() {
            for earlier in streams[..<index] {
                if earlier.name == stream.name { throw fail("stream name '\(stream.name)' is used twice", "stream", index, "name") }
                if earlier.shmName == stream.shmName { throw fail("shm_name '\(stream.shmName)' is used twice", "stream", index, "shm_name") }
            }
            // A pulled stream binds nothing; its server's name is resolved at each connection (it may not resolve at boot).
            guard let listen = stream.source.listenAddress else { continue }
            guard let addresses = BindAddress.resolve(listen.host) else {
                throw fail("listen host '\(listen.host)' does not resolve to an address", "stream", index, "listen")
            }
            for other in sockets where other.listen.transport.isDatagram == listen.transport.isDatagram
                && other.listen.port == listen.port && BindAddress.overlap(other.addresses, addresses) {
                throw fail("listen address \(listen) takes the same \(listen.transport.isDatagram ? "UDP" : "TCP") port as \(other.what) (\(other.listen))",
                           "stream", index, "listen")
            }
            sockets.append(("stream '\(stream.name)'", listen, addresses))
        }
    }
}
