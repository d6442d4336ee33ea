import ArgumentParser

/// A number of seconds given on the command line (`--timeout`, `--duration`): finite and not
/// negative, checked in each command's `validate` so that a mistake is a usage error (exit 64); as nanoseconds,
/// clamped to a billion seconds (about 31 years, "for ever" in practice), since `inf` or `1e10` would make the
/// conversion to an integer trap.
enum Seconds {
    static let longest = 1e9

    static func validate(_ value: Double?, _ option: String) throws {
        guard let value else { return }
        guard value.isFinite, value >= 0 else { throw ValidationError("\(option) takes a number of seconds, 0 or more (not \(value))") }
    }

    static func nanoseconds(_ value: Double) -> Int64 {
        guard value > 0 else { return 0 }  // NaN too, though `validate` refuses it
        return Int64(min(value, longest) * 1e9)
    }
}
