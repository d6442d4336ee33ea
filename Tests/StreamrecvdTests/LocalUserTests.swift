import CFrameRing
import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// What a hostile local user can try, each with a throwaway user made by useradd (removed afterwards).
@Suite(.serialized) struct LocalUserTests {
    /// The user creates the ring's name before the daemon starts, world-writable, and keeps it mapped. The daemon
    /// (root) does not adopt it: it says what it found, puts its own ring there (mode 0640, root's), and the
    /// user can neither read, write nor truncate that one; the squatter's mapping never sees a frame.
    @Test func aRingSquattedByAnotherUserIsNeverAdopted() throws {
        let user = try ThrowawayUser()
        let metricsPort = freePort()
        let daemon = try DaemonProcess(label: "squat", settings: ["max_width": "160", "max_height": "96"],
                                       daemonSettings: ["metrics": "\"127.0.0.1:\(metricsPort)\""], start: false)
        let path = "/dev/shm/\(daemon.shmName)"
        let squat = try user.python("import os; fd = os.open('\(path)', os.O_RDWR | os.O_CREAT, 0o666); os.fchmod(fd, 0o666); os.ftruncate(fd, 1 << 20)")
        #expect(squat.status == 0, "\(squat.standardError)")
        let squatted = try #require(objectInode(daemon.shmName))
        try daemon.start()
        #expect(objectInode(daemon.shmName) != squatted)
        let owner = try #require(objectOwnerAndMode(daemon.shmName))
        #expect(owner.uid == 0 && owner.mode == 0o640)
        #expect(daemon.log.contains("existed but was not created by this daemon's user (owner uid \(user.uid), mode 666): not adopted; replaced it"), "\(daemon.log.suffix(2000))")
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        #expect(sample(body, "streamrecvd_ring_problems_total", "stream=\"\(daemon.name)\",kind=\"foreign\"") == 1)
        let attempts = try user.python("""
            import os
            for flags in (os.O_RDWR, os.O_RDONLY):
                try:
                    os.open('\(path)', flags); print('opened')
                except PermissionError:
                    print('denied')
            try:
                os.truncate('\(path)', 0); print('truncated')
            except PermissionError:
                print('denied')
            """)
        #expect(attempts.text == "denied\ndenied\ndenied\n", "\(attempts.text) \(attempts.standardError)")
        try Sender(port: daemon.port).sendPaced(try generated("h264", frames: 5), pauseMicroseconds: 0)
        #expect(daemon.waitUntilPublished(5))
        #expect(daemon.isRunning)
    }

    /// The same squat against a daemon running as a service user, who may not remove another user's object from
    /// sticky /dev/shm: the stream does not start, and the error says whose object it is and what to do.
    @Test func aServiceUserSaysWhoseObjectBlocksItsRing() throws {
        let service = try ThrowawayUser()
        let daemon = try DaemonProcess(label: "squatsvc", settings: ["max_width": "160", "max_height": "96"], start: false)
        try forgeRing(daemon.shmName, owner: 0)
        defer { unlink("/dev/shm/" + daemon.shmName) }
        chmod(daemon.directory.path, 0o755)
        chmod(daemon.configPath, 0o644)
        let result = try runWatched("/usr/bin/setpriv", service.command(tool("streamrecvd"), ["--config", daemon.configPath]))
        #expect(result.status == 1 && !result.crashed)
        #expect(result.errors.contains("belongs to uid 0") && result.errors.contains("not adopted; remove it as root"), "\(result.errors)")
    }

    /// What the units run as root before a service-user daemon starts (ExecStartPre=+): objects another user put
    /// under the configured ring names are removed and named; the service user's own ring stays.
    @Test func theUnitsPreStartStepRemovesOnlyForeignObjects() throws {
        let user = try ThrowawayUser()
        let daemon = try DaemonProcess(label: "prestart", settings: ["max_width": "160", "max_height": "96"], start: false)
        try forgeRing(daemon.shmName, owner: user.uid)
        let removed = try runChecked(tool("streamrecvd"), ["--config", daemon.configPath, "--remove-foreign-rings", "root"]).text
        #expect(removed.contains("removed /dev/shm/\(daemon.shmName) (owner uid \(user.uid), mode 644"), "\(removed)")
        #expect(objectInode(daemon.shmName) == nil)
        try daemon.start()
        let kept = try runChecked(tool("streamrecvd"), ["--config", daemon.configPath, "--remove-foreign-rings", "root"]).text
        #expect(kept.isEmpty && objectInode(daemon.shmName) != nil, "the daemon's own ring stays")
    }

