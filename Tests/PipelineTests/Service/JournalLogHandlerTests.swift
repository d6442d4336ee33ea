import Glibc
import Logging
@testable import Pipeline
import Testing

/// The daemon's log lines: `<N>` priorities for the journal, timestamped lines otherwise, one write per line, and
/// nothing a peer sends can forge a line or drive a terminal.
///
/// The handler writes to fd 2 in the daemon; here to a pipe of the suite's own (close-on-exec, so no child of
/// another suite inherits it), never by pointing the process's fd 2 elsewhere. Serialized: the pipe and the
/// daemon-wide level are shared by its tests.
@Suite(.serialized) struct JournalLogHandlerTests {
    static let label = "journal-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    /// The suite's pipe (a socket pair: made close-on-exec at once, which Swift's Glibc offers no pipe2 for); its
    /// read end does not block.
    static let output: (read: Int32, write: Int32) = {
        var ends: [Int32] = [-1, -1]
        let type = Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue)
        precondition(socketpair(AF_UNIX, type, 0, &ends) == 0, "socketpair: \(errno)")
        _ = fcntl(ends[0], F_SETFL, fcntl(ends[0], F_GETFL) | O_NONBLOCK)
        return (ends[0], ends[1])
    }()

    static func logger(journal: Bool, level: Logger.Level? = nil) -> Logger {
        Logger(label: label) { label in JournalLogHandler(label: label, level: level, journal: journal, descriptor: output.write) }
    }

    /// The lines `body` had the suite's loggers write that carry `marker`.
    static func standardErrorLines(containing marker: String, _ body: () -> Void) throws -> [String] {
        body()
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while case let count = read(output.read, &chunk, chunk.count), count > 0 { bytes += chunk[..<count] }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        return lines.filter { $0.contains(marker) }.map(String.init)
    }

    @Test func journalLinesCarryTheSyslogPriorityAndNoTimestamp() throws {
        let marker = "mark-\(UInt32.random(in: 0...UInt32.max))"
        var logger = Self.logger(journal: true, level: .trace)
        logger[metadataKey: "stream"] = "desk"
        let lines = try Self.standardErrorLines(containing: marker) {
            logger.error("\(marker) failed")
            logger.info("\(marker) started", metadata: ["port": "5000"])
            logger.debug("\(marker) detail")
        }
        #expect(lines == ["<3>\(marker) failed [stream=desk]", "<6>\(marker) started [port=5000 stream=desk]",
                          "<7>\(marker) detail [stream=desk]"])
    }

    /// sd-daemon.h's priorities: trace and debug share SD_DEBUG.
    @Test func everyLevelHasItsSyslogPriority() {
        let priorities = Logger.Level.allCases.map { JournalLogHandler.priority($0) }
        #expect(priorities == [7, 7, 6, 5, 4, 3, 2], "trace … critical: \(priorities)")
    }

    /// Metadata prints sorted by key; the message's own metadata wins over the logger's for the same key.
    @Test func metadataIsSortedAndTheMessagesOwnWins() throws {
        let marker = "mark-\(UInt32.random(in: 0...UInt32.max))"
        var logger = Self.logger(journal: true, level: .info)
        logger[metadataKey: "zeta"] = "1"
        logger[metadataKey: "remote"] = "logger's"
        let lines = try Self.standardErrorLines(containing: marker) {
            logger.warning("\(marker)", metadata: ["remote": "message's", "alpha": "2"])
            logger.warning("\(marker) plain")
        }
        #expect(lines == ["<4>\(marker) [alpha=2 remote=message's zeta=1]", "<4>\(marker) plain [remote=logger's zeta=1]"])
    }

    /// Messages quote what peers send: a newline would forge a second line, an escape sequence or a C1 control
    /// would drive the operator's terminal, a NUL would cut the line. All become `?`; a tab stays.
    @Test func controlCharactersFromPeersCannotForgeLines() throws {
        let marker = "mark-\(UInt32.random(in: 0...UInt32.max))"
        let logger = Self.logger(journal: true, level: .info)
        let lines = try Self.standardErrorLines(containing: marker) {
            logger.notice("\(marker) reason: Not\r\nFound\n<0>FAKE \u{1b}[2J\u{9b}1m\u{0}cut\tkept",
                          metadata: ["id": "a\nb\u{7f}"])
        }
        #expect(lines == ["<5>\(marker) reason: Not??Found?<0>FAKE ?[2J?1m?cut\tkept [id=a?b?]"], "\(lines)")
    }

    /// Outside the journal: `YYYY-MM-DDTHH:MM:SSZ level label: message`, in UTC, at the time of the call.
    @Test func plainLinesStartWithAUTCTimestampLevelAndLabel() throws {
        let marker = "mark-\(UInt32.random(in: 0...UInt32.max))"
        let logger = Self.logger(journal: false, level: .info)
        // The clock the handler reads: time() is the kernel's coarse second, which can lag it by a tick.
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let before = now.tv_sec
        let lines = try Self.standardErrorLines(containing: marker) { logger.warning("\(marker)", metadata: ["k": "v"]) }
        clock_gettime(CLOCK_REALTIME, &now)
        let after = now.tv_sec
        let line = try #require(lines.first)
        #expect(lines.count == 1)
        let match = try #require(line.wholeMatch(of: /(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)Z (.*)/), "\(line)")
        #expect(String(match.7) == "warning \(Self.label): \(marker) [k=v]")
        var parts = tm()
        parts.tm_year = Int32(match.1)! - 1900
        parts.tm_mon = Int32(match.2)! - 1
        parts.tm_mday = Int32(match.3)!
        parts.tm_hour = Int32(match.4)!
        parts.tm_min = Int32(match.5)!
        parts.tm_sec = Int32(match.6)!
        let stamped = timegm(&parts)
        #expect(stamped >= before && stamped <= after, "\(line) not between \(before) and \(after)")
    }

    /// A logger without a level of its own follows the daemon-wide one, which a reload changes for all at once;
    /// one with its own level keeps it.
    @Test func loggersFollowTheDaemonLevelUnlessTheySetTheirOwn() throws {
        let marker = "mark-\(UInt32.random(in: 0...UInt32.max))"
        defer { JournalLogHandler.setDaemonLevel(.info) }
        JournalLogHandler.setDaemonLevel(.info)
        let following = Self.logger(journal: true)
        let own = Self.logger(journal: true, level: .error)
        #expect(following.logLevel == .info && own.logLevel == .error)
        let lines = try Self.standardErrorLines(containing: marker) {
            following.debug("\(marker) hidden at info")
            JournalLogHandler.setDaemonLevel(.debug)
            following.debug("\(marker) shown at debug")
            own.warning("\(marker) hidden below its own error")
        }
        #expect(lines == ["<7>\(marker) shown at debug"])
        #expect(following.logLevel == .debug && own.logLevel == .error)

        var changed = JournalLogHandler(label: "x", journal: true)
        changed.logLevel = .critical
        JournalLogHandler.setDaemonLevel(.trace)
        #expect(changed.logLevel == .critical, "a level set on the handler is its own from then on")
    }

    @Test func metadataIsReadAndWrittenByKey() {
        var handler = JournalLogHandler(label: "x", journal: true)
        #expect(handler[metadataKey: "a"] == nil)
        handler[metadataKey: "a"] = "1"
        handler[metadataKey: "b"] = "2"
        handler[metadataKey: "a"] = nil
        #expect(handler[metadataKey: "a"] == nil && handler[metadataKey: "b"] == "2" && handler.metadata.count == 1)
    }

    /// systemd names stderr's device and inode in JOURNAL_STREAM: only a match means stderr is the journal (a
    /// child that inherited the variable but not the descriptor must not write `<N>` prefixes to a terminal).
    @Test func stderrIsTheJournalOnlyWhenJOURNAL_STREAMNamesIt() throws {
        let previous = getenv("JOURNAL_STREAM").map { String(cString: $0) }
        defer {
            if let previous { setenv("JOURNAL_STREAM", previous, 1) } else { unsetenv("JOURNAL_STREAM") }
        }
        var status = stat()
        try #require(fstat(2, &status) == 0)
        unsetenv("JOURNAL_STREAM")
        #expect(!JournalLogHandler.stderrIsJournal)
        setenv("JOURNAL_STREAM", "\(status.st_dev):\(status.st_ino)", 1)
        #expect(JournalLogHandler.stderrIsJournal)
        setenv("JOURNAL_STREAM", "\(status.st_dev):\(status.st_ino &+ 1)", 1)
        #expect(!JournalLogHandler.stderrIsJournal)
        setenv("JOURNAL_STREAM", "garbage", 1)
        #expect(!JournalLogHandler.stderrIsJournal)
    }

    /// Timestamps are written without Foundation: two digits for the fields that need them, four for the year.
    @Test func timestampFieldsArePaddedToTheirWidth() {
        #expect(String(format2: 0) == "00" && String(format2: 7) == "07" && String(format2: 10) == "10" && String(format2: 59) == "59")
        #expect(String(format4: 2025) == "2025")
    }
}
