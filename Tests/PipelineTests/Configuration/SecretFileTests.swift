import Foundation
import Glibc
@testable import Pipeline
import Testing

/// Secret files (a password, a bearer token): read whole with one line break trimmed, refused with a reason when
/// they cannot be a secret, and their exposure to every user warned about without repeating the secret.
struct SecretFileTests {
    static func file(_ bytes: [UInt8], mode: mode_t = 0o600) throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = folder + "/secret"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        chmod(path, mode)
        return path
    }

    static func message(_ result: Result<(text: String, mode: mode_t), SecretFile.Problem>) -> String? {
        if case .failure(let problem) = result { return problem.message }
        return nil
    }

    @Test(arguments: [("hunter2\n", "hunter2"), ("hunter2\r\n", "hunter2"), ("hunter2", "hunter2"), ("two\nlines\n", "two\nlines"),
                      ("keeps one\n\n", "keeps one\n")])
    func oneTrailingLineBreakIsTrimmed(content: String, expected: String) throws {
        let path = try Self.file(Array(content.utf8), mode: 0o640)
        guard case .success(let read) = SecretFile.read(path) else {
            Issue.record("\(content.debugDescription) was refused")
            return
        }
        #expect(read.text == expected)
        #expect(read.mode & 0o777 == 0o640)
    }

    @Test func whatCannotBeASecretIsRefusedWithItsReason() throws {
        #expect(Self.message(SecretFile.read(try Self.file([]))) == "empty")
        #expect(Self.message(SecretFile.read(try Self.file(Array("\n".utf8)))) == "empty")
        #expect(Self.message(SecretFile.read(try Self.file([0xff, 0xfe]))) == "not UTF-8 text")
        let large = try Self.file([UInt8](repeating: UInt8(ascii: "a"), count: SecretFile.maximumBytes + 1))
        #expect(Self.message(SecretFile.read(large)) == "larger than 4096 bytes: not a password")
        #expect(Self.message(SecretFile.read(try Self.file([UInt8](repeating: 0x61, count: SecretFile.maximumBytes)))) == nil)
        #expect(Self.message(SecretFile.read("/nonexistent/secret"))?.hasPrefix("cannot read: No such file") == true)
        #expect(Self.message(SecretFile.read(FileManager.default.temporaryDirectory.path)) == "not a regular file")
        // A FIFO planted under the name must not hang the daemon's start in open(2).
        let fifo = try Self.file([]) + ".fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(Self.message(SecretFile.read(fifo)) == "not a regular file")
    }

    @Test func exposureToEveryUserIsWarnedAboutWithoutTheSecret() throws {
        #expect(SecretFile.exposure(path: "/etc/x/token", mode: 0o640, what: "holds a token") == nil)
        #expect(SecretFile.exposure(path: "/etc/x/token", mode: 0o600, what: "holds a token") == nil)
        let warning = SecretFile.exposure(path: "/etc/x/token", mode: S_IFREG | 0o644, what: "holds a token")
        #expect(warning == "/etc/x/token holds a token and is readable by every user (mode 0644): chmod o-rwx /etc/x/token (the package installs 0640 root:streamrecv)")
    }
}
