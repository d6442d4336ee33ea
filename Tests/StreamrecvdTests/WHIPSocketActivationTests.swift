import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// `[webrtc]`'s sockets held across restarts by socket activation (systemd/streamrecvd-whip.socket and
/// streamrecvd-whip-media.socket, played by `SocketHolder`): a local user polling bind() every millisecond never
/// gets the WHIP port or the media port while the daemon stops and starts, and the next WHIP client's frames arrive.
/// Without the inherited sockets the same user takes the ports in the gap (the control that makes the first test
/// mean something), and inherited sockets that do not fit the configuration are refused.
@Suite(.serialized) struct WHIPSocketActivationTests {
    /// A whip stream's daemon, not started; its `[webrtc]` on 127.0.0.1 at two free ports.
    static func daemon(_ label: String, mediaHost: String = "127.0.0.1") throws -> (DaemonProcess, whipPort: Int, mediaPort: Int) {
        let directory = try TestEnvironment.temporaryDirectory()
        let tokenPath = directory.appendingPathComponent("whip.token").path
        try (WebRTCIngestTests.token + "\n").write(toFile: tokenPath, atomically: true, encoding: .utf8)
        chmod(tokenPath, 0o600)
        let (whipPort, mediaPort) = (freePort(), freePort())
        let daemon = try DaemonProcess(
            label: label, settings: ["token_file": "\"\(tokenPath)\"", "max_width": "1280", "max_height": "720", "slots": "200"],
            transport: "whip", tables: "[webrtc]\nlisten = \"127.0.0.1:\(whipPort)\"\nmedia = \"\(mediaHost):\(mediaPort)\"", start: false)
        return (daemon, whipPort, mediaPort)
    }

    /// A WHIP client sends 40 frames; at least 20 are published by the daemon serving now.
    static func expectFramesArrive(_ daemon: DaemonProcess, whipPort: Int) throws {
        let record = daemon.directory.appendingPathComponent("sent.h264").path
        let client = try WebRTCIngestTests.runClient(url: "http://127.0.0.1:\(whipPort)/whip/\(daemon.name)", record: record, frames: 40)
        #expect(client.result == "sent 40 frames", "\(client.log)\n\(daemon.log.suffix(3000))")
        let published = daemon.status?.counters.framesPublished ?? 0
        #expect(published >= 20, "\(published) frames published\n\(daemon.log.suffix(3000))")
    }

    @Test func restartsUnderSocketActivationLeaveTheSquatterNothing() throws {
        let (daemon, whipPort, mediaPort) = try Self.daemon("holdwhip")
        let holder = try SocketHolder(daemon: daemon, sockets: ["whip-http=tcp:\(whipPort)", "whip-media=udp:\(mediaPort)"])
        try #require(holder.waitUntilServing(started: 1) != nil, "\(daemon.log.suffix(3000))")
        // From here on, as after any first start: the daemon has cleared systemd's SO_REUSEADDR on the media socket.
        let user = try ThrowawayUser()
        let squatter = try PortSquatter(user: user, tcp: whipPort, udp: mediaPort, directory: daemon.directory)
        let restarts = 4
        for round in 2...(restarts + 1) {
            holder.restart()
            try #require(holder.waitUntilServing(started: round) != nil, "round \(round): \(holder.events)\n\(daemon.log.suffix(3000))")
        }
        let report = squatter.finish()
        #expect(report.hasSuffix("bound none"), "\(squatter.output)")
        let attempts = Int(report.split(separator: " ").dropFirst().first ?? "") ?? 0
        #expect(attempts >= 500, "the squatter must have polled through every restart: \(report)")
        let exits = holder.events.filter { $0.hasPrefix("exited ") }
        #expect(exits.count == restarts && exits.allSatisfy { $0.hasSuffix(" 0") }, "\(holder.events)")
        let log = daemon.log
        for text in ["WHIP listener on the inherited socket 'whip-http' (tcp 127.0.0.1:\(whipPort), socket activation)",
                     "media on the inherited socket 'whip-media' (udp 127.0.0.1:\(mediaPort), socket activation)"] {
            #expect(log.components(separatedBy: text).count - 1 == restarts + 1, "\(text)\n\(log.suffix(3000))")
        }
        try Self.expectFramesArrive(daemon, whipPort: whipPort)
        #expect(!daemon.log.contains(WebRTCIngestTests.token))
    }

