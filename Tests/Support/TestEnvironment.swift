import Foundation

/// Paths and external tools the tests use: the conformance corpus beside the repository and FFmpeg.
public enum TestEnvironment {
    /// The repository root, found from this file's location.
    public static let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `../shared/corpus/h264-conformance` beside the repository, when it exists.
    public static let h264Corpus: URL? = {
        let url = repositoryRoot.deletingLastPathComponent()
            .appendingPathComponent("shared/corpus/h264-conformance")
        guard FileManager.default.fileExists(atPath: url.path) else {
            FileHandle.standardError.write(Data("""
                \n*** WARNING: ../shared/corpus/h264-conformance not found at \(url.path):
                *** the conformance-corpus tests are SKIPPED. Only generated streams are tested.\n\n
                """.utf8))
            return nil
        }
        return url
    }()

    public static var hasCorpus: Bool { h264Corpus != nil }

    /// Every corpus stream, sorted by name.
    public static func corpusFiles() -> [URL] {
        guard let corpus = h264Corpus,
              let names = try? FileManager.default.contentsOfDirectory(atPath: corpus.path) else { return [] }
        return names.filter { !$0.hasPrefix(".") && $0 != "README.md" }.sorted().map { corpus.appendingPathComponent($0) }
    }

    public static func corpusFile(_ name: String) -> URL? {
        h264Corpus?.appendingPathComponent(name)
    }

    /// Directory holding the products of this build (the test bundle sits beside them).
    public static let productsDirectory: URL = {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var directory = executable.deletingLastPathComponent()
        while directory.path != "/" {
            if FileManager.default.fileExists(atPath: directory.appendingPathComponent("streamrecvctl").path) {
                return directory
            }
            directory = directory.deletingLastPathComponent()
        }
        return executable.deletingLastPathComponent()
    }()

    /// A fresh temporary directory for one test, inside `temporaryRoot`.
    public static func temporaryDirectory() throws -> URL {
        let url = temporaryRoot.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// One folder per test process for everything the tests write (clips of up to 400 MB, rings' logs, compiled
    /// examples), removed when the process exits; what a killed or crashed run left is removed by the next one.
    /// Without it each `make test` left gigabytes in /tmp.
    public static let temporaryRoot: URL = {
        let base = FileManager.default.temporaryDirectory
        for name in (try? FileManager.default.contentsOfDirectory(atPath: base.path)) ?? []
        where name.hasPrefix(temporaryRootPrefix) {
            guard let owner = pid_t(name.dropFirst(temporaryRootPrefix.count)),
                  kill(owner, 0) != 0 && errno == ESRCH else { continue }
            try? FileManager.default.removeItem(at: base.appendingPathComponent(name))
        }
        let root = base.appendingPathComponent(temporaryRootPrefix + String(getpid()))
        try? FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        atexit {
            let root = FileManager.default.temporaryDirectory.appendingPathComponent(
                TestEnvironment.temporaryRootPrefix + String(getpid()))
            try? FileManager.default.removeItem(at: root)
        }
        return root
    }()

    static let temporaryRootPrefix = "streamrecv-tests."
}

public struct ProcessResult: Sendable {
    public var status: Int32
    public var standardOutput: Data
    public var standardError: String
    public var text: String { String(decoding: standardOutput, as: UTF8.self) }
}

public enum ProcessError: Error, CustomStringConvertible {
    case failed(command: String, status: Int32, standardError: String)
    public var description: String {
        switch self {
        case .failed(let command, let status, let standardError):
            return "\(command) exited \(status): \(standardError)"
        }
    }
}

/// Runs a program to completion, feeding `input` on standard input. Standard input, output and error go through
/// temporary files, not pipes: nothing can fill up, and no helper thread is needed to drain them (a pipe drained by
/// a Dispatch worker deadlocked when the pool had no thread to spare).
public func runProcess(_ executable: String, _ arguments: [String], input: Data? = nil) throws -> ProcessResult {
    let directory = try TestEnvironment.temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let outputURL = directory.appendingPathComponent("stdout")
    let errorURL = directory.appendingPathComponent("stderr")
    _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
    _ = FileManager.default.createFile(atPath: errorURL.path, contents: nil)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable.hasPrefix("/") ? executable : "/usr/bin/env")
    process.arguments = executable.hasPrefix("/") ? arguments : [executable] + arguments
    let output = try FileHandle(forWritingTo: outputURL)
    let error = try FileHandle(forWritingTo: errorURL)
    defer {
        try? output.close()
        try? error.close()
    }
    process.standardOutput = output
    process.standardError = error
    if let input {
        let inputURL = directory.appendingPathComponent("stdin")
        try input.write(to: inputURL)
        process.standardInput = try FileHandle(forReadingFrom: inputURL)
    } else {
        process.standardInput = FileHandle.nullDevice
    }
    try process.run()
    process.waitUntilExit()
    return ProcessResult(
        status: process.terminationStatus, standardOutput: try Data(contentsOf: outputURL),
        standardError: String(decoding: try Data(contentsOf: errorURL), as: UTF8.self))
}

/// Runs a program and throws unless it exits 0.
@discardableResult
public func runChecked(_ executable: String, _ arguments: [String], input: Data? = nil) throws -> ProcessResult {
    let result = try runProcess(executable, arguments, input: input)
    guard result.status == 0 else {
        throw ProcessError.failed(
            command: ([executable] + arguments).joined(separator: " "), status: result.status,
            standardError: result.standardError)
    }
    return result
}