    /// A consumer with read access takes flock(LOCK_EX) on the ring and keeps it: the daemon still restarts (its
    /// lock needs write access, which no reader has), and the reader cannot take that lock.
    @Test func aReadOnlyConsumerCannotLockTheDaemonOut() throws {
        let user = try ThrowawayUser()
        let daemon = try DaemonProcess(label: "rolock", settings: ["max_width": "160", "max_height": "96", "shm_mode": "\"0644\""])
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        let path = "/dev/shm/\(daemon.shmName)"
        holder.arguments = user.command("/usr/bin/python3", ["-c", """
            import fcntl, os, struct, sys, time
            fd = os.open('\(path)', os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            try:
                fcntl.fcntl(fd, 37, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 0, 0))
                print('took the writer lock', flush=True)
            except OSError as error:
                print('writer lock refused', error.errno, flush=True)
            time.sleep(30)
            """])
        let output = Pipe()
        holder.standardOutput = output
        try holder.run()
        defer { holder.terminate() }
        var said = ""
        while !said.contains("\n") {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            said += String(decoding: chunk, as: UTF8.self)
        }
        #expect(said.contains("writer lock refused \(EBADF)"), "\(said)")
        #expect(daemon.stop() == 0)
        try daemon.start()
        #expect(!daemon.log.contains("another streamrecvd"))
        try Sender(port: daemon.port).sendPaced(try generated("h264", frames: 3), pauseMicroseconds: 0)
        #expect(daemon.waitUntilPublished(3))
    }

    /// Another user binds the daemon's UDP and RTP ports with SO_REUSEADDR (and SO_REUSEPORT): refused, so the
    /// stream cannot be stolen; the daemon keeps receiving.
    @Test(arguments: ["udp", "rtp"])
    func anotherUserCannotStealTheDatagramPort(transport: String) throws {
        let user = try ThrowawayUser()
        let daemon = try DaemonProcess(label: "steal\(transport)", settings: [
            "max_width": "160", "max_height": "96", "codec": "\"h264\"",
        ], transport: transport)
        let attempt = try user.python("""
            import socket
            for option in (socket.SO_REUSEADDR, socket.SO_REUSEPORT):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.setsockopt(socket.SOL_SOCKET, option, 1)
                try:
                    s.bind(('127.0.0.1', \(daemon.port))); print('bound')
                except OSError as error:
                    print('refused', error.errno)
            """)
        #expect(attempt.text == "refused \(EADDRINUSE)\nrefused \(EADDRINUSE)\n", "\(attempt.text)\(attempt.standardError)")
        if transport == "rtp" {
            sendDatagrams(try captureRTP(of: try writeTemporary(try generated("h264", frames: 5))), port: daemon.port)
        } else {
            let stream = try generated("h264", frames: 5)
            sendDatagrams(stride(from: 0, to: stream.count, by: 1400).map { Array(stream[$0..<min(stream.count, $0 + 1400)]) }, port: daemon.port)
        }
        #expect(daemon.waitUntilPublished(5, timeout: 20))
    }

