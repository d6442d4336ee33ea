@testable import Decoding
import Testing

/// libavcodec's messages limited by kind (numbers taken out) and by stream.
struct LibraryLogLimiterTests {
    static let second: UInt64 = 1_000_000_000

    @Test func numbersDoNotMakeANewKind() {
        #expect(LibraryLogLimiter.kind(of: "error while decoding MB 12 7, bytestream 345")
                == LibraryLogLimiter.kind(of: "error while decoding MB 0 1, bytestream -3274"))
        #expect(LibraryLogLimiter.kind(of: "mb_type 40 in P slice too large at 5 7") == "mb_type # in P slice too large at # #")
        #expect(LibraryLogLimiter.kind(of: "cbp too large (0x3fa) at 9 0") == "cbp too large (#) at # #")
    }

    @Test func oneLinePerKindAndAFewPerStreamPerInterval() {
        var limiter = LibraryLogLimiter(intervalSeconds: 10, linesPerInterval: 4)
        var logged: [String] = []
        for index in 0..<1000 {
            let message = index % 7 == 0 ? "\(["alpha", "beta", "gamma", "delta", "epsilon"][index % 5]) at \(index)" : "error while decoding MB \(index) 1, bytestream \(index * 3)"
            if let suffix = limiter.admit(stream: "a", level: 16, message: message, now: UInt64(index) * Self.second / 100) {
                logged.append(message + suffix)
            }
        }
        // 10 s of messages: the MB error once, then at most 3 other kinds.
        #expect(logged.count == 4, "\(logged)")
        // Another stream has its own budget.
        #expect(limiter.admit(stream: "b", level: 16, message: "error while decoding MB 1 1, bytestream 2", now: 9 * Self.second) == "")
        // The next window's first line says how many were left out.
        let next = limiter.admit(stream: "a", level: 16, message: "error while decoding MB 3 3, bytestream 9", now: 11 * Self.second)
        #expect(next?.contains("more libavcodec messages suppressed") == true, "\(next ?? "nil")")
    }
}
