import Foundation
import Glibc
import Testing

/// The `openssl` command, for what the module does not expose and a test must not compute itself: a certificate's
/// fields and digest, PEM files for HTTPS, and a real client (`s_client`) on the other end of a socket.
enum OpenSSLTool {
    struct Output {
        let status: Int32
        let standardOutput: String
        let standardError: String
    }

    /// A command started but not yet waited for, so the test can be its peer meanwhile.
    final class Running {
        private let process = Process()
        private let output = Pipe()
        private let errors = Pipe()

        init(_ arguments: [String], input: [UInt8]) throws {
            let standardInput = Pipe()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            // A client that waits for a peer that never answers must not hang the test run.
            process.arguments = ["timeout", "-s", "KILL", "20", "openssl"] + arguments
            process.standardInput = standardInput
            process.standardOutput = output
            process.standardError = errors
            try process.run()
            standardInput.fileHandleForWriting.write(Data(input))  // small: fits the pipe
            try standardInput.fileHandleForWriting.close()
        }

        /// Waits for the command to exit; its output is small enough that the pipes never filled meanwhile.
        func finish() -> Output {
            let out = output.fileHandleForReading.readDataToEndOfFile()
            let err = errors.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return Output(
                status: process.terminationStatus, standardOutput: String(decoding: out, as: UTF8.self),
                standardError: String(decoding: err, as: UTF8.self))
        }
    }

    static func run(_ arguments: [String], input: [UInt8] = []) throws -> Output {
        try Running(arguments, input: input).finish()
    }

    /// Runs a command that must succeed; its standard output.
    static func checked(_ arguments: [String], input: [UInt8] = []) throws -> String {
        let result = try run(arguments, input: input)
        try #require(result.status == 0, "openssl \(arguments.joined(separator: " ")): \(result.standardError)")
        return result.standardOutput
    }

    /// A self-signed ECDSA P-256 certificate and its unencrypted key, as PEM files in `directory`.
    static func makeCertificate(
        in directory: TemporaryDirectory, name: String = "server", commonName: String = "localhost",
        subjectAltName: String? = "DNS:localhost,IP:127.0.0.1", days: Int = 30, keyPassword: String? = nil
    ) throws -> (certificate: String, key: String) {
        let certificate = directory.path(name + ".pem")
        let key = directory.path(name + ".key")
        let encryption = keyPassword.map { ["-passout", "pass:\($0)"] } ?? ["-nodes"]
        _ = try checked(
            ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"] + encryption
                + ["-keyout", key, "-out", certificate, "-days", String(days), "-subj", "/CN=\(commonName)"]
                + (subjectAltName.map { ["-addext", "subjectAltName=\($0)"] } ?? []))
        return (certificate, key)
    }

    /// The value of `openssl x509 -fingerprint -sha256`: "AB:CD:…", as OpenSSL itself prints it.
    static func sha256FingerprintText(certificate: String, inform: String = "PEM") throws -> String {
        let line = try checked(["x509", "-inform", inform, "-in", certificate, "-noout", "-fingerprint", "-sha256"])
        let value = try #require(line.split(separator: "=", maxSplits: 1).last)
        return value.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `fingerprintText` back to bytes.
    static func bytes(ofFingerprint text: String) -> [UInt8] {
        text.split(separator: ":").compactMap { UInt8($0, radix: 16) }
    }
}

/// A fresh directory under /tmp, removed with everything in it when the value goes.
final class TemporaryDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("mediasecurity-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    func write(_ bytes: [UInt8], to name: String) throws -> String {
        let path = path(name)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }
}

/// Waits up to `seconds` for `descriptor` to be readable (a datagram, bytes, a connection, or end of file).
func waitReadable(_ descriptor: Int32, seconds: Double) -> Bool {
    var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
    return poll(&entry, 1, Int32(seconds * 1000)) == 1
}

/// Writes all of `bytes` to a stream socket, which may take them in parts. MSG_NOSIGNAL: a peer that closed first
/// (s_client does once its input ends) must fail the write, not kill the whole test process with SIGPIPE.
func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Bool {
    var offset = 0
    while offset < bytes.count {
        let written = bytes[offset...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if written <= 0 { return false }
        offset += written
    }
    return true
}
