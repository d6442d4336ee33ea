import ArgumentParser
@testable import streamrecvctl
import Testing

@Suite struct SecondsTests {
    /// `inf`, `nan` and `1e10` once made `cat --timeout` trap converting to nanoseconds (SIGILL, exit 132): every
    /// command now refuses what is not a finite number of seconds, 0 or more, as a usage error.
    @Test(arguments: [["cat", "s", "--timeout", "inf"], ["cat", "s", "--timeout", "nan"], ["cat", "s", "--timeout=-1"],
                      ["wait", "s", "--timeout", "inf"], ["snapshot", "s", "-", "--timeout", "nan"],
                      ["send", "f", "tcp://127.0.0.1:1", "--duration", "inf"], ["watch", "s", "--interval", "1e10"],
                      ["watch", "s", "--interval", "nan"]])
    func whatIsNotANumberOfSecondsIsAUsageError(arguments: [String]) {
        do {
            _ = try StreamrecvctlCommand.parseAsRoot(arguments)
            Issue.record("\(arguments) accepted")
        } catch {
            #expect(StreamrecvctlCommand.exitCode(for: error) == .validationFailure, "\(arguments): \(StreamrecvctlCommand.message(for: error))")
        }
    }

    @Test func largeButFiniteTimeoutsMeanForEverAndDoNotTrap() throws {
        _ = try StreamrecvctlCommand.parseAsRoot(["cat", "s", "--timeout", "1e300"])
        #expect(Seconds.nanoseconds(1e300) == Int64(Seconds.longest * 1e9))
        #expect(Seconds.nanoseconds(1e10) == Int64(Seconds.longest * 1e9))
        #expect(Seconds.nanoseconds(0.25) == 250_000_000)
        #expect(Seconds.nanoseconds(0) == 0)
        #expect(Seconds.nanoseconds(.nan) == 0)
    }
}
