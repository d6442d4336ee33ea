import Foundation
import Glibc
import StreamrecvTestSupport
import Testing

/// A flood of SRT callers with the wrong passphrase (scripts/srt-caller-flood.py: real libsrt callers, 8 at a time,
/// from 8 loopback addresses): the daemon's memory stays bounded while it lasts and comes back afterwards, and a
/// caller with the right passphrase still streams every frame bit-exact. Before, libsrt's megabyte per refused
/// socket piled up (467 MB during 1200 callers) and glibc kept it for ever (223 MB after 2480).
@Suite(.serialized) struct SRTFloodTests {
    static let sources = (2...9).map { "127.0.0.\($0)" }.joined(separator: ",")

    /// Runs the flood; samples the daemon's resident memory while it lasts. Returns the peak (kB) and its summary.
    static func flood(_ daemon: DaemonProcess, callers: Int) throws -> (peak: Int, summary: String) {
        let process = Process()
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [TestEnvironment.repositoryRoot.appendingPathComponent("scripts/srt-caller-flood.py").path,
                             "127.0.0.1", String(daemon.port), "--callers", String(callers), "--parallel", "8",
                             "--passphrase", "not-the-right-passphrase", "--sources", sources]
        process.standardOutput = output
        process.standardError = output
        try process.run()
        var peak = 0
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning && Date() < deadline {
            peak = max(peak, residentKilobytes(daemon.pid ?? 0))
            usleep(100_000)
        }
        if process.isRunning { process.terminate() }
        let summary = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (peak, summary)
    }

    /// Resident memory once it is back within `bound` kB of `baseline` (freed memory goes back a few seconds after
    /// the last refusal), or what it still is after 20 s.
    static func settledResident(_ pid: pid_t, baseline: Int, bound: Int) -> Int {
        let deadline = Date().addingTimeInterval(20)
        var resident = residentKilobytes(pid)
        while resident > baseline + bound && Date() < deadline {
            usleep(200_000)
            resident = residentKilobytes(pid)
        }
        return resident
    }

    @Test func aFloodOfRefusedCallersLeavesMemoryBoundedAndTheStreamWorking() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let clip = try SRTIngestTests.clip(codec: "h264", in: directory)
        let metricsPort = freePort()
        let daemon = try SRTIngestTests.daemon("srtflood", metricsPort: metricsPort)
        let pid = try #require(daemon.pid)
        // Warm-up: libsrt's and the allocator's first allocations, the log's first lines.
        _ = try Self.flood(daemon, callers: 60)
        usleep(4_500_000)
        let before = residentKilobytes(pid)
        let (peak, summary) = try Self.flood(daemon, callers: 600)
        let after = Self.settledResident(pid, baseline: before, bound: 20 * 1024)
        #expect(after <= before + 20 * 1024, "RSS \(before) kB before the flood, \(after) kB after (\(summary))")
        // While it lasts: a few dozen sockets' worth, not one per caller.
        #expect(peak <= before + 100 * 1024, "RSS \(before) kB before the flood, \(peak) kB at its peak (\(summary))")
        #expect(daemon.isRunning)
        let body = try httpGet(port: metricsPort, path: "/metrics").body
        let labels = "stream=\"\(daemon.name)\",reason="
        #expect((sample(body, "streamrecvd_refused_total", labels + "\"passphrase\"") ?? 0) > 0)
        #expect((sample(body, "streamrecvd_refused_total", labels + "\"rate_limited\"") ?? 0) > 0)
        let log = daemon.log
        #expect(log.contains("SRT caller refused: wrong passphrase (remote"))
        #expect(log.contains("callers were refused in the last 3 s, and this source is one of them"), "\(log.suffix(2000))")
        // A caller with the right passphrase, from an address the flood did not use.
        try SRTIngestTests.expectBitExact(clip, through: daemon, directory: directory)
        #expect(daemon.isRunning)
    }
}
