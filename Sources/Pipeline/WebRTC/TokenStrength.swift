import Glibc

/// How guessable a WHIP bearer token looks, for a warning, and the demo token shipped in the examples, which is
/// refused beyond loopback. The estimate recognises short tokens, few character classes, repeats, runs and
/// repeated stretches; it cannot recognise words (docs/configuration.md says so).
enum TokenStrength {
    /// etc/streamrecvd/examples/whip.token: published with streamrecvd, so known to everyone.
    static let demoToken = "demo-token-change-me-0123456789"
    static let demoTokenPath = "etc/streamrecvd/examples/whip.token"
    /// Below this estimate a token is warned about. Of 100 000 random tokens of 128 bits from each of
    /// `openssl rand -hex 16`, `openssl rand -base64 16`, Python's `token_urlsafe(16)` and `uuidgen`, one hex token
    /// was estimated below it (98 bits); every token of 96 random bits or fewer is (97.7 at most).
    static let warningBits = 100.0

    /// Bits: each character counts log2 of the alphabet spanned by the classes the token uses (a-z 26, A-Z 26, 0-9
    /// 10, `-._~+/=` 7), except one that repeats the character before it, continues a run by one (`abc`, `321`),
    /// or continues a stretch of 3 or more characters already seen earlier in the token: those count nothing.
    static func estimatedBits(_ token: String) -> Double {
        let bytes = Array(token.utf8)
        let classes: [(ClosedRange<UInt8>?, Set<UInt8>, Double)] = [
            (UInt8(ascii: "a")...UInt8(ascii: "z"), [], 26), (UInt8(ascii: "A")...UInt8(ascii: "Z"), [], 26),
            (UInt8(ascii: "0")...UInt8(ascii: "9"), [], 10), (nil, Set("-._~+/=".utf8), 7),
        ]
        let alphabet = classes.filter { range, set, _ in bytes.contains { range?.contains($0) ?? set.contains($0) } }.map(\.2).reduce(0, +)
        guard alphabet > 1 else { return 0 }
        return Double(countedCharacters(bytes)) * log2(alphabet)
    }

    static func isGuessable(_ token: String) -> Bool { estimatedBits(token) < warningBits }

    /// The characters that add to the estimate (`estimatedBits`).
    static func countedCharacters(_ bytes: [UInt8]) -> Int {
        var counted = 0
        var index = 0
        while index < bytes.count {
            let repeated = longestEarlierMatch(bytes, at: index)
            if repeated >= 3 {
                index += repeated
                continue
            }
            let step = index >= 1 ? Int(bytes[index]) - Int(bytes[index - 1]) : nil
            let previousStep = index >= 2 ? Int(bytes[index - 1]) - Int(bytes[index - 2]) : nil
            if step != 0 && !(abs(step ?? 0) == 1 && step == previousStep) { counted += 1 }
            index += 1
        }
        return counted
    }

    /// The length of the longest stretch starting at `index` that also starts earlier (it may overlap: `aaaa`).
    private static func longestEarlierMatch(_ bytes: [UInt8], at index: Int) -> Int {
        var longest = 0
        for start in 0..<index {
            var length = 0
            while index + length < bytes.count && bytes[start + length] == bytes[index + length] { length += 1 }
            longest = max(longest, length)
        }
        return longest
    }
}
