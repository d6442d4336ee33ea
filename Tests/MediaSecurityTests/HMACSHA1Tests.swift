import MediaSecurity
import Testing

@Suite struct HMACSHA1Tests {
    /// RFC 2202 §3, test cases 1 to 7.
    static let vectors: [(key: [UInt8], data: [UInt8], mac: String)] = [
        (Array(repeating: 0x0B, count: 20), Array("Hi There".utf8), "b617318655057264e28bc0b6fb378c8ef146be00"),
        (
            Array("Jefe".utf8), Array("what do ya want for nothing?".utf8),
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"
        ),
        (
            Array(repeating: 0xAA, count: 20), Array(repeating: 0xDD, count: 50),
            "125d7342b9ac11cd91a39af48aa17b4f63f175d3"
        ),
        (Array(1...25), Array(repeating: 0xCD, count: 50), "4c9007f4026250c6bc8414f9bf50c86c2d7235da"),
        (
            Array(repeating: 0x0C, count: 20), Array("Test With Truncation".utf8),
            "4c1a03424b55e07fe7f27be1d58bb9324a9a5a04"
        ),
        (
            Array(repeating: 0xAA, count: 80), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
            "aa4ae5e15272d00e95705637ce8a3b55ed402112"
        ),
        (
            Array(repeating: 0xAA, count: 80),
            Array("Test Using Larger Than Block-Size Key and Larger Than One Block-Size Data".utf8),
            "e8e99d0f45237d786d6bbaa7965c7808bbff1a91"
        ),
    ]

    @Test(arguments: 0..<vectors.count)
    func matchesRFC2202(index: Int) {
        let vector = Self.vectors[index]
        #expect(HMACSHA1.authenticate(key: vector.key, data: vector.data) == [UInt8](hex: vector.mac))
        #expect(HMACSHA1.isValid([UInt8](hex: vector.mac), key: vector.key, data: vector.data))
    }

    @Test func refusesAnyOtherMac() {
        let vector = Self.vectors[0]
        var mac = [UInt8](hex: vector.mac)
        mac[19] ^= 1
        #expect(!HMACSHA1.isValid(mac, key: vector.key, data: vector.data))
        #expect(!HMACSHA1.isValid(Array(mac.prefix(10)), key: vector.key, data: vector.data))
        #expect(HMACSHA1.authenticate(key: [], data: []).count == 20, "empty key and data are allowed")
    }
}
