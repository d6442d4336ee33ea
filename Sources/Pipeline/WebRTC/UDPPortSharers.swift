import Glibc

/// The UDP sockets of this network namespace, from /proc/net/udp and /proc/net/udp6: for finding another socket
/// bound to a port the daemon must have alone (with SO_REUSEADDR on both, Linux lets any user bind a UDP port
/// again, and the newest socket gets the datagrams).
enum UDPPortSharers {
    struct Entry: Equatable {
        /// The local address as the kernel prints it (hex); an IPv4-mapped IPv6 address is given as its IPv4 part.
        var address: String
        var port: Int
        var uid: UInt32
        var inode: UInt64

        var isWildcard: Bool { address.allSatisfy { $0 == "0" } }
    }

    /// Both tables as they are now (empty when /proc cannot be read).
    static func current() -> [Entry] {
        ["/proc/net/udp", "/proc/net/udp6"].flatMap { parse(read($0)) }
    }

    /// The sockets other than the one with `inode` bound to its port on an address that overlaps its own (the same,
    /// or a wildcard on either side); nil when `entries` does not hold that socket (the tables could not be read).
    static func others(sharingWith inode: UInt64, in entries: [Entry]) -> [Entry]? {
        guard let own = entries.first(where: { $0.inode == inode }) else { return nil }
        return entries.filter {
            $0.inode != inode && $0.port == own.port && ($0.address == own.address || $0.isWildcard || own.isWildcard)
        }
    }

    /// Rows of `sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode …`; the
    /// header and anything malformed are skipped.
    static func parse(_ text: String) -> [Entry] {
        text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count > 9, fields[0].hasSuffix(":") else { return nil }
            let local = fields[1].split(separator: ":")
            guard local.count == 2, [8, 32].contains(local[0].count), let port = Int(local[1], radix: 16),
                  let uid = UInt32(fields[7]), let inode = UInt64(fields[9]) else { return nil }
            var address = String(local[0])
            // ::ffff:a.b.c.d: the kernel prints four 32-bit words, the last one as udp prints IPv4.
            if address.count == 32, address.hasPrefix("0000000000000000FFFF0000") { address = String(address.suffix(8)) }
            return Entry(address: address, port: port, uid: uid, inode: inode)
        }
    }

    private static func read(_ path: String) -> String {
        guard let file = fopen(path, "r") else { return "" }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while case let count = fread(&buffer, 1, buffer.count, file), count > 0 { bytes += buffer[0..<count] }
        return String(decoding: bytes, as: UTF8.self)
    }
}
