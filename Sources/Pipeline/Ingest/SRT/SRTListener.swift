import CSRT
import Glibc
import Logging
import NIOConcurrencyHelpers
import NIOCore
import SharedFrames

/// srt://: an SRT listener (libsrt, live mode) on a thread of its own, handing each caller's MPEG-TS bytes to the
/// stream's decode thread. One caller streams at a time, by the stream's `second_sender` policy; callers outside
/// `allow`, over `max_connections_per_second` (both before libsrt gives them a socket: `SRTAdmissionGate`), or
/// whose encryption does not match `passphrase` are refused with a log line and a counter. libsrt runs its own threads; everything here touches its sockets from this one.
final class SRTListener: Sendable {
    let configuration: StreamConfiguration
    /// Its SRT settings (the stream is an srt:// one: `init` checks).
    let settings: SRTSettings
    let worker: StreamWorker
    let activity: SenderActivity
    let metrics: StreamMetrics
    let logger: Logger
    let listener: SRTSOCKET
    /// Asked by libsrt about each caller before its socket gets buffers; outlives `listener` (closed first).
    let gate: SRTAdmissionGate
    private let stopRequested = NIOLockedValueBox(false)
    private let finished = ConditionLock(value: false)

    /// libsrt's global state, set up once per process (never torn down: listeners come and go on reload).
    private static let started: Bool = srt_startup() >= 0
    private static let logHandlerInstalled = NIOLockedValueBox(false)

    /// libsrt writes its own lines to standard error (into the journal, in its own format). They go to this logger
    /// at debug level instead: what an operator must know (a refused caller, lost packets) is said by the daemon.
    private static func installLogHandler(_ logger: Logger) {
        logHandlerInstalled.withLockedValue { installed in
            guard !installed else { return }
            installed = true
            var logger = logger
            logger[metadataKey: "stream"] = nil
            let context = Unmanaged.passRetained(LibraryLogger(logger)).toOpaque()  // for the process's lifetime
            srt_setlogflags(SRT_LOGF_DISABLE_TIME | SRT_LOGF_DISABLE_EOL)
            srt_setloghandler(context) { context, _, _, _, area, message in
                guard let context, let message else { return }
                let logger = Unmanaged<LibraryLogger>.fromOpaque(context).takeUnretainedValue().logger
                logger.debug("libsrt \(area.map { String(cString: $0) } ?? ""): \(String(cString: message))")
            }
        }
    }

    /// Binds and listens at once, so that a taken port fails the stream's start like any other listener.
    /// `inherited`: a UDP socket passed by socket activation, used instead of binding `listen`.
    init(configuration: StreamConfiguration, worker: StreamWorker, activity: SenderActivity, metrics: StreamMetrics,
         logger: Logger, inherited: Int32?) throws {
        guard let settings = configuration.srt else { preconditionFailure("an srt:// listener for a stream that is not srt://") }
        self.configuration = configuration
        self.settings = settings
        self.worker = worker
        self.activity = activity
        self.metrics = metrics
        self.logger = logger
        gate = SRTAdmissionGate(configuration: configuration, metrics: metrics, logger: logger)
        guard Self.started else { throw SRTError.call("srt_startup") }
        Self.installLogHandler(logger)
        listener = srt_create_socket()
        guard listener != SRT_INVALID_SOCK else { throw SRTError.call("srt_create_socket") }
        do {
            try Self.configure(listener, settings)
            if let inherited {
                // Acquired: libsrt owns the descriptor from here on and closes it with the listener.
                if srt_bind_acquire(listener, inherited) == SRT_ERROR {
                    let error = SRTError.call("adopting the inherited socket: \(String(cString: srt_getlasterror_str()))")
                    close(inherited)
                    throw error
                }
            } else {
                try Self.bind(listener, host: configuration.listen.host, port: configuration.listen.port)
            }
            try Self.check(gate.install(on: listener), "srt_listen_callback")
            try Self.check(srt_listen(listener, 4), "srt_listen")
        } catch {
            srt_close(listener)
            throw error
        }
    }

