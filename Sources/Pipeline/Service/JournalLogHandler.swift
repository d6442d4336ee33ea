import Glibc
import Logging
import NIOConcurrencyHelpers

/// Log lines for the systemd journal when stderr is connected to it (`JOURNAL_STREAM` names stderr's device and
/// inode), plain timestamped lines otherwise. Journal lines carry the syslog priority as a `<N>` prefix, which
/// journald turns into PRIORITY=, and leave the timestamp to journald.
public struct JournalLogHandler: LogHandler {
    /// The daemon-wide level (`[daemon] log_level`), which a reload may change for every logger at once.
    private static let daemonLevel = NIOLockedValueBox(Logger.Level.info)
    /// Set when a logger overrides the daemon-wide level for itself.
    private var ownLevel: Logger.Level?
    public var metadata: Logger.Metadata = [:]
    private let label: String
    private let journal: Bool

    public var logLevel: Logger.Level {
        get { ownLevel ?? Self.daemonLevel.withLockedValue { $0 } }
        set { ownLevel = newValue }
    }

    /// Where lines go: stderr, but for tests, which must not point the whole process's fd 2 elsewhere.
    private let descriptor: Int32

    /// - Parameter level: this logger's own level; nil follows the daemon-wide one.
    public init(label: String, level: Logger.Level? = nil, journal: Bool = JournalLogHandler.stderrIsJournal) {
        self.init(label: label, level: level, journal: journal, descriptor: 2)
    }

    init(label: String, level: Logger.Level?, journal: Bool, descriptor: Int32) {
        self.label = label
        ownLevel = level
        self.journal = journal
        self.descriptor = descriptor
    }

    /// Changes the level of every logger that has not set its own.
    public static func setDaemonLevel(_ level: Logger.Level) {
        daemonLevel.withLockedValue { $0 = level }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// True when systemd connected stderr to the journal (sd_journal_stream_fd semantics: JOURNAL_STREAM=dev:inode).
    public static var stderrIsJournal: Bool {
        guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return false }
        var status = stat()
        guard fstat(2, &status) == 0 else { return false }
        return value == "\(status.st_dev):\(status.st_ino)"
    }

    /// syslog priorities (sd-daemon.h SD_ERR … SD_DEBUG).
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    public func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        let fields = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let suffix = fields.isEmpty ? "" : " [\(fields.withoutControlCharacters)]"
        // Messages quote what peers send (a camera's reason phrase, a caller's stream id): a CR, an escape
        // sequence or a C1 control would forge a line or drive the operator's terminal.
        let message = event.message.description.withoutControlCharacters
        var line: String
        if journal {
            line = "<\(Self.priority(event.level))>\(message)\(suffix)\n"
        } else {
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            var parts = tm()
            var seconds = now.tv_sec
            gmtime_r(&seconds, &parts)
            let stamp = String(format4: parts.tm_year + 1900) + "-" + String(format2: parts.tm_mon + 1) + "-"
                + String(format2: parts.tm_mday) + "T" + String(format2: parts.tm_hour) + ":"
                + String(format2: parts.tm_min) + ":" + String(format2: parts.tm_sec) + "Z"
            line = "\(stamp) \(event.level) \(label): \(message)\(suffix)\n"
        }
        // One write per line, so lines from several threads never interleave.
        _ = line.withCString { write(descriptor, $0, strlen($0)) }
    }
}

extension String {
    init(format2 value: Int32) { self = value < 10 ? "0\(value)" : String(value) }
    init(format4 value: Int32) { self = String(value) }

    /// `value` with `decimals` digits after the point, as printf's `%.Nf` (the daemon does without Foundation's
    /// `String(format:)`, so that it does not link Foundation and its ICU data).
    init(_ value: Double, decimals: Int) {
        var buffer = [CChar](repeating: 0, count: 48)
        let written = withVaList([value]) { vsnprintf(&buffer, buffer.count, "%.\(decimals)f", $0) }
        self = written >= 0 && written < buffer.count ? buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } : "\(value)"
    }
}

extension String {
    /// C0 controls (tab kept), DEL and C1 controls replaced by `?`; the text unchanged (and not copied) when it
    /// has none.
    var withoutControlCharacters: String {
        guard unicodeScalars.contains(where: \.isControlForLog) else { return self }
        var scalars = String.UnicodeScalarView()
        for scalar in unicodeScalars { scalars.append(scalar.isControlForLog ? "?" : scalar) }
        return String(scalars)
    }
}

extension Unicode.Scalar {
    var isControlForLog: Bool { (value < 0x20 && value != 0x09) || (0x7f...0x9f).contains(value) }
}
