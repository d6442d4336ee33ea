/// How an rtsp:// stream's RTP travels: interleaved on the RTSP connection, or in UDP datagrams to a port pair.
public enum RTSPTransport: String, Sendable {
    case tcp
    case udp
}

/// rtsp_auth: which authentication the password may be sent with. Basic sends it in clear (base64) to whoever
/// answers on the camera's address and port, so it is used only when allowed, and never to a camera this client
/// has seen speak Digest (a downgrade: a local user who took over the port while the camera was down).
public enum RTSPAuthenticationPolicy: String, Sendable {
    /// Digest (MD5) only, the default.
    case digest
    /// Digest when offered, Basic when it is all the camera offers.
    case basic
}

/// A secret (an RTSP password): kept out of every description, log line, metric and status.
public struct Secret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    let text: String

    public init(_ text: String) { self.text = text }

    public var description: String { "(set)" }
    public var debugDescription: String { "(set)" }
}

/// `source = "rtsp://[user:password@]host[:port]/path"`: a camera or server the daemon pulls from, as an RTSP
/// client. Printed without its credentials: the URL in requests and logs never carries them.
public struct RTSPSource: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// Path and query, beginning with "/".
    public var path: String
    public var user: String?
    public var password: Secret?
    /// Where the password was read from (`rtsp_password_file`); nil when it is in the configuration itself.
    public var passwordFile: String?
    public var transport = RTSPTransport.tcp
    public var authentication = RTSPAuthenticationPolicy.digest

    /// Whether the configuration file holds the password (in the URL or `rtsp_password`).
    var passwordInConfiguration: Bool { password != nil && passwordFile == nil }

    /// The URL requests name: no user or password (those go in Authorization headers).
    public var url: String { "rtsp://\(host.contains(":") ? "[\(host)]" : host):\(port)\(path)" }

    /// The URL as printed: every credential-looking parameter of the path and query is replaced by `***`
    /// (`RTSPSource.redactingCredentials`).
    public var displayURL: String {
        "rtsp://\(host.contains(":") ? "[\(host)]" : host):\(port)\(Self.redactingCredentials(path))"
    }

    public var description: String { displayURL + (user == nil ? "" : " (credentials set)") }

    /// The source, or why not in words that never repeat the text (it may hold a password).
    static func parse(_ text: String) -> Result<RTSPSource, SourceError> {
        guard text.hasPrefix("rtsp://") else { return .failure(.scheme) }
        var rest = Substring(text.dropFirst("rtsp://".count))
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        rest = rest[authorityEnd...]
        // A password with an unencoded "/" or "?" would end the authority early and land in the path, which is
        // printed: an "@" there is taken for that mistake, never printed.
        if rest.contains("@") { return .failure(.credentials) }
        var user: String?
        var password: Secret?
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            authority = authority[authority.index(after: at)...]
            let colon = userInfo.firstIndex(of: ":")
            // Control characters would end the Authorization header early (header injection).
            guard let name = percentDecoded(userInfo[..<(colon ?? userInfo.endIndex)]), !name.isEmpty,
                  !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
                return .failure(.credentials)
            }
            user = name
            if let colon {
                guard let secret = percentDecoded(userInfo[userInfo.index(after: colon)...]),
                      !secret.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else { return .failure(.credentials) }
                password = Secret(secret)
            }
        }
        var host: Substring
        var port = 554
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return .failure(.host) }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let number = Int(after.dropFirst()) else { return .failure(.port) }
                port = number
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            guard let number = Int(authority[authority.index(after: colon)...]) else { return .failure(.port) }
            port = number
        } else {
            host = authority
        }
        guard (1...65535).contains(port) else { return .failure(.port) }
        guard !host.isEmpty, host.allSatisfy({ $0.isLetter || $0.isNumber || "-._:%".contains($0) }) else { return .failure(.host) }
        guard rest.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value != 0x7f && $0 != "#" }) else {
            return .failure(.path)
        }
        let path = rest.isEmpty ? "/" : rest.hasPrefix("/") ? String(rest) : "/" + rest
        return .success(RTSPSource(host: String(host), port: port, path: path, user: user, password: password))
    }

    enum SourceError: Error {
        case scheme, credentials, host, port, path

        var message: String {
            switch self {
            case .scheme: "source must be an rtsp:// URL: rtsp://[USER:PASSWORD@]HOST[:PORT]/PATH"
            case .credentials: "source's user or password is malformed (characters such as @ : / ? must be percent-encoded, as %40 %3A %2F %3F; no control characters)"
            case .host: "source must name a host: rtsp://HOST[:PORT]/PATH"
            case .port: "source's port must be 1...65535"
            case .path: "source's path must be printable ASCII without spaces (percent-encode the rest)"
            }
        }
    }

    /// RFC 3986 percent-decoding of a URL's user or password.
    private static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