    /// Options every accepted socket inherits from the listener.
    private static func configure(_ socket: SRTSOCKET, _ settings: SRTSettings) throws {
        try check(streamrecv_srt_set_int(socket, SRTO_TRANSTYPE, Int32(SRTT_LIVE.rawValue)), "SRTO_TRANSTYPE")
        switch settings.delivery {
        case .arrival:
            // Without TSBPD libsrt delivers each message once it is in order, and drops nothing for lateness. With
            // it, every frame waits out the latency, and a caller's last packets are lost when it closes before then.
            try check(streamrecv_srt_set_int(socket, SRTO_TSBPDMODE, 0), "SRTO_TSBPDMODE")
        case .timed:
            try check(streamrecv_srt_set_int(socket, SRTO_RCVLATENCY, Int32(settings.latencyMilliseconds)), "SRTO_RCVLATENCY")
        }
        // Non-blocking: accept and receive are driven by one epoll loop.
        try check(streamrecv_srt_set_int(socket, SRTO_RCVSYN, 0), "SRTO_RCVSYN")
        // With enforcement libsrt rejects a caller with the wrong passphrase inside the handshake, silently; without
        // it the caller is accepted and its key state read here, so the refusal can be logged and counted.
        try check(streamrecv_srt_set_int(socket, SRTO_ENFORCEDENCRYPTION, 0), "SRTO_ENFORCEDENCRYPTION")
        if let passphrase = settings.passphrase {
            let status = passphrase.text.withCString { srt_setsockflag(socket, SRTO_PASSPHRASE, $0, Int32(strlen($0))) }
            try check(status, "SRTO_PASSPHRASE")
        }
    }

    private static func bind(_ socket: SRTSOCKET, host: String, port: Int) throws {
        let address: SocketAddress
        do {
            address = try SocketAddress.makeAddressResolvingHost(host, port: port)
        } catch {
            throw SRTError.unresolved(host)
        }
        // libsrt will not bind the IPv6 wildcard until told whether it takes IPv4 too: it does, as NIO's sockets do.
        if case .v6 = address, address.ipAddressBytes?.allSatisfy({ $0 == 0 }) == true {
            try check(streamrecv_srt_set_int(socket, SRTO_IPV6ONLY, 0), "SRTO_IPV6ONLY")
        }
        let status = address.withSockAddr { pointer, length in srt_bind(socket, pointer, Int32(length)) }
        try check(status, "binding \(host):\(port)")
    }

    private static func check(_ status: Int32, _ what: String) throws {
        if status == SRT_ERROR { throw SRTError.call("\(what): \(String(cString: srt_getlasterror_str()))") }
    }

    // MARK: - Thread

    func start() throws {
        let thread = try SRTListenerThread(self)
        runOnDedicatedThread(named: "srt-\(configuration.name)") { thread.run() }
    }

    /// Closes the listener and the caller's connection; returns once the thread has ended. The decode thread's
    /// `.stop` (after this) ends the stream's session.
    func stop() {
        stopRequested.withLockedValue { $0 = true }
        finished.lock(whenValue: true)
        finished.unlock()
    }

    var shouldStop: Bool { stopRequested.withLockedValue { $0 } }

    func threadEnded() {
        srt_close(listener)
        finished.lock()
        finished.unlock(withValue: true)
    }
}

/// The logger libsrt's lines go to, behind the opaque pointer its C callback gets.
private final class LibraryLogger: Sendable {
    let logger: Logger
    init(_ logger: Logger) { self.logger = logger }
}

enum SRTError: Error, CustomStringConvertible {
    case call(String)
    case unresolved(String)

    var description: String {
        switch self {
        case .call(let message): return "SRT: \(message)"
        case .unresolved(let host): return "SRT: listen host '\(host)' does not resolve to an address"
        }
    }
}
