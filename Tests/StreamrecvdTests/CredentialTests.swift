import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// Credentials in the forms cameras take them (XMEye paths, `pw=` and `token=` queries, `;password=` path
/// parameters) stay out of --check-config's output, the log and STATUS; a password kept in its own file works
/// against a real Digest camera; a configuration file with secrets that every user can read is warned about.
@Suite(.serialized) struct CredentialTests {
    static let secrets = ["XMEYE-SECRET", "QUERY-SECRET", "TOKEN-SECRET", "PATHPARAM-SECRET", "SRT-PASSPHRASE-SECRET"]

    static func configuration(refusedPort: Int, srtPort: Int) -> String {
        """
        [daemon]
        log_level = "debug"

        [[stream]]
        name = "xmeye\(getpid())"
        source = "rtsp://127.0.0.1:\(refusedPort)/user=admin_password=XMEYE-SECRET_channel=1_stream=0.sdp"
        hwaccel = "none"

        [[stream]]
        name = "query\(getpid())"
        source = "rtsp://127.0.0.1:\(refusedPort)/live;password=PATHPARAM-SECRET/ch1?pw=QUERY-SECRET&token=TOKEN-SECRET"
        hwaccel = "none"

        [[stream]]
        name = "srt\(getpid())"
        listen = "srt://127.0.0.1:\(srtPort)"
        passphrase = "SRT-PASSPHRASE-SECRET"
        hwaccel = "none"
        """
    }

    @Test func credentialsInCameraURLsAreNeverPrinted() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let path = directory.appendingPathComponent("cameras.toml").path
        try Self.configuration(refusedPort: freePort(), srtPort: freePort()).write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o644)
        let check = try runProcess(tool("streamrecvd"), ["--check-config", path])
        let output = check.text + check.standardError
        #expect(check.status == 0, "\(output)")
        #expect(output.contains("user=***_password=***_channel=1_stream=0.sdp") && output.contains("pw=***&token=***")
                && output.contains(";password=***/"), "\(output)")
        #expect(output.contains("warning: \(path) holds passwords or passphrases and is readable by every user"), "\(output)")
        for secret in Self.secrets { #expect(!output.contains(secret), "\(secret) printed: \(output)") }

        // The daemon says the same at start, and its retries against a refused port print no secret either.
        let notify = try NotifyListener(directory: directory)
        let log = directory.appendingPathComponent("daemon.log").path
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: tool("streamrecvd"))
        daemon.arguments = ["--config", path]
        daemon.environment = ProcessInfo.processInfo.environment.merging(["NOTIFY_SOCKET": notify.path]) { $1 }
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        daemon.standardOutput = handle
        daemon.standardError = handle
        try daemon.run()
        defer {
            if daemon.isRunning { daemon.terminate() }
            daemon.waitUntilExit()
            for name in ["xmeye", "query", "srt"] { shm_unlink("/streamrecv-\(name)\(getpid())") }
        }
        let statusLines = notify.receive(until: { $0.contains("attempt 3") }, seconds: 15).joined(separator: "\n")
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(text.contains("holds passwords or passphrases and is readable by every user"), "\(text.suffix(2000))")
        #expect(text.contains("user=***_password=***"), "\(text.suffix(2000))")
        for secret in Self.secrets {
            #expect(!text.contains(secret), "\(secret) in the log")
            #expect(!statusLines.contains(secret), "\(secret) in STATUS=")
        }
        #expect(daemon.isRunning)
    }

    /// `rtsp_user` and `rtsp_password_file` instead of a password in the URL: the Digest camera lets the daemon in,
    /// and the password is nowhere in what the daemon prints.
    @Test func aPasswordInItsOwnFileAuthenticates() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        let clip = try RTSPPullTests.clip(codec: "h264", in: directory)
        let camera = try RTSPCamera(clip: clip, codec: "h264", user: "viewer", password: RTSPPullTests.password, directory: directory)
        let passwordPath = directory.appendingPathComponent("camera.password").path
        try (RTSPPullTests.password + "\n").write(toFile: passwordPath, atomically: true, encoding: .utf8)
        chmod(passwordPath, 0o600)
        let daemon = try RTSPPullTests.daemon("rtsppwfile", source: camera.url, transport: "tcp",
                                              ["rtsp_user": "\"viewer\"", "rtsp_password_file": "\"\(passwordPath)\""])
        let deadline = Date().addingTimeInterval(30)
        while (daemon.status?.counters.framesPublished ?? 0) < 20 && Date() < deadline { usleep(20_000) }
        #expect((daemon.status?.counters.framesPublished ?? 0) >= 20, "\(daemon.log.suffix(2000))")
        #expect(!daemon.log.contains(RTSPPullTests.password) && !daemon.log.contains("readable by every user"))
        let check = try runProcess(tool("streamrecvd"), ["--check-config", daemon.configPath])
        #expect(check.status == 0 && !(check.text + check.standardError).contains(RTSPPullTests.password))
        #expect(daemon.isRunning)
    }
}
