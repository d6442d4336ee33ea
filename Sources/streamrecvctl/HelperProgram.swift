import ArgumentParser
import Glibc

/// A small C program that does a command's work (`streamrecv-camera`, `streamrecv-view`), so that streamrecvctl
/// itself needs neither libpipewire nor SDL and OpenGL on machines without a desktop (servers, the tarball's clean
/// roots). The command finds it and replaces itself with it.
struct HelperProgram {
    /// Its file name, and where it comes from ("the streamrecvd-camera package, or `make camera`").
    let name: String
    let source: String
    /// Where a source tree builds it, under .build.
    let buildDirectory: String

    /// Beside this executable (a tarball's bin/), in ../lib/streamrecvd (the package's /usr/lib/streamrecvd),
    /// or a source tree's .build/DIRECTORY (this executable is .build/TRIPLE/debug/streamrecvctl once the
    /// .build/debug link is resolved).
    func candidates() -> [String] {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return [] }
        let executable = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let directory = executable.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        return ["\(directory)/\(name)", "\(directory)/../lib/streamrecvd/\(name)", "\(directory)/../../\(buildDirectory)/\(name)"]
    }

    func path() -> String? { candidates().first { access($0, X_OK) == 0 } }

    /// Runs it in place of this process with `arguments`; returns only by throwing (exit status 1, said).
    func exec(_ arguments: [String]) throws -> Never {
        guard let helper = path() else {
            printError("streamrecvctl: \(name) is not installed (looked in \(candidates().joined(separator: ", "))): it comes with \(source)")
            throw ExitCode(1)
        }
        let pointers = ([helper] + arguments).map { strdup($0) } + [nil]
        execv(helper, pointers)
        printError("streamrecvctl: cannot run \(helper): \(String(cString: strerror(errno)))")
        throw ExitCode(1)
    }
}
