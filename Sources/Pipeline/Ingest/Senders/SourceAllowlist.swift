import Glibc
import NIOCore

/// One `allow` entry: an IPv4 or IPv6 network in CIDR notation ("192.168.1.0/24", "::1", "10.0.0.7").
/// An IPv4 network also matches IPv4-mapped IPv6 addresses (::ffff:a.b.c.d), as a dual-stack socket reports them.
public struct AddressRange: Sendable, Equatable, CustomStringConvertible {
    /// 4 or 16 bytes, host bits cleared.
    let network: [UInt8]
    let prefixLength: Int

    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = Self.parseAddress(String(parts[0])) else { return nil }
        let bits = address.count * 8
        var prefix = bits
        if parts.count == 2 {
            guard let value = Int(parts[1]), (0...bits).contains(value) else { return nil }
            prefix = value
        }
        network = Self.masked(address, prefix)
        prefixLength = prefix
    }

    public var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = network.count == 4 ? AF_INET : AF_INET6
        _ = network.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        let text = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return "\(text)/\(prefixLength)"
    }

    /// Whether `address` (4 or 16 raw bytes, network order) lies in this network. No allocation: it runs for
    /// every datagram of a stream with an `allow` list.
    func contains(_ address: UnsafeRawBufferPointer) -> Bool {
        var candidate = address
        if network.count == 4 && address.count == 16 && address[0..<10].allSatisfy({ $0 == 0 }) && address[10] == 0xff && address[11] == 0xff {
            candidate = UnsafeRawBufferPointer(rebasing: address[12..<16])
        }
        guard candidate.count == network.count else { return false }
        for index in 0..<network.count {
            let keep = min(8, max(0, prefixLength - index * 8))
            let mask = keep == 8 ? UInt8(0xff) : ~(UInt8(0xff) >> keep)
            if candidate[index] & mask != network[index] { return false }
        }
        return true
    }

    private static func parseAddress(_ text: String) -> [UInt8]? {
        // Byte buffers rather than in_addr/in6_addr: inet_pton writes 4 or 16 bytes in network order.
        var bytes = [UInt8](repeating: 0, count: 16)
        if inet_pton(AF_INET, text, &bytes) == 1 { return Array(bytes[0..<4]) }
        if inet_pton(AF_INET6, text, &bytes) == 1 { return bytes }
        return nil
    }

    private static func masked(_ address: [UInt8], _ prefix: Int) -> [UInt8] {
        address.enumerated().map { index, byte in
            let keep = min(8, max(0, prefix - index * 8))
            return keep == 8 ? byte : byte & ~(UInt8(0xff) >> keep)
        }
    }
}

extension [AddressRange] {
    /// An empty list allows every source.
    func allows(_ address: SocketAddress?) -> Bool {
        if isEmpty { return true }
        guard let bytes = address?.ipAddressBytes else { return false }
        return bytes.withUnsafeBytes { raw in contains { $0.contains(raw) } }
    }
}

/// A token bucket admitting at most `rate` connections per second (bursts up to `rate`); touched on the event loop.
struct ConnectionRateLimiter {
    let rate: Double
    private var tokens: Double
    private var last: UInt64 = 0

    init(perSecond rate: Int) {
        self.rate = Double(rate)
        tokens = Double(rate)
    }

    /// Whether the bucket would be full by `now` (its host has been quiet long enough to be forgotten).
    func isFull(now: UInt64) -> Bool {
        last == 0 || tokens >= rate || (now > last && tokens + Double(now - last) * rate / 1e9 >= rate)
    }

    mutating func admit(now: UInt64) -> Bool {
        if last != 0 && now > last { tokens = Swift.min(rate, tokens + Double(now - last) * rate / 1e9) }
        last = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
