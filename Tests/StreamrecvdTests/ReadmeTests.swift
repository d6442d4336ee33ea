import Foundation
import Glibc
import SharedFrames
import StreamrecvTestSupport
import Testing

/// What the README promises a newcomer, run as written, and `make install` into a temporary DESTDIR.
@Suite(.serialized) struct ReadmeTests {
    /// The README's newcomer block, command by command (the indented lines after "The newcomer's path").
    static func newcomerCommands() throws -> [String] {
        let readme = try String(contentsOf: TestEnvironment.repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false)
        guard let intro = lines.firstIndex(where: { $0.contains("The newcomer's path") }),
              let first = lines[intro...].firstIndex(where: { $0.hasPrefix("    ") }) else { return [] }
        return lines[first...].prefix { $0.hasPrefix("    ") }.map { String($0.dropFirst(4)) }
    }

    /// `make run`, then the block: a clip made with ffmpeg, `send --loop` to the daemon on the default
    /// configuration, `cat` into ffplay (here: into FFmpeg's framemd5). The 300 frames must be 300 consecutive
    /// frames of the looping clip, each identical to FFmpeg's decode of the MP4.
    @Test func theNewcomersPathWorksAsWritten() throws {
        let commands = try Self.newcomerCommands()
        #expect(commands.count == 4, "\(commands)")
        let script = commands.joined(separator: "\n")
            .replacingOccurrences(of: ".build/release/", with: TestEnvironment.productsDirectory.path + "/")
            .replacingOccurrences(of: "ffplay -f yuv4mpegpipe -", with: "ffmpeg -v error -f yuv4mpegpipe -i - -f framemd5 - > seen.md5")
            // Children of the test runner inherit its blocked SIGTERM, so the block's `kill %1` would not stop the
            // sender here (it does in a terminal).
            .replacingOccurrences(of: "kill %1", with: "kill -KILL %1")
        #expect(script.contains("-f framemd5 - > seen.md5"), "the README block pipes cat into ffplay")

        // `make run` minus the build: the daemon on the shipped default configuration.
        let config = TestEnvironment.repositoryRoot.appendingPathComponent("etc/streamrecvd/streamrecvd.toml").path
        let directory = try TestEnvironment.temporaryDirectory()
        let log = directory.appendingPathComponent("daemon.log").path
        let daemon = try spawn(tool("streamrecvd"), ["--config", config], log: log)
        defer {
            kill(daemon, SIGTERM)
            var status: Int32 = 0
            waitpid(daemon, &status, 0)
        }
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if let ring = try? FrameRingReader(shmName: "streamrecv-desk"), ring.status.writerPID == UInt32(daemon),
               ring.status.state == .waiting { break }
            usleep(50_000)
        }
        // A time limit, so that a broken chain fails the test instead of leaving `cat` waiting.
        let run = try runProcess("/usr/bin/timeout", ["120", "/bin/bash", "-c", "set -e\ncd '\(directory.path)'\n" + script])
        #expect(run.status == 0, "\(run.standardError)\n\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")

