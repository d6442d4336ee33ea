/// The names the WHIP endpoint answers to, against DNS rebinding: a page of another origin whose name an attacker
/// makes resolve to this machine would otherwise read the share page and the stream list with the browser's
/// `Host:` naming the attacker's domain. Accepted: an IP literal (a rebound name is never one), `localhost`, a name
/// the configuration gives (`listen`'s host, `announce`, `server_names`), and a name the HTTPS certificate covers
/// (checked by the caller). Anything else is answered 421 (RFC 9110 §15.5.20).
struct ServedHostNames: Sendable, Equatable {
    private let names: Set<String>

    init(_ names: [String]) {
        self.names = Set((names + ["localhost"]).map(Self.normalized))
    }

    init(configuration: WebRTCServerConfiguration) {
        self.init([configuration.http.host] + configuration.announce + configuration.serverNames)
    }

    /// What a `Host:` value names: the host without its port, lowercased, a final dot dropped; an IPv6 literal
    /// without its brackets. Nil when the value is not a host (empty, a bracket left open, a port that is not one).
    static func host(of value: String) -> String? {
        var text = Substring(value.trimmingCharacters(in: " \t"))
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let rest = text[text.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && Self.isPort(rest.dropFirst())) else { return nil }
            return String(text[text.index(after: text.startIndex)..<close]).lowercased()
        }
        if let colon = text.lastIndex(of: ":") {
            guard Self.isPort(text[text.index(after: colon)...]) else { return nil }
            text = text[..<colon]
        }
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "@") })
        else { return nil }
        return normalized(String(text))
    }

    /// Whether a request with this `Host:` value is answered; `certificateCovers` asks the HTTPS certificate.
    func accepts(_ value: String, certificateCovers: (String) -> Bool) -> Bool {
        guard let host = Self.host(of: value) else { return false }
        if Self.isAddressLiteral(host) || names.contains(host) { return true }
        return certificateCovers(host)
    }

    static func isAddressLiteral(_ host: String) -> Bool { BindAddress.resolveNumeric(host) != nil }

    private static func isPort(_ text: Substring) -> Bool {
        !text.isEmpty && text.count <= 5 && text.utf8.allSatisfy { (0x30...0x39).contains($0) }
    }

    private static func normalized(_ name: String) -> String {
        let lowered = name.lowercased()
        return lowered.hasSuffix(".") ? String(lowered.dropLast()) : lowered
    }
}
