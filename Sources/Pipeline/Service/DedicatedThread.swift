import Glibc

/// Runs `body` on a new detached thread of its own (never Swift's cooperative pool, never a network event loop),
/// named for top -H and perf (15 characters at most; pthread_setname_np is not visible from Swift here).
/// `body` may be non-Sendable state made for that thread alone: it is handed over, never shared.
func runOnDedicatedThread(named name: String, _ body: sending @escaping () -> Void) {
    let start = ThreadStart {
        let descriptor = open("/proc/thread-self/comm", O_WRONLY)
        if descriptor >= 0 {
            _ = String(name.prefix(15)).withCString { write(descriptor, $0, strlen($0)) }
            close(descriptor)
        }
        body()
    }
    var thread = pthread_t()
    let created = pthread_create(&thread, nil, { context in
        Unmanaged<ThreadStart>.fromOpaque(context!).takeRetainedValue().body()
        return nil
    }, Unmanaged.passRetained(start).toOpaque())
    precondition(created == 0, "cannot start thread \(name): \(String(cString: strerror(created)))")
    pthread_detach(thread)
}

/// What a new thread runs, handed to pthread_create as an opaque pointer.
private final class ThreadStart {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
}
