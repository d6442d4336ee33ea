import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// GET over a plain TCP connection; returns the status code and the body.
func httpGet(port: Int, path: String) throws -> (status: Int, body: String) {
    let response = try httpRequest(port: port, method: "GET", path: path, headers: [:], body: "")
    return (response.status, response.body)
}

/// The value of the sample `name{labels}` in a Prometheus text exposition.
func sample(_ exposition: String, _ name: String, _ labels: String) -> Double? {
    let prefix = "\(name){\(labels)} "
    return exposition.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Double($0.dropFirst(prefix.count)) }
}

@Suite(.serialized) struct ServiceTests {
    /// Polls `state` until it is `expected`; the last state seen. The 20 s deadline only ends a failing test.
    static func awaitState(_ expected: StreamState, _ state: () -> StreamState?) -> StreamState? {
        let deadline = Date().addingTimeInterval(20)
        var seen = state()
        while seen != expected && Date() < deadline {
            usleep(20_000)
            seen = state()
        }
        return seen
    }

    /// SIGHUP: RELOADING=1 … READY=1; a removed stream stops, an added one listens and decodes, and the stream
    /// whose configuration did not change keeps its sender and publishes every frame through the reload.
    @Test func sighupAddsAndRemovesStreamsWhileAnotherKeepsStreaming() throws {
        let daemon = try DaemonProcess(label: "reload", settings: ["max_width": "160", "max_height": "96", "slots": "128"], start: false)
        let listener = try NotifyListener(directory: daemon.directory)
        let (removed, added) = (daemon.name + "-old", daemon.name + "-new")
        let (removedPort, addedPort) = (freePort(), freePort())
        defer {
            shm_unlink("/streamrecv-" + removed)
            shm_unlink("/streamrecv-" + added)
        }
        func table(_ name: String, _ port: Int) -> String {
            "\n[[stream]]\nname = \"\(name)\"\nlisten = \"tcp://127.0.0.1:\(port)\"\nhwaccel = \"none\"\nmax_width = 160\nmax_height = 96\n"
        }
        let base = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
        try (base + table(removed, removedPort)).write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        try daemon.start(environment: ["NOTIFY_SOCKET": listener.path])
        #expect(listener.receive { $0.contains("READY=1") }.last?.contains("READY=1") == true)
        // Its decode thread may say `waiting` a moment after READY=1 on a loaded machine: the state is waited for.
        let removedState = Self.awaitState(.waiting) { (try? FrameRingReader(shmName: "streamrecv-" + removed))?.status.state }
        #expect(removedState == .waiting, "the stream to be removed is \(removedState.map { "\($0)" } ?? "without a ring")")

        // ffmpeg sends 90 frames in real time (25 fps) to the stream that stays; the reload happens meanwhile.
        let file = daemon.directory.appendingPathComponent("kept.h264")
        try Data(try generated("h264", frames: 90)).write(to: file)
        let ffmpeg = Process()
        ffmpeg.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        ffmpeg.arguments = ["-v", "error", "-re", "-i", file.path, "-c", "copy", "-f", "h264", "tcp://127.0.0.1:\(daemon.port)"]
        ffmpeg.standardInput = FileHandle.nullDevice
        try ffmpeg.run()
        usleep(1_000_000)
        listener.drain()
        try (base + table(added, addedPort)).write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        daemon.send(signal: SIGHUP)
        let reload = listener.receive { $0.contains("READY=1") }
        let reloading = reload.firstIndex { $0.contains("RELOADING=1") && $0.contains("MONOTONIC_USEC=") }
        #expect(reloading != nil && reload.last?.contains("READY=1") == true, "\(reload)")
        // By READY=1 the removed stream has stopped (its ring removed with it) and the added one listens.
        #expect((try? FrameRingReader(shmName: "streamrecv-" + removed)) == nil, "the removed stream's ring is gone")
        try Sender(port: addedPort).sendPaced(try generated("h264", frames: 10), pauseMicroseconds: 0)
        #expect((try? Sender(port: removedPort)) == nil, "the removed stream's port is closed")

        ffmpeg.waitUntilExit()
        #expect(ffmpeg.terminationStatus == 0)
        #expect(daemon.waitUntilPublished(90))
        let kept = try #require(daemon.status)
        #expect(kept.counters.framesPublished == 90 && kept.counters.framesDropped == 0)
        #expect(kept.counters.connections == 1, "the sender was never disconnected")
        let addedRing = try FrameRingReader(shmName: "streamrecv-" + added)
        let deadline = Date().addingTimeInterval(20)
        while addedRing.status.counters.framesPublished < 10 && Date() < deadline { usleep(20_000) }
        #expect(addedRing.status.counters.framesPublished == 10)
        #expect(daemon.log.contains("added \(added); removed \(removed); changed none; unchanged \(daemon.name)"), "\(daemon.log.suffix(2000))")

        // A broken file changes nothing; the daemon says why and carries on.
        try (base + "\n[[stream]]\nname = \"x\"\n").write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        listener.drain()
        daemon.send(signal: SIGHUP)
        #expect(listener.receive { $0.contains("READY=1") }.last?.contains("READY=1") == true)
        #expect(daemon.log.contains("reload failed, configuration unchanged"))
        #expect(Self.awaitState(.waiting) { addedRing.status.state } == .waiting && daemon.isRunning)
        listener.drain()
        #expect(daemon.stop() == 0)
        #expect(listener.receive(until: { $0.contains("STOPPING=1") }, seconds: 5).last == "STOPPING=1")
    }

