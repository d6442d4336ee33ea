import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// Anonymous resident memory of a process in kB (the heap: not the rings, which are shared memory).
func anonymousKilobytes(_ pid: pid_t) -> Int {
    let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("RssAnon:") } ?? ""
    return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? -1
}

/// What a stream holds while no one sends: its ring and little else. A decoder keeps its frames (about 25 MB at
/// 1080p) after its sender leaves, so that a sender back at once costs no recreation; `decoder_linger` later it is
/// closed and the heap it freed goes back to the system.
@Suite(.serialized) struct IdleMemoryTests {
    @Test func aDecoderWithoutASenderIsClosedAndItsMemoryReturned() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let url = try GeneratedStreams.encode(codec: "h264", size: "1920x1080", frames: 30,
                                              encoderParameters: "keyint=30:bframes=3:ref=4", in: directory, name: "m.h264")
        let daemon = try DaemonProcess(label: "linger", settings: [
            "max_width": "1920", "max_height": "1080", "decoder_linger": "3", "idle_timeout": "2",
        ])
        let pid = try #require(daemon.pid)
        let before = anonymousKilobytes(pid)
        try runChecked(tool("streamrecvctl"), ["send", url.path, "tcp://127.0.0.1:\(daemon.port)"])
        #expect(daemon.waitUntilPublished(30))
        let held = anonymousKilobytes(pid)
        let deadline = Date().addingTimeInterval(15)
        while !daemon.log.contains("decoder closed after") && Date() < deadline { usleep(100_000) }
        usleep(200_000)
        let after = anonymousKilobytes(pid)
        #expect(daemon.log.contains("decoder closed after 3.0 s without a sender (decoder_linger)"), "\(daemon.log.suffix(1500))")
        #expect(held - before >= 15_000, "a 1080p decoder holds its frames: \(before) → \(held) kB")
        #expect(after - before <= 8_000, "closed after decoder_linger, its memory returned: \(before) → \(held) → \(after) kB")

        // The next sender opens a new decoder: every frame again, no error.
        try runChecked(tool("streamrecvctl"), ["send", url.path, "tcp://127.0.0.1:\(daemon.port)"])
        #expect(daemon.waitUntilPublished(60))
        #expect(daemon.status?.counters.decodeErrors == 0)
        #expect(daemon.stop() == 0)
    }
}
