import ArgumentParser
import Foundation
import Glibc
import StreamrecvTestSupport
@testable import streamrecvctl
import Testing

/// The directory of this test process's executable, found through Foundation rather than readlink(2).
private let executableDirectory: String = {
    let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
    return (target as NSString).deletingLastPathComponent
}()

private func uniqueHelperName() -> String { "streamrecv-helpertest-\(getpid())-\(UInt32.random(in: 0...UInt32.max))" }

/// A `buildDirectory` that leads from the executable's ../.. to `absolute` (the lookup joins them as a path).
private func buildDirectory(reaching absolute: String) -> String {
    let base = URL(fileURLWithPath: executableDirectory).deletingLastPathComponent().deletingLastPathComponent().path
    let depth = base.split(separator: "/").count
    return String(repeating: "../", count: depth) + absolute.dropFirst()
}

/// Creates a file of `mode` at `path`.
private func place(_ path: String, mode: mode_t) throws {
    let descriptor = open(path, O_CREAT | O_EXCL | O_WRONLY, mode)
    try #require(descriptor >= 0, "cannot create \(path): \(String(cString: strerror(errno)))")
    close(descriptor)
    try #require(chmod(path, mode) == 0)  // past the umask
}

@Suite(.serialized) struct HelperProgramTests {
    /// In order: beside the executable (a tarball's bin/), the package's lib/streamrecvd, a source tree's build.
    @Test func itIsLookedForBesideTheExecutableThenInLibThenInTheBuildDirectory() throws {
        try #require(!executableDirectory.isEmpty)
        let helper = HelperProgram(name: "streamrecv-x", source: "tests", buildDirectory: "xdir")
        #expect(helper.candidates() == [
            executableDirectory + "/streamrecv-x",
            executableDirectory + "/../lib/streamrecvd/streamrecv-x",
            executableDirectory + "/../../xdir/streamrecv-x",
        ])
    }

    /// Built by `make camera` / `make viewer`, the helpers lie in .build/pipewire and .build/viewer: from
    /// .build/TRIPLE/debug, the third candidate must lead exactly there.
    @Test(.enabled(if: executableDirectory.hasPrefix(TestEnvironment.repositoryRoot.path + "/.build/"), "built outside .build"))
    func theCommandsHelpersAreFoundInTheSourceTreesBuild() {
        let build = TestEnvironment.repositoryRoot.appendingPathComponent(".build").path
        for (helper, directory) in [(CameraCommand.helper, "pipewire"), (ViewCommand.helper, "viewer")] {
            let resolved = URL(fileURLWithPath: helper.candidates()[2]).standardizedFileURL.path
            #expect(resolved == "\(build)/\(directory)/\(helper.name)")
        }
    }

    @Test func nothingIsFoundWhenNoCandidateExists() {
        let helper = HelperProgram(name: uniqueHelperName(), source: "tests", buildDirectory: "nowhere")
        #expect(helper.path() == nil)
    }

    /// Missing, it says so and exits with status 1; it must not replace the test process.
    @Test func runningAMissingHelperFailsWithStatusOne() {
        let helper = HelperProgram(name: uniqueHelperName(), source: "tests", buildDirectory: "nowhere")
        #expect(throws: ExitCode(1)) { try helper.exec(["--help"]) }
    }

    @Test func anExecutableInTheBuildDirectoryIsFound() throws {
        let directory = try TestEnvironment.temporaryDirectory().path
        let name = uniqueHelperName()
        let helper = HelperProgram(name: name, source: "tests", buildDirectory: buildDirectory(reaching: directory))
        try place(directory + "/" + name, mode: 0o755)
        defer { unlink(directory + "/" + name) }
        let found = try #require(helper.path())
        #expect(URL(fileURLWithPath: found).standardizedFileURL.path == directory + "/" + name)
        #expect(found == helper.candidates()[2])
    }

    /// A file there that may not be run (a half-copied install, a stray download) is passed over.
    @Test func aFileThatIsNotExecutableIsPassedOver() throws {
        let directory = try TestEnvironment.temporaryDirectory().path
        let name = uniqueHelperName()
        let helper = HelperProgram(name: name, source: "tests", buildDirectory: buildDirectory(reaching: directory))
        try place(directory + "/" + name, mode: 0o644)
        defer { unlink(directory + "/" + name) }
        // root may execute any file with an execute bit; with none, access(X_OK) fails for root too.
        #expect(helper.path() == nil)
        chmod(directory + "/" + name, 0o755)
        #expect(helper.path() != nil)
    }

    /// An installed helper beside the executable is preferred to one in a source tree's build.
    @Test func theOneBesideTheExecutableWins() throws {
        let directory = try TestEnvironment.temporaryDirectory().path
        let name = uniqueHelperName()
        let helper = HelperProgram(name: name, source: "tests", buildDirectory: buildDirectory(reaching: directory))
        try place(directory + "/" + name, mode: 0o755)
        defer { unlink(directory + "/" + name) }
        let beside = executableDirectory + "/" + name
        try place(beside, mode: 0o755)
        defer { unlink(beside) }
        #expect(helper.path() == beside)
    }
}
