/// What an RTSP server sends on its TCP connection (RFC 2326): responses, requests of its own, and, once the
/// session plays over TCP, interleaved binary frames (`$`, channel, 16-bit length, then an RTP or RTCP packet).
public enum RTSPStreamEvent: Sendable, Equatable {
    case response(RTSPResponse)
    /// A request from the server (GET_PARAMETER as a keep-alive check, ANNOUNCE, …): it expects an answer.
    case request(method: String, cseq: String?)
    case interleaved(channel: UInt8, payload: ArraySlice<UInt8>)
}

public struct RTSPResponse: Sendable, Equatable {
    public var statusCode: Int
    public var reason: String
    /// In order, names as sent.
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(statusCode: Int, reason: String, headers: [(name: String, value: String)], body: [UInt8]) {
        self.statusCode = statusCode
        self.reason = reason
        self.headers = headers
        self.body = body
    }

    /// The first header of this name (names are case-insensitive).
    public func header(_ name: String) -> String? { headers(named: name).first }

    public func headers(named name: String) -> [String] {
        let wanted = name.lowercased()
        return headers.filter { $0.name.lowercased() == wanted }.map(\.value)
    }

    public static func == (lhs: RTSPResponse, rhs: RTSPResponse) -> Bool {
        lhs.statusCode == rhs.statusCode && lhs.reason == rhs.reason && lhs.body == rhs.body
            && lhs.headers.map(\.name) == rhs.headers.map(\.name) && lhs.headers.map(\.value) == rhs.headers.map(\.value)
    }
}

public enum RTSPParseError: Error, Equatable, CustomStringConvertible {
    /// The bytes are neither an RTSP message nor an interleaved frame: not an RTSP server.
    case notRTSP
    case malformedStartLine
    case malformedHeader
    case headerTooLong
    case bodyTooLong

    public var description: String {
        switch self {
        case .notRTSP: "the server's bytes are not RTSP"
        case .malformedStartLine: "malformed RTSP status line"
        case .malformedHeader: "malformed RTSP header"
        case .headerTooLong: "RTSP headers longer than \(RTSPStreamParser.maximumHeaderBytes) bytes"
        case .bodyTooLong: "RTSP body longer than \(RTSPStreamParser.maximumBodyBytes) bytes"
        }
    }
}

/// Splits the bytes of an RTSP connection into events. Bounded: a server that never ends its headers, or
/// announces a huge body, is an error, not a growing buffer. An interleaved frame's payload is a view of the
/// parser's buffer, valid until the next `append`.
public struct RTSPStreamParser: Sendable {
    public static let maximumHeaderBytes = 16 << 10
    public static let maximumBodyBytes = 256 << 10
    private var buffer: [UInt8] = []
    private var start = 0

    public init() {}

    /// Bytes received and not yet handed out as events.
    public var pendingBytes: Int { buffer.count - start }

