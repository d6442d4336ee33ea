@testable import MediaSecurity
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Many sessions come and go in a daemon's life: every handshake and SRTP context must give back what it took.
@Suite struct AssociationChurnTests {
    /// Resident set size from /proc/self/statm (its second field, in pages).
    static func residentBytes() -> Int {
        guard let file = fopen("/proc/self/statm", "r") else { return 0 }
        defer { fclose(file) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let count = fread(&buffer, 1, buffer.count, file)
        let fields = buffer.prefix(count).split(separator: UInt8(ascii: " "))
        guard fields.count > 1, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return 0 }
        return pages * sysconf(Int32(_SC_PAGESIZE))
    }

    static var underSanitizer: Bool {
        let everywhere = UnsafeMutableRawPointer(bitPattern: 0)  // RTLD_DEFAULT
        return dlsym(everywhere, "__asan_init") != nil || dlsym(everywhere, "__tsan_init") != nil
    }

    /// libsrtp as Debian builds it (on NSS) takes about 2 ms per context, so only every tenth round makes them.
    static func handshakeAndProtect(serverIdentity: DTLSIdentity, clientIdentity: DTLSIdentity, srtp: Bool) throws {
        let pair = try InMemoryHandshake(serverIdentity: serverIdentity, clientIdentity: .some(clientIdentity))
        pair.exchange()
        let server = try #require(pair.serverKeys)
        guard srtp else { return }
        let receiver = try SRTPReceiveContext(keying: server)
        let sender = try SRTPSendContext(keying: try #require(pair.clientKeys), localIsDTLSClient: true)
        let packet = SRTPContextTests.rtpPacket(sequence: 7)
        #expect(try receiver.unprotectRTP(sender.protectRTP(packet).get()).get() == packet)
    }

    @Test func twoThousandHandshakesDoNotGrowMemory() throws {
        var serverIdentity = try DTLSIdentity.generate()
        let clientIdentity = try DTLSIdentity.generate()
        for round in 0..<200 {  // warm-up: allocator arenas and OpenSSL's one-time tables
            try Self.handshakeAndProtect(
                serverIdentity: serverIdentity, clientIdentity: clientIdentity, srtp: round % 10 == 0)
        }
        let before = Self.residentBytes()
        for round in 0..<2000 {
            if round % 10 == 0 { serverIdentity = try DTLSIdentity.generate() }  // identities come and go too
            try Self.handshakeAndProtect(
                serverIdentity: serverIdentity, clientIdentity: clientIdentity, srtp: round % 10 == 0)
        }
        let after = Self.residentBytes()
        print("RSS after warm-up \(before / 1024) KiB, after 2000 handshakes \(after / 1024) KiB, "
            + "growth \((after - before) / 1024) KiB")
        // One leaked SSL_CTX or SSL per handshake would be megabytes; allocator noise is far less. Under a
        // sanitizer RSS grows by design (ASan's quarantine), and LeakSanitizer gives the verdict instead.
        #expect(Self.underSanitizer || after - before < 8 << 20)
    }
}
