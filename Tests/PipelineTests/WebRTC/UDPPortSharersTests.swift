import Testing

@testable import Pipeline

/// Finding another socket on the media port, from the kernel's tables as /proc/net/udp and udp6 print them.
struct UDPPortSharersTests {
    static let table = """
          sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
         1: 0100007F:1FFD 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1001 2 0000000000000000 0
         2: 00000000:1FFD 00000000:0000 07 00000000:00000000 00:00000000 00000000  1000        0 1002 2 0000000000000000 0
         3: 0100007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1003 2 0000000000000000 0
         4: 0200007F:1FFD 00000000:0000 07 00000000:00000000 00:00000000 00000000  1001        0 1004 2 0000000000000000 0
        garbage line
         5: 0100007F:ZZZZ 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1005 2 0000000000000000 0
         6: 0000000000000000FFFF00000100007F:1FFD 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000  1002  0 1006 2 0 0
        """

    @Test func rowsAreReadAndTheMalformedSkipped() {
        let entries = UDPPortSharers.parse(Self.table)
        #expect(entries.map(\.inode) == [1001, 1002, 1003, 1004, 1006])
        #expect(entries[0] == .init(address: "0100007F", port: 8189, uid: 0, inode: 1001))
        // An IPv4-mapped IPv6 address is given as its IPv4 part.
        #expect(entries[4].address == "0100007F" && entries[4].uid == 1002)
        #expect(entries[1].isWildcard && !entries[0].isWildcard)
    }

    @Test func theSameAddressOrAWildcardOnThePortShares() {
        let entries = UDPPortSharers.parse(Self.table)
        // 127.0.0.1:8189 shares with the wildcard on 8189 and the mapped 127.0.0.1, not with 127.0.0.2 or port 53.
        #expect(UDPPortSharers.others(sharingWith: 1001, in: entries)?.map(\.inode) == [1002, 1006])
        // The wildcard overlaps every address on its port.
        #expect(UDPPortSharers.others(sharingWith: 1002, in: entries)?.map(\.inode) == [1001, 1004, 1006])
        #expect(UDPPortSharers.others(sharingWith: 1003, in: entries) == [])
        #expect(UDPPortSharers.others(sharingWith: 9999, in: entries) == nil, "a socket not in the tables")
    }
}