    @Test func prometheusEndpointCountsWhatTheStreamDid() throws {
        let metricsPort = freePort()
        let daemon = try DaemonProcess(label: "metrics", settings: ["max_width": "160", "max_height": "96", "slots": "64"],
                                       daemonSettings: ["metrics": "\"127.0.0.1:\(metricsPort)\""])
        let stream = try generated("h264", frames: 30)
        try Sender(port: daemon.port).sendPaced(stream, pauseMicroseconds: 2000)
        #expect(daemon.waitUntilPublished(30))
        let (status, body) = try httpGet(port: metricsPort, path: "/metrics")
        #expect(status == 200)
        let stream_ = "stream=\"\(daemon.name)\""
        #expect(sample(body, "streamrecvd_frames_published_total", stream_) == 30, "\(body)")
        #expect(sample(body, "streamrecvd_frames_decoded_total", stream_) == 30)
        #expect(sample(body, "streamrecvd_access_units_total", stream_) == 30)
        #expect(sample(body, "streamrecvd_received_bytes_total", stream_) == Double(stream.count))
        #expect(sample(body, "streamrecvd_connections_total", stream_) == 1)
        #expect(sample(body, "streamrecvd_decode_errors_total", stream_) == 0)
        #expect(sample(body, "streamrecvd_frames_dropped_total", "\(stream_),reason=\"too_large\"") == 0)
        #expect(sample(body, "streamrecvd_publish_latency_seconds_count", stream_) == 30)
        #expect(sample(body, "streamrecvd_frame_write_seconds_count", stream_) == 30)
        #expect(sample(body, "streamrecvd_decoder_hardware_fallbacks_total", stream_) == 0)
        #expect(sample(body, "streamrecvd_frame_width", stream_) == 160)
        #expect(sample(body, "streamrecvd_frame_height", stream_) == 96)
        #expect(sample(body, "streamrecvd_decoder_hardware", stream_) == 0)
        #expect(body.contains("# TYPE streamrecvd_publish_latency_seconds histogram"))
        #expect(try httpGet(port: metricsPort, path: "/").status == 404)
        // A request that does not parse (a bare LF) after a good one: its 400, and the connection ends there (it
        // used to stay open, reading on). 8 s is under the 10 s idle timer: an end before it is the daemon's doing.
        let connection = try Sender(port: metricsPort)
        try connection.send(Array("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\nHost: x\r\n\r\n".utf8)[...])
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        var closed = false
        while !closed {
            var poll = pollfd(fd: connection.descriptor, events: Int16(POLLIN), revents: 0)
            guard Glibc.poll(&poll, 1, 8000) > 0 else { break }
            let count = recv(connection.descriptor, &buffer, buffer.count, 0)
            if count <= 0 { closed = true } else { answer += buffer[0..<count] }
        }
        #expect(closed && String(decoding: answer, as: UTF8.self).contains("HTTP/1.1 400"), "\(String(decoding: answer.suffix(200), as: UTF8.self))")
    }

    @Test func tcpSourcesOutsideAllowAreRefusedAndCounted() throws {
        let metricsPort = freePort()
        let daemon = try DaemonProcess(label: "allowtcp", settings: ["allow": "[\"10.0.0.0/8\", \"fd00::/8\"]"],
                                       daemonSettings: ["metrics": "\"127.0.0.1:\(metricsPort)\""])
        let sender = try Sender(port: daemon.port)
        #expect(sender.closedByPeer(within: 5))
        #expect(daemon.status?.counters.connections == 0)
        #expect(daemon.log.contains("connection refused: source not in allow"))
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        #expect(sample(body, "streamrecvd_refused_total", "stream=\"\(daemon.name)\",reason=\"not_allowed\"") == 1, "\(body)")
        #expect(daemon.isRunning)
    }