    /// Objects anyone can put under /dev/shm, with headers and slots that lie: every reader turns each into its
    /// documented error, none crashes, `status` still lists the real stream, and a stream name cannot send escape
    /// sequences to the terminal. Forged headers are refused at attach; forged slots when they are published,
    /// while the readers wait for them.
    @Test func forgedRingsGetClearErrorsFromEveryReader() throws {
        let user = try ThrowawayUser()
        let daemon = try DaemonProcess(label: "forged", settings: ["max_width": "160", "max_height": "96"])
        let tag = "forged\(getpid())"
        typealias Forge = (UnsafeMutablePointer<streamrecv_shm_header>, UnsafeMutablePointer<streamrecv_shm_slot>) -> Void
        let headers: [(name: String, forge: Forge, truncate: Int?)] = [
            ("stride", { header, _ in header.pointee.slot_data_stride = UInt64.max / 3 }, nil),
            ("noslots", { header, _ in header.pointee.slot_count = 0 }, nil),
            ("offsets", { header, _ in header.pointee.slot_data_offset = UInt64.max - 100 }, nil),
            ("short", { _, _ in }, 9000),
            // Consistent, but sparse: a reader would allocate the terabyte its slots claim.
            ("sparse", { header, _ in
                header.pointee.slot_data_stride = 1 << 39
                header.pointee.slot_data_capacity = 1 << 39
                header.pointee.total_size = 8192 + 2 << 39
            }, 8192 + 2 << 39),
        ]
        let slots: [(name: String, forge: Forge)] = [
            ("plane", { _, slot in slot.pointee.plane_offset.0 = 1 << 40 }),
            ("rows", { _, slot in slot.pointee.plane_height.0 = UInt32.max; slot.pointee.plane_stride.0 = UInt32.max }),
            ("size", { _, slot in slot.pointee.data_size = 1 << 20 }),
        ]
        var names: [String] = []
        defer { for name in names { unlink("/dev/shm/streamrecv-" + name) } }
        for forgery in headers {
            names.append("\(tag)-\(forgery.name)")
            try forgeRing("streamrecv-" + names.last!, owner: user.uid, forge: forgery.forge, truncateTo: forgery.truncate)
        }
        for forgery in slots {
            names.append("\(tag)-\(forgery.name)")
            try forgeRing("streamrecv-" + names.last!, owner: user.uid)
        }
        let escape = "\(tag)-escape"
        names.append(escape)
        try forgeRing("streamrecv-" + escape, owner: user.uid, streamName: "\u{1B}[2J\u{1B}]0;owned\u{07}")
        // A FIFO under a ring name: opening it for reading would block until a writer comes.
        names.append("\(tag)-fifo")
        let fifo = try user.python("import os; os.mkfifo('/dev/shm/streamrecv-\(tag)-fifo', 0o644)")
        #expect(fifo.status == 0, "\(fifo.standardError)")

        let table = try runWatched(tool("streamrecvctl"), ["status"])
        #expect(table.status == 0 && !table.crashed, "\(table.errors)")
        let listed = try runProcess(tool("streamrecvctl"), ["status"])
        #expect(listed.text.contains(daemon.name), "the real stream is still listed")
        #expect(!listed.text.contains("\u{1B}") && !listed.standardError.contains("\u{1B}"), "no escape reaches the terminal")
        #expect(listed.standardError.contains("\(tag)-stride is not a streamrecv frame ring: slot data beyond total_size"), "\(listed.standardError)")

        // Each reader started on each object; for the forged slots, frame 2 is then published with the lie in it.
        let consumer = try consumerExample()
        for name in names where name != escape {
            let readers = try [
                ("cat", tool("streamrecvctl"), ["cat", "--shm", "streamrecv-" + name, "--frames", "1", "--timeout", "5"], "reading"),
                ("c", consumer, [name, "1"], "attached"),
                ("python", "/usr/bin/python3", [pythonReader, name, "--frames", "1", "--timeout", "5"], "attached"),
            ].map { label, executable, arguments, marker in (label, try WatchedProcess(executable, arguments), marker) }
            if let forgery = slots.first(where: { "\(tag)-\($0.name)" == name }) {
                // Each reader starts at the frame after the latest: frame 2 goes in only once all have attached (or
                // refused the object), however long a loaded machine takes to start them.
                for (label, reader, marker) in readers {
                    #expect(eventually(within: 20) { !reader.process.isRunning || reader.errorsSoFar.contains(marker) },
                            "\(label) on \(name) did not attach: \(reader.errorsSoFar)")
                }
                try publishForgedFrame(two: "streamrecv-" + name, forge: forgery.forge)
            }
            for (label, reader, _) in readers {
                let result = reader.finish(within: 20)
                #expect(!result.crashed, "\(label) on \(name) crashed: \(result.errors)")
                #expect(result.status != 0, "\(label) on \(name) accepted it")
                #expect(result.errors.contains("not a") && !result.errors.contains("Traceback"), "\(label) on \(name): \(result.errors)")
            }
        }
        #expect(daemon.isRunning)
    }
}

/// Writes bytes to a temporary file and returns its path.
func writeTemporary(_ bytes: [UInt8], name: String = "stream.h264") throws -> String {
    let url = try TestEnvironment.temporaryDirectory().appendingPathComponent(name)
    try Data(bytes).write(to: url)
    return url.path
}
