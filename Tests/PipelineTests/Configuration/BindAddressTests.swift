@testable import Pipeline
import Testing

@Suite struct BindAddressTests {
    @Test(arguments: [
        ("127.0.0.1", "localhost", true),
        ("0.0.0.0", "127.0.0.1", true),
        ("::", "127.0.0.1", true),
        ("::", "::1", true),
        ("0.0.0.0", "::1", false),
        ("127.0.0.1", "127.0.0.2", false),
        ("::1", "127.0.0.1", false),
    ])
    func listenHostsOverlapHoweverTheyAreSpelt(first: String, second: String, overlap: Bool) throws {
        let a = try #require(BindAddress.resolve(first))
        let b = try #require(BindAddress.resolve(second))
        #expect(BindAddress.overlap(a, b) == overlap)
        #expect(BindAddress.overlap(b, a) == overlap)
    }
}