    public mutating func append<Bytes: Collection>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        // Handed-out bytes are dropped once they are most of the buffer: amortised O(1) per byte.
        if start > 0 && start >= buffer.count / 2 {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole event, nil when more bytes are needed.
    public mutating func next() throws(RTSPParseError) -> RTSPStreamEvent? {
        // Blank lines between messages are tolerated (some servers end a body with an extra CRLF).
        while start < buffer.count, buffer[start] == 0x0d || buffer[start] == 0x0a { start += 1 }
        guard start < buffer.count else { return nil }
        if buffer[start] == 0x24 {  // "$"
            guard buffer.count - start >= 4 else { return nil }
            let length = Int(buffer[start + 2]) << 8 | Int(buffer[start + 3])
            guard buffer.count - start - 4 >= length else { return nil }
            let channel = buffer[start + 1]
            let payload = buffer[(start + 4)..<(start + 4 + length)]
            start += 4 + length
            return .interleaved(channel: channel, payload: payload)
        }
        // A message starts with "RTSP/" (a response) or an upper-case method name (a request).
        guard (0x41...0x5a).contains(buffer[start]) else { throw .notRTSP }
        guard let headerEnd = findHeaderEnd() else {
            if buffer.count - start > Self.maximumHeaderBytes { throw .headerTooLong }
            if !startsPlausibly() { throw .notRTSP }
            return nil
        }
        guard headerEnd.lineBlockEnd - start <= Self.maximumHeaderBytes else { throw .headerTooLong }
        let lines = try Self.lines(buffer[start..<headerEnd.lineBlockEnd])
        guard let startLine = lines.first else { throw .malformedStartLine }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            if line.first == " " || line.first == "\t" {  // obsolete line folding: continues the previous value
                guard !headers.isEmpty else { throw .malformedHeader }
                headers[headers.count - 1].value += " " + line.trimmingSpaces()
                continue
            }
            guard let colon = line.firstIndex(of: ":") else { throw .malformedHeader }
            let name = String(line[..<colon]).trimmingSpaces()
            guard !name.isEmpty else { throw .malformedHeader }
            headers.append((name, String(line[line.index(after: colon)...]).trimmingSpaces()))
        }
        var bodyLength = 0
        if let value = headers.first(where: { $0.name.lowercased() == "content-length" })?.value {
            guard let length = Int(value), length >= 0 else { throw .malformedHeader }
            guard length <= Self.maximumBodyBytes else { throw .bodyTooLong }
            bodyLength = length
        }
        guard buffer.count - headerEnd.bodyStart >= bodyLength else { return nil }
        let body = Array(buffer[headerEnd.bodyStart..<(headerEnd.bodyStart + bodyLength)])
        start = headerEnd.bodyStart + bodyLength
        let parts = startLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
        if startLine.hasPrefix("RTSP/") {
            guard parts.count >= 2, parts[1].count == 3, let code = Int(parts[1]), (100...999).contains(code) else {
                throw .malformedStartLine
            }
            return .response(RTSPResponse(statusCode: code, reason: parts.count > 2 ? String(parts[2]) : "", headers: headers, body: body))
        }
        guard parts.count == 3, parts[2].hasPrefix("RTSP/") else { throw .malformedStartLine }
        return .request(method: String(parts[0]), cseq: headers.first(where: { $0.name.lowercased() == "cseq" })?.value)
    }

    /// Where the header block ends (its last line's end) and the body starts: after an empty line, CRLF or LF.
    private func findHeaderEnd() -> (lineBlockEnd: Int, bodyStart: Int)? {
        let limit = min(buffer.count, start + Self.maximumHeaderBytes + 4)
        var index = start
        while index < limit {
            if buffer[index] == 0x0a {
                let next = index + 1
                if next < buffer.count, buffer[next] == 0x0a { return (index, next + 1) }
                if next + 1 < buffer.count, buffer[next] == 0x0d, buffer[next + 1] == 0x0a { return (index, next + 2) }
            }
            index += 1
        }
        return nil
    }

    /// An incomplete message must at least begin like one: "RTSP/" or a method token and a space.
    private func startsPlausibly() -> Bool {
        let prefix = Array("RTSP/".utf8)
        let count = min(prefix.count, buffer.count - start)
        if buffer[start..<(start + count)].elementsEqual(prefix[..<count]) { return true }
        var index = start
        while index < buffer.count, index - start < 32 {
            let byte = buffer[index]
            if byte == 0x20 { return index > start }
            guard (0x41...0x5a).contains(byte) || byte == 0x5f else { return false }
            index += 1
        }
        return index - start < 32
    }

    private static func lines(_ bytes: ArraySlice<UInt8>) throws(RTSPParseError) -> [Substring] {
        // Header bytes must be text: a NUL or other control byte means the peer is not speaking RTSP.
        guard bytes.allSatisfy({ $0 >= 0x20 || $0 == 0x0d || $0 == 0x0a || $0 == 0x09 }) else { throw .notRTSP }
        // Split on bytes: in a Swift String "\r\n" is one Character, and would not split on "\n".
        return bytes.split(separator: 0x0a, omittingEmptySubsequences: true).compactMap { line in
            let text = line.last == 0x0d ? line.dropLast() : line
            return text.isEmpty ? nil : Substring(String(decoding: text, as: UTF8.self))
        }
    }
}

extension StringProtocol {
    func trimmingSpaces() -> String {
        var text = Substring(self)
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return String(text)
    }
}
