import Glibc

/// A file that holds a secret (`rtsp_password_file`), or a configuration that does: read whole, and checked for
/// being readable by users other than the daemon's.
enum SecretFile {
    struct Problem: Error {
        let message: String
    }

    /// The largest secret file read: a password, not a document.
    static let maximumBytes = 4096

    /// The file's text without one trailing line break, and its mode.
    static func read(_ path: String) -> Result<(text: String, mode: mode_t), Problem> {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard descriptor >= 0 else { return .failure(Problem(message: "cannot read: \(String(cString: strerror(errno)))")) }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            return .failure(Problem(message: "not a regular file"))
        }
        guard status.st_size <= maximumBytes else { return .failure(Problem(message: "larger than \(maximumBytes) bytes: not a password")) }
        var bytes = [UInt8](repeating: 0, count: maximumBytes + 1)
        var count = 0
        while count < bytes.count {
            let got = bytes.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress! + count, $0.count - count) }
            if got < 0 && errno == EINTR { continue }
            guard got >= 0 else { return .failure(Problem(message: "cannot read: \(String(cString: strerror(errno)))")) }
            if got == 0 { break }
            count += got
        }
        guard count <= maximumBytes else { return .failure(Problem(message: "larger than \(maximumBytes) bytes: not a password")) }
        var text = bytes[..<count]
        if text.last == UInt8(ascii: "\n") { text = text.dropLast() }
        if text.last == UInt8(ascii: "\r") { text = text.dropLast() }
        guard let string = String(validating: text, as: UTF8.self) else { return .failure(Problem(message: "not UTF-8 text")) }
        guard !string.isEmpty else { return .failure(Problem(message: "empty")) }
        return .success((string, status.st_mode))
    }

    /// A warning when a file with secrets is readable by every user; nil when it is not.
    static func exposure(path: String, mode: mode_t, what: String) -> String? {
        guard mode & S_IROTH != 0 else { return nil }
        let octal = String(mode & 0o777, radix: 8)
        return "\(path) \(what) and is readable by every user (mode 0\(octal)): chmod o-rwx \(path) (the package installs 0640 root:streamrecv)"
    }
}