        let reference = try ffmpegMD5s(directory.appendingPathComponent("clip.mp4").path)
        #expect(reference.count == 300)
        let seenText = try String(contentsOf: directory.appendingPathComponent("seen.md5"), encoding: .utf8)
        let seen = seenText.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap {
            $0.split(separator: ",").last.map { $0.trimmingCharacters(in: .whitespaces) }
        }
        #expect(seen.count == 300)
        let positions = seen.map { reference.firstIndex(of: $0) }
        #expect(positions.allSatisfy { $0 != nil }, "every frame is one of the clip's frames")
        // Consecutive, except where `cat` (a debug build here, on a loaded machine) says it was lapped.
        let breaks = zip(positions, positions.dropFirst()).filter { $0.1 != (($0.0 ?? -2) + 1) % reference.count }.count
        let lapped = run.standardError.split(separator: "\n").filter { $0.contains("lapped:") }.count
        #expect(breaks <= lapped, "\(breaks) breaks in the sequence of frames, \(lapped) reported: \(run.standardError)")
    }

    @Test func makeInstallIntoADestdir() throws {
        let destdir = try TestEnvironment.temporaryDirectory().path
        let root = TestEnvironment.repositoryRoot.path
        try runChecked("/usr/bin/make", ["-C", root, "install", "NO_BUILD=1", "CONFIGURATION=debug", "PREFIX=/usr", "DESTDIR=\(destdir)"])
        let expected = [
            "usr/bin/streamrecvd", "usr/bin/streamrecvctl", "usr/lib/systemd/system/streamrecvd.service",
            "usr/lib/systemd/system/streamrecvd@.service", "usr/lib/systemd/system/streamrecvd.socket",
            "usr/lib/systemd/system/streamrecvd-whip.socket", "usr/lib/systemd/system/streamrecvd-whip-media.socket",
            "usr/lib/sysusers.d/streamrecvd.conf", "etc/streamrecvd/streamrecvd.toml", "usr/include/streamrecv_shm.h",
            "usr/share/man/man1/streamrecvctl.1", "usr/share/man/man5/streamrecvd.toml.5", "usr/share/man/man8/streamrecvd.8",
            "usr/lib/python3/dist-packages/streamrecv/__init__.py", "usr/share/doc/streamrecvd/examples/consumer.c",
            "usr/lib/streamrecvd/streamrecv-camera", "usr/lib/systemd/user/streamrecv-camera@.service", "usr/lib/streamrecvd/streamrecv-view",
            "usr/lib/\(try runChecked("gcc", ["-print-multiarch"]).text.trimmingCharacters(in: .whitespacesAndNewlines))"
                + "/gstreamer-1.0/libgststreamrecv.so",
        ]
        for path in expected { #expect(FileManager.default.fileExists(atPath: destdir + "/" + path), "\(path)") }
        // The configuration may hold secrets: never readable by every user.
        let mode = try FileManager.default.attributesOfItem(atPath: destdir + "/etc/streamrecvd/streamrecvd.toml")[.posixPermissions] as? Int
        #expect(mode == 0o640, "installed with mode \(String(mode ?? 0, radix: 8))")
        let check = try runChecked(destdir + "/usr/bin/streamrecvd", ["--check-config", destdir + "/etc/streamrecvd/streamrecvd.toml"])
        #expect(check.text.contains("ok, 1 stream(s)"))
        // The installed header is all the installed C example needs; the installed Python module imports.
        try runChecked("cc", ["-std=c11", "-Wall", "-Werror", "-I", destdir + "/usr/include",
                              destdir + "/usr/share/doc/streamrecvd/examples/consumer.c", "-o", destdir + "/consumer"])
        try runChecked("/usr/bin/python3", ["-c", "import sys; sys.path.insert(0, '\(destdir)/usr/lib/python3/dist-packages'); import streamrecv"])
        for page in ["man1/streamrecvctl.1", "man5/streamrecvd.toml.5", "man8/streamrecvd.8"] {
            let rendered = try runProcess("/usr/bin/man", ["--warnings", "-l", "-E", "UTF-8", destdir + "/usr/share/man/" + page])
            #expect(rendered.status == 0 && rendered.standardError.isEmpty && rendered.text.contains("DESCRIPTION"), "\(page): \(rendered.standardError)")
        }
        // A second install keeps an operator's configuration.
        try "# edited\n".write(toFile: destdir + "/etc/streamrecvd/streamrecvd.toml", atomically: true, encoding: .utf8)
        try runChecked("/usr/bin/make", ["-C", root, "install", "NO_BUILD=1", "CONFIGURATION=debug", "PREFIX=/usr", "DESTDIR=\(destdir)"])
        #expect(try String(contentsOfFile: destdir + "/etc/streamrecvd/streamrecvd.toml", encoding: .utf8) == "# edited\n")
    }
}
