import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// What operators do to a running daemon: truncate or remove its ring, reload a changed configuration, restart
/// it with other settings, kill it. The stream must go on (or say clearly why not) and readers must follow.
@Suite(.serialized) struct OperationsTests {
    /// `truncate -s 0` on the ring while frames flow, and again while idle before the next sender: the daemon
    /// never dies, re-creates the ring (log line, counter), the counters continue, and the C, Python and
    /// streamrecvctl readers attached all along follow it to the new object without crashing.
    @Test func truncatingTheRingWhileStreamingAndWhileIdle() throws {
        let metricsPort = freePort()
        let daemon = try DaemonProcess(label: "truncate", settings: ["max_width": "320", "max_height": "240", "slots": "16"],
                                       daemonSettings: ["metrics": "\"127.0.0.1:\(metricsPort)\""])
        let stream = try generated("h264", size: "320x240", frames: 50, parameters: "keyint=10")
        let path = "/dev/shm/\(daemon.shmName)"
        let name = String(daemon.shmName.dropFirst("streamrecv-".count))
        let readers = try [
            ("cat", WatchedProcess(tool("streamrecvctl"), ["cat", name, "--frames", "100", "--timeout", "20", "--format", "raw"])),
            ("c", WatchedProcess(try consumerExample(), [name, "100"])),
            ("python", WatchedProcess("/usr/bin/python3", [pythonReader, name, "--frames", "100", "--timeout", "20"])),
        ]
        usleep(500_000)
        let sender = try Sender(port: daemon.port)
        let offsets = StreamFacts(stream).accessUnitOffsets + [stream.count]
        try sender.send(stream[..<offsets[0]])
        for index in 0..<(offsets.count - 1) {
            if index == 25 { #expect(truncate(path, 0) == 0) }
            try sender.send(stream[offsets[index]..<offsets[index + 1]])
            usleep(40_000)
        }
        sender.close()
        #expect(daemon.waitUntilPublished(50))
        // Idle now: truncated again; noticed within a second, and the next sender streams into a whole ring.
        #expect(truncate(path, 0) == 0)
        try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: 40_000)
        #expect(daemon.waitUntilPublished(100))
        #expect(daemon.isRunning)
        let status = try #require(daemon.status)
        #expect(status.counters.framesPublished == 100 && status.counters.connections == 2, "counters continue in each new ring")
        #expect(daemon.log.components(separatedBy: "was truncated by another process; re-created it").count - 1 >= 1)
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        #expect((sample(body, "streamrecvd_ring_problems_total", "stream=\"\(daemon.name)\",kind=\"truncated\"") ?? 0) >= 2, "\(body)")
        for (label, reader) in readers {
            let result = reader.finish(within: 30)
            // A truncation takes the frames that were in the shrunk object: a reader may miss some, never dies.
            #expect(!result.crashed, "\(label) crashed: \(result.errors)")
            #expect(result.status == 0 || result.errors.contains("lapped") || result.status == 2, "\(label): \(result)")
        }
    }

