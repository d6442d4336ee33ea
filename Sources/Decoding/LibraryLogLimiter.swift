/// Decides which of libavcodec's messages reach the log. A damaged stream makes libavcodec write a line per
/// damaged macroblock row, each with other numbers in it ("error while decoding MB 12 7, bytestream 345"): a limit
/// keyed by the text would never apply. So messages are limited by *kind* — the text with every number taken out —
/// and by stream:
/// - one line per kind per stream per `interval`;
/// - at most `linesPerInterval` lines per stream per `interval`, whatever their kinds (a stream whose every
///   picture is broken gives many kinds: "mb_type # in P slice too large at # #", "cbp too large (#) at # #" …);
/// - the next line logged for a stream says how many of its messages were left out since its last line.
/// Keys come from input, so at most `maximumKeys` are remembered. Pure and not thread-safe: `FFmpegLog` holds it
/// under its lock.
struct LibraryLogLimiter {
    static let maximumKeys = 1000
    let intervalNanoseconds: UInt64
    let linesPerInterval: Int

    private struct Budget {
        var windowStart: UInt64
        var lines = 0
        /// Messages of this stream left out since its last line.
        var suppressed = 0
    }

    private var budgets: [String: Budget] = [:]
    /// When each kind of each stream was last logged.
    private var lastLogged: [String: UInt64] = [:]

    init(intervalSeconds: Double = 10, linesPerInterval: Int = 4) {
        intervalNanoseconds = UInt64(intervalSeconds * 1e9)
        self.linesPerInterval = linesPerInterval
    }

    /// Nil when the message is left out; otherwise the suffix to log it with ("" or " (N more … suppressed)").
    mutating func admit(stream: String, level: Int32, message: String, now: UInt64) -> String? {
        let key = "\(stream)\u{0}\(level)\u{0}\(Self.kind(of: message))"
        var budget = budgets[stream] ?? Budget(windowStart: now)
        defer { if budgets.count < Self.maximumKeys || budgets[stream] != nil { budgets[stream] = budget } }
        if let last = lastLogged[key], now &- last < intervalNanoseconds {
            budget.suppressed += 1
            return nil
        }
        if now < budget.windowStart || now - budget.windowStart >= intervalNanoseconds {
            budget.windowStart = now
            budget.lines = 0
        }
        guard budget.lines < linesPerInterval else {
            budget.suppressed += 1
            return nil
        }
        budget.lines += 1
        if lastLogged.count >= Self.maximumKeys { lastLogged.removeAll(keepingCapacity: true) }
        lastLogged[key] = now
        let skipped = budget.suppressed
        budget.suppressed = 0
        return skipped > 0 ? " (\(skipped) more libavcodec message\(skipped == 1 ? "" : "s") suppressed)" : ""
    }

    /// The message with every number (decimal, signed, or hexadecimal after a digit, as in `0x55d0c8`) replaced by
    /// `#`, cut to 200 characters: what tells one kind of message from another.
    static func kind(of message: String) -> String {
        let scalars = Array(message.unicodeScalars.prefix(200))
        var kind = String.UnicodeScalarView()
        var inNumber = false
        for (index, character) in scalars.enumerated() {
            let digit = isDigit(character)
            let sign = character == "-" && !inNumber && index + 1 < scalars.count && isDigit(scalars[index + 1])
            let continues = inNumber && (digit || ("a"..."f").contains(character) || ("A"..."F").contains(character)
                || character == "x" || character == ".")
            if digit || sign || continues {
                if !inNumber { kind.append("#") }
                inNumber = true
            } else {
                inNumber = false
                kind.append(character)
            }
        }
        return String(kind)
    }

    private static func isDigit(_ character: Unicode.Scalar) -> Bool { ("0"..."9").contains(character) }
}
