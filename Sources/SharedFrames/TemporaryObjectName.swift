import Glibc

/// The name a new ring object has in /dev/shm until it is renamed onto the ring's: `.NAME.PID.iINSTANCE.RANDOM.new`
/// (INSTANCE in hex, after an `i` that no field of the earlier `.NAME.PID.RANDOM.new` has).
/// A writer that dies while making one leaves it behind, and the next writer of NAME removes it. Two things make
/// that safe:
/// - INSTANCE, drawn once per process, tells a leftover of an earlier process with this one's PID (a daemon that
///   is PID 1 in its container, restarted after SIGKILL) from this process's own objects still being made.
/// - The fields are counted from NAME's end: NAME may contain dots, and `.cam.99999.…` of a ring named `cam.99999`
///   must never be taken for a leftover of `cam` by PID 99999.
struct TemporaryObjectName: Equatable {
    var pid: pid_t
    /// Nil for the names of earlier versions (`.NAME.PID.RANDOM.new`).
    var instance: UInt64?

    /// This process's instance.
    static let ownInstance = UInt64.random(in: 1...UInt64.max)

    /// A fresh temporary name for a new object of the ring `name`.
    static func make(for name: String) -> String {
        ".\(name).\(getpid()).i\(String(ownInstance, radix: 16)).\(UInt32.random(in: 0...UInt32.max)).new"
    }

    /// Whose temporary object of the ring `name` the file `file` is; nil when it is not one.
    static func parse(_ file: String, of name: String) -> TemporaryObjectName? {
        let prefix = ".\(name)."
        guard file.hasPrefix(prefix), file.hasSuffix(".new") else { return nil }
        let fields = file.dropFirst(prefix.count).split(separator: ".", omittingEmptySubsequences: false)
        guard fields.last == "new", let pid = pid_t(fields[0]), pid > 0 else { return nil }
        switch fields.count {
        case 4:
            guard fields[1].first == "i", let instance = UInt64(fields[1].dropFirst(), radix: 16), UInt32(fields[2]) != nil else {
                return nil
            }
            return TemporaryObjectName(pid: pid, instance: instance)
        case 3:
            guard UInt32(fields[1]) != nil else { return nil }
            return TemporaryObjectName(pid: pid, instance: nil)
        default:
            return nil
        }
    }

    /// Whether the process that made it is gone: another process had this PID (or an earlier version, which
    /// this process is not), or no process has it now.
    var isLeftover: Bool {
        if pid == getpid() { return instance != Self.ownInstance }
        return kill(pid, 0) != 0 && errno == ESRCH
    }
}