    /// A reload that changes a stream (its idle_timeout), twenty times, with and without a sender: the changed
    /// stream takes its ring and port again every time (no "another streamrecvd" error), frames flow after each,
    /// and the daemon's memory and descriptors stay flat. A removed stream's ring is removed.
    @Test func reloadingAChangedStreamTwentyTimesKeepsItUpAndLeaksNothing() throws {
        let daemon = try DaemonProcess(label: "reload20", settings: ["max_width": "640", "max_height": "480", "slots": "8"])
        let pid = try #require(daemon.pid)
        let base = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
        let stream = try generated("h264", size: "640x480", frames: 10)
        func reload(_ round: Int) throws {
            try (base + "\nidle_timeout = \(5 + round)\n").write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
            let before = daemon.log.components(separatedBy: "reloaded").count
            daemon.send(signal: SIGHUP)
            let deadline = Date().addingTimeInterval(20)
            while daemon.log.components(separatedBy: "reloaded").count == before && Date() < deadline { usleep(20_000) }
        }
        try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: 5000)
        #expect(daemon.waitUntilPublished(10))
        // Warm-up rounds: allocator pools and the decoder reach their steady size.
        for round in 0..<3 { try reload(round) }
        let (rssBefore, descriptorsBefore) = (residentKilobytes(pid), openDescriptors(pid))
        for round in 3..<23 {
            // Every other round with a sender connected while the reload happens.
            let sender = round % 2 == 0 ? try Sender(port: daemon.port) : nil
            if let sender { try sender.send(stream[..<(stream.count / 2)]) }
            try reload(round)
            #expect(daemon.log.contains("changed \(daemon.name)"))
            sender?.close()
            // The old instance drained before the new one started: the count is settled.
            let before = daemon.status?.counters.framesPublished ?? 0
            try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: 2000)
            let deadline = Date().addingTimeInterval(20)
            while (daemon.status?.counters.framesPublished ?? 0) < before + 10 && Date() < deadline { usleep(20_000) }
            #expect(daemon.status?.counters.framesPublished == before + 10, "round \(round)")
        }
        let (rssAfter, descriptorsAfter) = (residentKilobytes(pid), openDescriptors(pid))
        #expect(!daemon.log.contains("another streamrecvd") && !daemon.log.contains("could not start"))
        #expect(descriptorsAfter == descriptorsBefore, "descriptors \(descriptorsBefore) -> \(descriptorsAfter)")
        // The old bug kept every old ring's mapping (+20 MB per reload for this ring): allow allocator noise only.
        #expect(rssAfter - rssBefore < 16_000, "RSS \(rssBefore) kB -> \(rssAfter) kB over 20 reloads")
        print("20 reloads: RSS \(rssBefore) -> \(rssAfter) kB, descriptors \(descriptorsBefore) -> \(descriptorsAfter)")
        // Removed from the configuration: stopped, and its ring removed from /dev/shm.
        try base.replacingOccurrences(of: "name = \"\(daemon.name)\"", with: "name = \"\(daemon.name)-renamed\"")
            .replacingOccurrences(of: "\(daemon.port)", with: "\(freePort())")
            .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        daemon.send(signal: SIGHUP)
        let deadline = Date().addingTimeInterval(20)
        while objectInode(daemon.shmName) != nil && Date() < deadline { usleep(20_000) }
        #expect(objectInode(daemon.shmName) == nil, "the removed stream's ring is gone")
        shm_unlink("/streamrecv-\(daemon.name)-renamed")
    }

    /// A reload whose changed stream cannot start (its port is taken by another program) says so: an error line
    /// naming the stream, the STATUS= text, and the next reload tries again.
    @Test func aStreamThatCannotStartOnReloadIsReportedAndRetried() throws {
        let daemon = try DaemonProcess(label: "reloadfail", settings: ["max_width": "160", "max_height": "96"], start: false)
        let listener = try NotifyListener(directory: daemon.directory)
        try daemon.start(environment: ["NOTIFY_SOCKET": listener.path])
        _ = listener.receive { $0.contains("READY=1") }
        // Outside the ephemeral range: freed below, the port must still be free when the daemon binds it (a parallel
        // test's bind(0) took it once, and the stream stayed stopped).
        let blocker = try #require(boundDatagramSocketOutsideEphemeralRange())
        let base = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
        let moved = base.replacingOccurrences(of: "tcp://127.0.0.1:\(daemon.port)", with: "udp://127.0.0.1:\(blocker.port)")
        try moved.write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        listener.drain()
        daemon.send(signal: SIGHUP)
        let messages = listener.receive { $0.contains("READY=1") }
        #expect(daemon.log.contains("reloaded \(daemon.configPath) with errors") && daemon.log.contains("not running: \(daemon.name)"), "\(daemon.log.suffix(1500))")
        let deadline = Date().addingTimeInterval(5)
        var status = messages.joined(separator: "\n")
        while !status.contains("\(daemon.name): not running") && Date() < deadline {
            status += listener.receive(until: { $0.contains("STATUS=") }, seconds: 2).joined(separator: "\n")
        }
        #expect(status.contains("\(daemon.name): not running"), "\(status)")
        // The port is free again: the next reload starts the stream, though its settings did not change.
        close(blocker.descriptor)
        for _ in 0..<3 {
            let taken = daemon.log.components(separatedBy: "Address already in use").count
            listener.drain()
            daemon.send(signal: SIGHUP)
            _ = listener.receive { $0.contains("READY=1") }
            let listening = Date().addingTimeInterval(10)
            while (try? FrameRingReader(shmName: daemon.shmName))?.status.state != .waiting && Date() < listening { usleep(20_000) }
            // Another test's socket took the freed port before the reload (seen once in a full parallel run): the
            // stream failed to start again, as it should; the next reload tries again.
            guard (try? FrameRingReader(shmName: daemon.shmName))?.status.state != .waiting,
                  daemon.log.components(separatedBy: "Address already in use").count > taken else { break }
        }
        #expect(daemon.log.contains("changed \(daemon.name)"), "\(daemon.log.suffix(1500))")
        let ring = try FrameRingReader(shmName: daemon.shmName)
        #expect(ring.status.state == .waiting && ring.writerIsAlive, "\(ring.status.state)\n\(daemon.log.suffix(2000))")
        #expect(daemon.isRunning)
    }

    /// The daemon restarted with another slot count: its ring is a new object, not the old one shrunk under the
    /// readers' mappings, so `cat` follows it instead of exiting "writer is gone".
    @Test func aRestartWithAnotherGeometryIsFollowedByReaders() throws {
        let daemon = try DaemonProcess(label: "geometry", settings: ["max_width": "160", "max_height": "96", "slots": "16"])
        let stream = try generated("h264", frames: 10)
        let cat = try CatProcess(stream: daemon.name, frames: 20, timeout: 20, directory: daemon.directory)
        try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: 20_000)
        #expect(daemon.waitUntilPublished(10))
        let before = objectInode(daemon.shmName)
        #expect(daemon.stop() == 0)
        let base = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
        try base.replacingOccurrences(of: "slots = 16", with: "slots = 4").write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        try daemon.start()
        #expect(objectInode(daemon.shmName) != before)
        try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: 20_000)
        let result = cat.finish()
        #expect(result.status == 0, "\(result.errors)")
        #expect(try catMD5s(cat).count == 20)
        #expect(daemon.status?.counters.framesPublished == 20 && daemon.status?.slotCount == 4)
    }

    /// A daemon killed with SIGKILL leaves "streaming" in its ring's header: `status` says the writer is dead.
    @Test func statusTellsADeadDaemonFromAStreamingOne() throws {
        let daemon = try DaemonProcess(label: "killed", settings: ["max_width": "160", "max_height": "96"])
        let sender = try Sender(port: daemon.port)
        try sender.sendPaced(try generated("h264", frames: 5), pauseMicroseconds: 0)
        let deadline = Date().addingTimeInterval(10)
        while daemon.status?.state != .streaming && Date() < deadline { usleep(20_000) }
        #expect(try runChecked(tool("streamrecvctl"), ["status", daemon.name]).text.contains(" streaming "))
        daemon.send(signal: SIGKILL)
        _ = daemon.stop()
        let table = try runChecked(tool("streamrecvctl"), ["status", daemon.name]).text
        #expect(table.contains(" dead "), "\(table)")
        #expect(try runChecked(tool("streamrecvctl"), ["status", daemon.name, "--json"]).text.contains("\"writer_alive\":false"))
    }

    /// Rings are sized to what is decoded: a 640x360 stream on the default configuration (max 3840x2160) pins
    /// under 10 MB, and a larger format later moves the stream to a larger ring that a reader follows, bit-exact.
    @Test func theRingIsSizedToTheStreamAndGrowsWithIt() throws {
        let daemon = try DaemonProcess(label: "sized", settings: ["slots": "8"])
        let small = try generated("h264", size: "640x360", frames: 10)
        let large = try generated("h264", size: "1280x720", frames: 10)
        let cat = try CatProcess(stream: daemon.name, frames: 20, timeout: 30, segmented: true, directory: daemon.directory)
        try Sender(port: daemon.port).sendPaced(small, pauseMicroseconds: 20_000)
        #expect(daemon.waitUntilPublished(10))
        let ring = try #require(daemon.status)
        let size = try FrameRingReader(shmName: daemon.shmName).objectSize
        #expect(size < 10_000_000 && ring.slotCount == 8, "640x360 ring: \(size) bytes")
        try Sender(port: daemon.port).sendPaced(large, pauseMicroseconds: 20_000)
        #expect(daemon.waitUntilPublished(20))
        #expect(try FrameRingReader(shmName: daemon.shmName).objectSize > 8 * 1280 * 720 * 3 / 2)
        let result = cat.finish()
        #expect(result.status == 0, "\(result.errors)")
        let reference = try referenceMD5s(small, facts: StreamFacts(small), directory: daemon.directory)
            + referenceMD5s(large, facts: StreamFacts(large), directory: daemon.directory)
        #expect(firstDifference(try catMD5s(cat), reference) == nil)
        #expect(daemon.log.contains("moved to a new object sized for the frames now decoded"))
        let check = try runChecked(tool("streamrecvd"), ["--check-config", daemon.configPath]).text
        #expect(check.contains("ring /dev/shm/\(daemon.shmName), 8 slots, at most"), "\(check)")
    }
}
