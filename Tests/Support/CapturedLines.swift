import Logging
import Synchronization

/// The lines loggers wrote, for tests of what is logged: each line's level, message and metadata.
public final class CapturedLines: Sendable {
    public struct Line: Sendable {
        public let level: Logger.Level
        public let message: String
        public let metadata: Logger.Metadata
    }

    private let lines = Mutex<[Line]>([])

    public init() {}

    public func append(_ line: Line) { lines.withLock { $0.append(line) } }
    public var all: [Line] { lines.withLock { $0 } }

    /// A logger whose every line lands here.
    public func logger(label: String) -> Logger { Logger(label: label) { _ in CaptureHandler(lines: self) } }
}

/// A log handler that keeps every line, at every level, in `lines`.
public struct CaptureHandler: LogHandler {
    public let lines: CapturedLines
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .trace

    public init(lines: CapturedLines) { self.lines = lines }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        lines.append(.init(level: event.level, message: event.message.description,
                           metadata: metadata.merging(event.metadata ?? [:]) { $1 }))
    }
}
