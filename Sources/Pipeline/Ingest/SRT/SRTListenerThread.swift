import CSRT
import CoreMetrics
import Decoding
import Glibc
import Logging
import NIOCore
import SharedFrames

/// The SRT listener's thread: one epoll loop over the listening socket and the caller streaming now. Made for that
/// thread and never shared (not Sendable): the caller and the refusal log live here alone (what libsrt's thread
/// asks about callers is `SRTAdmissionGate`).
final class SRTListenerThread {
    /// The caller streaming now: its socket is the slot's sender.
    private typealias Caller = SenderSlot<SRTSOCKET>.Occupant

    private let owner: SRTListener
    private let configuration: StreamConfiguration
    private let settings: SRTSettings
    private let worker: StreamWorker
    private let metrics: StreamMetrics
    private let listener: SRTSOCKET
    private let epoll: Int32
    private var slot: SenderSlot<SRTSOCKET>
    private var log: RateLimitedLogger
    private var nextStatistics: UInt64 = 0
    /// A loss is the last item queued for the decode thread: the next adds nothing until data follows it.
    private var lossQueued = false
    /// When to give freed memory back to the system, after callers were closed (`returnFreedMemory`).
    private var trimDue: UInt64?
    /// One SRT message at a time is read into this, then appended to the bytes for the decode thread.
    private var message = [UInt8](repeating: 0, count: 1500)

    /// Throws when libsrt cannot make the epoll set: the stream then fails to start, and says why.
    init(_ owner: SRTListener) throws {
        self.owner = owner
        (configuration, settings, worker, metrics, listener) =
            (owner.configuration, owner.settings, owner.worker, owner.metrics, owner.listener)
        log = RateLimitedLogger(logger: owner.logger)
        slot = SenderSlot(policy: owner.configuration.admissionPolicy, activity: owner.activity)
        epoll = srt_epoll_create()
        guard epoll >= 0 else { throw SRTError.call("srt_epoll_create: \(String(cString: srt_getlasterror_str()))") }
        var events = Int32(SRT_EPOLL_IN.rawValue | SRT_EPOLL_ERR.rawValue)
        guard srt_epoll_add_usock(epoll, listener, &events) == 0 else {
            let error = SRTError.call("srt_epoll_add_usock: \(String(cString: srt_getlasterror_str()))")
            srt_epoll_release(epoll)
            throw error
        }
    }

    func run() {
        var events = [SRT_EPOLL_EVENT](repeating: SRT_EPOLL_EVENT(), count: 4)
        while !owner.shouldStop {
            // 100 ms: how long a stop or a reload waits for this thread at most.
            let ready = Int(srt_epoll_uwait(epoll, &events, Int32(events.count), 100))
            // An error returns at once: waiting out the period keeps a broken epoll from spinning a core.
            if ready < 0 { usleep(100_000) }
            let now = MonotonicClock.nanoseconds()
            for event in events.prefix(max(0, ready)) {
                if event.fd == listener {
                    acceptCaller(now: now)
                } else if let current = slot.occupant, event.fd == current.sender {
                    receive(from: current, now: now)
                }
            }
            checkCaller(now: now)
            returnFreedMemory(now: now)
        }
        if let current = slot.occupant { close(current) }
        srt_epoll_release(epoll)
        owner.threadEnded()
    }

    // MARK: - Callers