    /// `media = "0.0.0.0:P"` held by the service manager: the adopted socket is asked for each datagram's
    /// destination, and checks of 127.0.0.2 and 127.0.0.3 are answered from there (WebRTCWildcardMediaTests' probe).
    @Test func anInheritedWildcardMediaSocketRepliesFromTheAddressReached() throws {
        let (daemon, whipPort, mediaPort) = try Self.daemon("holdwild", mediaHost: "0.0.0.0")
        let holder = try SocketHolder(daemon: daemon, sockets: ["whip-http=tcp:\(whipPort)", "whip-media=udp:0.0.0.0:\(mediaPort)"])
        try #require(holder.waitUntilServing(started: 1) != nil, "\(daemon.log.suffix(3000))")
        #expect(daemon.log.contains("media on the inherited socket 'whip-media' (udp 0.0.0.0:\(mediaPort), socket activation)"),
                "\(daemon.log.suffix(3000))")
        let response = try httpRequest(port: whipPort, method: "POST", path: "/whip/\(daemon.name)",
                                       headers: ["Content-Type": "application/sdp", "Authorization": "Bearer \(WebRTCIngestTests.token)"],
                                       body: WebRTCHostileTests.offer(ufrag: "inherit1"))
        try #require(response.status == 201, "\(response.body)\n\(daemon.log.suffix(2000))")
        let replies = try WebRTCWildcardMediaTests.probe(answer: response.body, ufrag: "inherit1", mediaPort: mediaPort,
                                                        addresses: ["127.0.0.2", "127.0.0.3"])
        #expect(replies == ["127.0.0.2:\(mediaPort)", "127.0.0.3:\(mediaPort)"], "\(daemon.log.suffix(2000))")
    }

    /// Without socket activation the daemon binds `[webrtc]` itself and serves; and the control for the test above:
    /// the same squatter, against the same restart, takes the ports in the gap and the new daemon cannot start.
    @Test func withoutInheritedSocketsTheDaemonBindsItselfAndTheSquatterWinsTheGap() throws {
        let (daemon, whipPort, mediaPort) = try Self.daemon("selfwhip")
        let holder = try SocketHolder(daemon: daemon, sockets: [])
        try #require(holder.waitUntilServing(started: 1) != nil, "\(daemon.log.suffix(3000))")
        #expect(daemon.log.contains("WHIP on http://127.0.0.1:\(whipPort)/whip/STREAM") && !daemon.log.contains("inherited socket"))
        try Self.expectFramesArrive(daemon, whipPort: whipPort)
        let user = try ThrowawayUser()
        let squatter = try PortSquatter(user: user, tcp: whipPort, udp: mediaPort, directory: daemon.directory)
        holder.restart()
        let second = try #require(SocketHolder.startedPID(holder, index: 2))
        #expect(holder.exitCode(of: second) == 1, "\(holder.events)\n\(daemon.log.suffix(2000))")
        let report = squatter.finish()
        #expect(report.contains("tcp") && report.contains("udp"), "\(squatter.output)")
        #expect(daemon.log.contains("WebRTC: cannot listen"), "\(daemon.log.suffix(2000))")
    }

    /// Inherited sockets that are not what `[webrtc]` says: refused before READY, each saying what it is.
    @Test(arguments: [
        ("whip-http=udp:WHIP", "the inherited socket 'whip-http' is a UDP socket bound to 127.0.0.1:WHIP; [webrtc] listen"),
        ("whip-media=tcp:MEDIA", "the inherited socket 'whip-media' is a listening TCP socket bound to 127.0.0.1:MEDIA; [webrtc] media"),
        ("whip-media=udp:OTHER", "the inherited socket 'whip-media' is a UDP socket bound to 127.0.0.1:OTHER; [webrtc] media = \"127.0.0.1:MEDIA\" needs a UDP socket"),
    ])
    func socketsThatDoNotFitAreRefused(spec: String, message: String) throws {
        let (daemon, whipPort, mediaPort) = try Self.daemon("misfit")
        let other = freePort()
        func fill(_ text: String) -> String {
            text.replacingOccurrences(of: "WHIP", with: "\(whipPort)").replacingOccurrences(of: "MEDIA", with: "\(mediaPort)")
                .replacingOccurrences(of: "OTHER", with: "\(other)")
        }
        let holder = try SocketHolder(daemon: daemon, sockets: [fill(spec)])
        let first = try #require(SocketHolder.startedPID(holder, index: 1))
        #expect(holder.exitCode(of: first) == 1, "\(holder.events)\n\(daemon.log.suffix(2000))")
        #expect(daemon.log.contains(fill(message)), "\(daemon.log.suffix(2000))")
    }

    /// The window systemd leaves: its UDP socket has SO_REUSEADDR until the daemon's first start clears it, so a
    /// user can bind the port beside it then. The daemon finds that socket and does not start (it would be given the
    /// media), naming the user.
    @Test func aUserWhoSharedTheMediaPortBeforeTheFirstStartIsFound() throws {
        let (daemon, whipPort, mediaPort) = try Self.daemon("early")
        let holder = try SocketHolder(daemon: daemon, sockets: ["whip-http=tcp:\(whipPort)", "whip-media=udp:\(mediaPort)"], waitForFirstStart: true)
        let deadline = Date().addingTimeInterval(10)
        while !holder.events.contains("holding") && Date() < deadline { usleep(10_000) }
        let user = try ThrowawayUser()
        let squatter = try PortSquatter(user: user, tcp: whipPort, udp: mediaPort, directory: daemon.directory)
        while !squatter.output.contains("bound udp") && Date() < deadline { usleep(10_000) }
        #expect(squatter.output.contains("bound udp") && !squatter.output.contains("bound tcp"), "\(squatter.output)")
        holder.restart()
        let first = try #require(SocketHolder.startedPID(holder, index: 1))
        #expect(holder.exitCode(of: first) == 1, "\(holder.events)\n\(daemon.log.suffix(2000))")
        #expect(daemon.log.contains("the inherited socket 'whip-media' shares its UDP port with uid \(user.uid)"), "\(daemon.log.suffix(2000))")
    }

    /// A reserved name never goes to a stream, even as the only listener of a one-stream daemon: without `[webrtc]`
    /// it is closed with a warning, and the stream binds its own address.
    @Test func aWebRTCSocketWithoutWebRTCIsClosedNotGivenToTheStream() throws {
        let daemon = try DaemonProcess(label: "nowebrtc", settings: ["max_width": "160", "max_height": "96"], start: false)
        let holder = try SocketHolder(daemon: daemon, sockets: ["whip-http=tcp:\(freePort())"])
        try #require(holder.waitUntilServing(started: 1) != nil, "\(daemon.log.suffix(3000))")
        #expect(daemon.log.contains("socket activation: listener 'whip-http' is for [webrtc], which this configuration does not have; closing that listener"),
                "\(daemon.log.suffix(2000))")
        try Sender(port: daemon.port).sendPaced(try generated("h264", frames: 5), pauseMicroseconds: 0)
        #expect(daemon.waitUntilPublished(5, timeout: 30))
    }
}

extension SocketHolder {
    /// The PID of the `index`th daemon started (1 is the first), once it has been.
    static func startedPID(_ holder: SocketHolder, index: Int, timeout: TimeInterval = 20) -> pid_t? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let started = holder.events.filter { $0.hasPrefix("started ") }
            if started.count >= index { return pid_t(started[index - 1].dropFirst(8)) }
            usleep(20_000)
        }
        return nil
    }
}
