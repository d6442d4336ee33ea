/// A SETUP answer's Transport header (RFC 2326 §12.39): the parameters an RTSP client acts on. Unknown or
/// malformed parameters are left out; nothing here trusts the server beyond the syntax.
public struct RTSPTransportHeader: Sendable, Equatable {
    /// Two numbers of a range parameter (`server_port=6970-6971`, `interleaved=0-1`); the second is first + 1
    /// when only one is given.
    public struct Pair: Sendable, Equatable {
        public var first: Int
        public var second: Int
        public init(first: Int, second: Int) {
            self.first = first
            self.second = second
        }
    }

    /// RTP/AVP/TCP: the media is interleaved on the RTSP connection.
    public var isInterleaved: Bool
    public var interleaved: Pair?
    public var serverPorts: Pair?
    /// `source=`: where the server says its media comes from (an address; not trusted by itself).
    public var source: String?
    /// `ssrc=`: the SSRC the server will send with (eight hexadecimal digits).
    public var ssrc: UInt32?

    public init(parsing text: String) {
        isInterleaved = text.split(separator: ";").first.map { $0.uppercased().contains("/TCP") } ?? false
        interleaved = Self.pair("interleaved", in: text)
        serverPorts = Self.pair("server_port", in: text)
        source = Self.value("source", in: text).map { $0.trimmingSpaces().filter { $0 != "\"" } }.flatMap { $0.isEmpty ? nil : $0 }
        ssrc = Self.value("ssrc", in: text).flatMap { value in
            let digits = value.trimmingSpaces()
            return digits.count <= 8 ? UInt32(digits, radix: 16) : nil
        }
    }

    /// The value of `name=value` among the `;`-separated parameters (name case-insensitive).
    public static func value(_ name: String, in transport: String) -> String? {
        for item in transport.split(separator: ";") {
            let pair = item.split(separator: "=", maxSplits: 1)
            if pair.count == 2, String(pair[0]).trimmingSpaces().lowercased() == name { return String(pair[1]) }
        }
        return nil
    }

    /// "0-1", "6970-6971" or "4" as two numbers in 0...65535.
    public static func pair(_ name: String, in transport: String) -> Pair? {
        guard let text = value(name, in: transport) else { return nil }
        let numbers = text.split(separator: "-").compactMap { Int(String($0).trimmingSpaces()) }
        guard let first = numbers.first, (0...65535).contains(first) else { return nil }
        let second = numbers.count > 1 ? numbers[1] : first + 1
        guard (0...65535).contains(second) else { return nil }
        return Pair(first: first, second: second)
    }
}