    /// One pending caller (epoll reports the listener again while more are waiting: a non-blocking accept with none
    /// left would only make libsrt log an error).
    private func acceptCaller(now: UInt64) {
        var storage = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let socket = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { srt_accept(listener, $0, &length) }
        }
        guard socket != SRT_INVALID_SOCK else { return }
        admit(socket, from: Self.address(storage), now: now)
    }

    private func admit(_ socket: SRTSOCKET, from address: SocketAddress?, now: UInt64) {
        // `allow` and `max_connections_per_second` were applied before libsrt made the socket (SRTAdmissionGate).
        let remote = address?.description ?? "unknown"
        if let problem = encryptionProblem(socket) {
            // Limited per kind of mismatch: a wrong passphrase must not hide an unencrypted caller's line.
            return refuse(socket, from: address, .passphrase, key: "passphrase-\(problem.prefix(12))", "SRT caller refused: \(problem) (remote \(remote))")
        }
        guard case .admitted(let id, let replaced, let staleFor) = slot.admit(socket, from: address?.ipAddress, now: now) else {
            return refuse(socket, from: address, .secondSender, "second SRT caller refused: the current one is delivering video or has only just connected (second_sender = refuse) (remote \(remote))")
        }
        if let replaced {
            metrics.takeover(staleFor == nil ? .policy : .stale)
            let why = staleFor.map { "the current one delivered no video for \(String(Double($0) / 1e9, decimals: 1)) s" }
                ?? "second_sender = takeover"
            log.log(.warning, key: "takeover", now: now, "new SRT caller takes over (\(why)) (remote \(remote))")
            // The decode thread ends the old caller's session when the new one's begins.
            close(replaced)
        }
        var events = Int32(SRT_EPOLL_IN.rawValue | SRT_EPOLL_ERR.rawValue)
        srt_epoll_add_usock(epoll, socket, &events)
        worker.enqueue(.connected(id, remote: "srt \(remote)"))
        lossQueued = false
    }

    /// Why the caller's encryption does not match `passphrase`; nil when it does. With encryption not enforced,
    /// the handshake's outcome is left for this to read: a caller with another passphrase is "bad secret".
    private func encryptionProblem(_ socket: SRTSOCKET) -> String? {
        let state = streamrecv_srt_get_int(socket, SRTO_RCVKMSTATE)
        if settings.passphrase != nil {
            switch UInt32(bitPattern: state) {
            case SRT_KM_S_SECURED.rawValue: return nil
            case SRT_KM_S_BADSECRET.rawValue: return "wrong passphrase"
            case SRT_KM_S_UNSECURED.rawValue: return "it does not encrypt, and this stream has a passphrase"
            default: return "encryption not established (key material state \(state))"
            }
        }
        return state == Int32(SRT_KM_S_UNSECURED.rawValue) ? nil : "it encrypts, and this stream has no passphrase"
    }

    private func refuse(_ socket: SRTSOCKET, from address: SocketAddress?, _ reason: StreamMetrics.RefusalReason,
                        key: String? = nil, _ message: String) {
        srt_close(socket)
        owner.gate.refusedAfterHandshake(address)
        closed(now: MonotonicClock.nanoseconds())
        metrics.refused(reason)
        log.log(.warning, key: key ?? reason.rawValue, now: MonotonicClock.nanoseconds(), message)
    }

    // MARK: - Receiving

    /// Every message the caller has ready, as one array for the decode thread.
    private func receive(from current: Caller, now: UInt64) {
        var bytes = worker.bytePool.take()
        var failure: Int32?
        while bytes.count < 256 << 10 {
            let count = message.withUnsafeMutableBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { srt_recvmsg(current.sender, $0.baseAddress, Int32($0.count)) }
            }
            if count > 0 {
                bytes.append(contentsOf: message[0..<Int(count)])
                continue
            }
            let code = srt_getlasterror(nil)
            if code != Int32(SRT_EASYNCRCV.rawValue) { failure = code }
            break
        }
        if !bytes.isEmpty {
            if worker.acceptsMoreBytes {
                lossQueued = false
                _ = worker.enqueue(bytes: bytes, receivedAt: now, connection: current.id)
            } else {
                // SRT cannot be held back: dropped here, and said to the decode thread, which marks the frames the
                // hole damages (a continuity counter gap would miss a multiple of 16 lost packets).
                metrics.datagramsLost.increment()
                // One item for a run of losses with nothing queued between them: a run is one gap.
                if !lossQueued { worker.enqueue(.datagramsLost(current.id)) }
                lossQueued = true
                log.log(.warning, key: "srt-behind", now: now,
                        "decoder behind: \(bytes.count) bytes from the SRT caller dropped (the frames they damage are flagged)")
                worker.bytePool.recycle(bytes)
            }
        } else {
            worker.bytePool.recycle(bytes)
        }
        if let failure {
            let reason: DisconnectReason = failure == Int32(SRT_ECONNLOST.rawValue) || failure == Int32(SRT_EINVSOCK.rawValue)
                ? .closedBySender : .connectionError(String(cString: srt_getlasterror_str()))
            end(current, reason: reason)
        }
    }

    /// The caller's idle deadline, and libsrt's loss counters once a second.
    private func checkCaller(now: UInt64) {
        guard let current = slot.occupant else { return }
        if now >= nextStatistics {
            nextStatistics = now + 1_000_000_000
            collectStatistics(current, now: now)
        }
        if let (idle, quiet) = slot.idle(now: now) {
            metrics.idleDisconnects.increment()
            end(idle, reason: .idle(seconds: Double(quiet) / 1e9))
        }
    }

    private func collectStatistics(_ current: Caller, now: UInt64) {
        var statistics = SRT_TRACEBSTATS()
        guard srt_bstats(current.sender, &statistics, 1) == 0 else { return }
        if statistics.pktRcvLoss > 0 { metrics.srtPacketsLost.increment(by: Int64(statistics.pktRcvLoss)) }
        if statistics.pktRcvDrop > 0 {
            metrics.srtPacketsDropped.increment(by: Int64(statistics.pktRcvDrop))
            log.log(.warning, key: "srt-drop", now: now,
                    "SRT gave up on \(statistics.pktRcvDrop) packet(s) that came too late (latency_ms = \(settings.latencyMilliseconds), round trip \(String(statistics.msRTT, decimals: 1)) ms): raise latency_ms to about 4 round trips, or use srt_delivery = \"arrival\"")
        }
    }

    private func end(_ current: Caller, reason: DisconnectReason) {
        collectStatistics(current, now: MonotonicClock.nanoseconds())
        close(current)
        worker.enqueue(.disconnected(current.id, reason: reason))
    }

    private func close(_ current: Caller) {
        srt_epoll_remove_usock(epoll, current.sender)
        srt_close(current.sender)
        let now = MonotonicClock.nanoseconds()
        closed(now: now)
        slot.release(current.id, now: now)
    }

    // MARK: - Memory

    /// libsrt gives every accepted socket about a megabyte (loss lists sized by the flow window, buffers), made on
    /// its receiving thread and freed by its garbage collector 1 to 2 s after `srt_close`. glibc keeps what that
    /// thread's arena freed: a flood of refused callers (2480 with a wrong passphrase) left the daemon at 223 MB
    /// instead of 37, for ever. Once the collector has freed a burst's sockets, the free pages go back.
    private func closed(now: UInt64) {
        if trimDue == nil { trimDue = now + Self.trimDelay }
    }

    /// libsrt's collector runs once a second and frees a socket closed more than a second before.
    static let trimDelay: UInt64 = 3_000_000_000

    private func returnFreedMemory(now: UInt64) {
        guard let due = trimDue, now >= due else { return }
        trimDue = nil
        malloc_trim(0)
    }

    private static func address(_ storage: sockaddr_storage) -> SocketAddress? {
        let family = Int32(storage.ss_family)
        return withUnsafeBytes(of: storage) { raw in
            switch family {
            case AF_INET: return SocketAddress(raw.load(as: sockaddr_in.self))
            case AF_INET6: return SocketAddress(raw.load(as: sockaddr_in6.self))
            default: return nil
            }
        }
    }
}
