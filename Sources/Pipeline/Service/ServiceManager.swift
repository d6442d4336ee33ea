import CSystemd
import Glibc

/// The systemd service manager, through libsystemd's sd-daemon API (the only file that imports CSystemd).
/// Every call is a no-op when the daemon was not started by systemd (no NOTIFY_SOCKET, no LISTEN_FDS).
enum ServiceManager {
    /// Sends one notification, e.g. "READY=1" or "STATUS=…" (sd_notify(3)).
    static func notify(_ state: String) {
        _ = sd_notify(0, state)
    }

    /// The watchdog interval when `WatchdogSec=` is set for this process, in microseconds.
    static var watchdogMicroseconds: UInt64? {
        var microseconds: UInt64 = 0
        return sd_watchdog_enabled(0, &microseconds) > 0 ? microseconds : nil
    }

    /// Listening sockets passed by socket activation with their `FileDescriptorName=`; the LISTEN_* variables are
    /// removed so that children do not inherit them.
    static func inheritedListeners() -> [(name: String, descriptor: Int32)] {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        let count = sd_listen_fds_with_names(1, &names)
        guard count > 0 else { return [] }
        defer {
            if let names {
                for index in 0..<Int(count) { free(names[index]) }
                free(names)
            }
        }
        return (0..<count).map { index in
            let name = names?[Int(index)].map { String(cString: $0) } ?? "unknown"
            let descriptor = SD_LISTEN_FDS_START + index
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            return (name, descriptor)
        }
    }
}