    @Test func datagramsOutsideAllowAreIgnored() throws {
        let daemon = try DaemonProcess(label: "allowrtp", settings: [
            "codec": "\"h264\"", "allow": "[\"10.0.0.0/8\"]", "idle_timeout": "3",
        ], transport: "rtp")
        sendDatagrams(try RTPLossTests.source().packets, port: daemon.port, pauseMicroseconds: 200)
        #expect(eventually { daemon.log.contains("datagrams from a source outside allow ignored") }, "\(daemon.log.suffix(1500))")
        #expect(daemon.status?.counters.connections == 0 && daemon.status?.counters.bytesReceived == 0)
    }

    /// A connection flood: beyond max_connections_per_second new connections are closed at once, logged once
    /// per 10 s; the first sender keeps the stream.
    @Test func aConnectionFloodIsRateLimited() throws {
        let metricsPort = freePort()
        let daemon = try DaemonProcess(label: "flood", settings: ["max_connections_per_second": "2"],
                                       daemonSettings: ["metrics": "\"127.0.0.1:\(metricsPort)\""])
        let first = try Sender(port: daemon.port)
        var flood: [Sender] = []
        for _ in 0..<20 { flood.append(try Sender(port: daemon.port)) }
        #expect(flood.allSatisfy { $0.closedByPeer(within: 5) })
        #expect(!first.closedByPeer(within: 0.2), "the first sender keeps the stream")
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        let limited = sample(body, "streamrecvd_refused_total", "stream=\"\(daemon.name)\",reason=\"rate_limited\"") ?? 0
        let second = sample(body, "streamrecvd_refused_total", "stream=\"\(daemon.name)\",reason=\"second_sender\"") ?? 0
        #expect(limited + second == 20 && limited >= 10, "\(body)")
        let lines = daemon.log.split(separator: "\n").filter { $0.contains("over max_connections_per_second") }
        #expect(lines.count == 1, "rate-limited log: \(lines)")
    }

    /// After a lost packet the daemon asks the sender for a keyframe over RTCP: PLI to the RTP port itself
    /// (rtcp_mux), FIR to RTP port + 1.
    @Test(arguments: [("pli", true), ("fir", false)])
    func aLossAsksTheSenderForAKeyframe(kind: String, mux: Bool) throws {
        let packets = try RTPLossTests.source().packets
        let timestamps = try rtpTimestamps(packets)
        let frameStarts = timestamps.indices.filter { $0 == 0 || timestamps[$0] != timestamps[$0 - 1] }
        var lossy = packets
        lossy.remove(at: frameStarts[4])
        var pair: (rtp: (descriptor: Int32, port: Int), rtcp: (descriptor: Int32, port: Int))?
        while pair == nil, let rtp = boundDatagramSocket() {
            if mux { pair = (rtp, rtp) } else if let rtcp = boundDatagramSocket(port: rtp.port + 1) { pair = (rtp, rtcp) } else { close(rtp.descriptor) }
        }
        let sockets = try #require(pair)
        defer {
            close(sockets.rtp.descriptor)
            if !mux { close(sockets.rtcp.descriptor) }
        }
        let daemon = try DaemonProcess(label: "rtcp\(kind)", settings: [
            "max_width": "320", "max_height": "240", "slots": "32", "codec": "\"h264\"", "idle_timeout": "3",
            "keyframe_request": "\"\(kind)\"", "rtcp_mux": String(mux),
        ], transport: "rtp")
        sendDatagrams(lossy, port: daemon.port, from: sockets.rtp.descriptor)
        let feedback = try #require(receiveDatagram(sockets.rtcp.descriptor, within: 5), "\(daemon.log.suffix(2000))")
        let mediaSSRC = Array(packets[0][8..<12])
        #expect(feedback[1] == 201 && feedback[9] == 206, "an RR then payload-specific feedback: \(feedback)")
        if kind == "pli" {
            #expect(feedback.count == 20 && feedback[8] & 0x1f == 1 && Array(feedback[16..<20]) == mediaSSRC)
        } else {
            #expect(feedback.count == 28 && feedback[8] & 0x1f == 4 && Array(feedback[20..<24]) == mediaSSRC)
        }
        #expect(daemon.waitUntilPublished(19))
        #expect(daemon.log.contains("asked the sender for a keyframe (RTCP \(kind.uppercased()))"))
    }
}
