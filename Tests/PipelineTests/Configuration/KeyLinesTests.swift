@testable import Pipeline
import Testing

/// Where a key stands in the TOML text, for messages about it: tables, arrays of tables and their inline forms,
/// with strings and comments that only look like syntax.
@Suite struct KeyLinesTests {
    @Test func keysOfTablesAndArraysOfTablesAreFoundOnTheirLines() {
        let lines = KeyLines("""
            # streamrecvd
            [daemon]
            log_level = "info"
            metrics = "127.0.0.1:9464"

            [[stream]]
            name = "a"
            listen = "tcp://127.0.0.1:5000"

            [webrtc]
            listen = "127.0.0.1:8889"

            [[stream]]
            name = "b"
            slots = 4
            """)
        #expect(lines.line(section: "daemon", index: nil, key: "log_level") == 3)
        #expect(lines.line(section: "daemon", index: nil, key: "metrics") == 4)
        #expect(lines.line(section: "stream", index: 0, key: "listen") == 8)
        #expect(lines.line(section: "webrtc", index: nil, key: "listen") == 11, "the same key in another table is not confused")
        // A table between two [[stream]] entries does not reset their count.
        #expect(lines.line(section: "stream", index: 1, key: "name") == 14)
        #expect(lines.line(section: "stream", index: 1, key: "slots") == 15)
    }

    /// A key that is not there is placed at its table's header (where to add it); a table that is not there, nowhere.
    @Test func anAbsentKeyFallsBackToItsTableAndAnAbsentTableToNothing() {
        let lines = KeyLines("""
            [daemon]
            log_level = "info"
            [[stream]]
            name = "a"
            """)
        #expect(lines.line(section: "stream", index: 0, key: "slots") == 3)
        #expect(lines.line(section: "stream", index: 0, key: nil) == 3)
        #expect(lines.line(section: "daemon", index: nil, key: nil) == 1)
        #expect(lines.line(section: "stream", index: 1, key: "name") == nil, "there is one stream only")
        #expect(lines.line(section: "webrtc", index: nil, key: "listen") == nil)
        #expect(lines.line(section: "daemon", index: 0, key: "log_level") == nil, "[daemon] is a table, not an array of them")
    }

    @Test func topLevelKeysHaveNoSection() {
        let lines = KeyLines("""
            title = "x"

            unknown = 3
            [daemon]
            unknown = 4
            """)
        #expect(lines.line(section: nil, index: nil, key: "unknown") == 3)
        #expect(lines.line(section: "daemon", index: nil, key: "unknown") == 5)
        #expect(lines.line(section: nil, index: nil, key: "title") == 1)
    }

    /// `stream = [{ … }, { … }]` is an array of tables: each inline table is an entry, numbered as [[stream]] would be.
    @Test func inlineArraysOfTablesAreNumberedLikeHeaders() {
        let lines = KeyLines("""
            stream = [
              { name = "a", listen = "tcp://127.0.0.1:5000" },
              { name = "b", slots = 4 },
            ]
            daemon = { log_level = "debug", metrics = "127.0.0.1:9464" }
            """)
        #expect(lines.line(section: "stream", index: 0, key: "listen") == 2)
        #expect(lines.line(section: "stream", index: 1, key: "slots") == 3)
        #expect(lines.line(section: "stream", index: 1, key: "listen") == 3, "absent: the entry's own line")
        #expect(lines.line(section: "daemon", index: nil, key: "metrics") == 5)
        #expect(lines.line(section: nil, index: nil, key: "daemon") == 5)
        #expect(lines.line(section: nil, index: nil, key: "name") == nil, "an inline table's keys are its own, not top-level")
    }

    /// A `#`, `=`, bracket or brace inside a string is text, not syntax; a comment hides what looks like a key.
    @Test func stringsAndCommentsDoNotLookLikeSyntax() {
        let lines = KeyLines("""
            [[stream]]
            name = "a # not a comment = not a key [x] {y}"
            # slots = 99
            shm_name = 'literal # { ['   # a comment with = and [
            listen = "tcp://127.0.0.1:5000"
            """)
        #expect(lines.line(section: "stream", index: 0, key: "listen") == 5)
        #expect(lines.line(section: "stream", index: 0, key: "shm_name") == 4)
        #expect(lines.line(section: "stream", index: 0, key: "slots") == 1, "the commented-out key is not a key")
        #expect(lines.line(section: "x", index: nil, key: nil) == nil, "a bracket in a string opens no table")
    }

    /// Newlines inside multi-line strings and escaped quotes still count toward the lines that follow.
    @Test func multiLineStringsAndEscapesKeepTheCountRight() {
        let lines = KeyLines(#"""
            [[stream]]
            name = "quote \" and backslash \\"
            note = """
            slots = 1
            [daemon]
            """
            other = '''
            two
            lines'''
            slots = 8
            """#)
        #expect(lines.line(section: "stream", index: 0, key: "note") == 3)
        #expect(lines.line(section: "stream", index: 0, key: "other") == 7)
        #expect(lines.line(section: "stream", index: 0, key: "slots") == 10, "the slots inside the string is text")
        #expect(lines.line(section: "daemon", index: nil, key: nil) == nil, "a header inside a string opens no table")
    }

    /// Quoted keys are read without their quotes; dotted keys are kept whole; blanks around names do not count.
    @Test func quotedDottedAndSpacedNamesAreRead() {
        let lines = KeyLines("""
            [ daemon ]
            "log_level" = "info"
            a.b = 1
            \t  spaced   =  2
            [[ stream ]]
            name = "a"
            """)
        #expect(lines.line(section: "daemon", index: nil, key: "log_level") == 2)
        #expect(lines.line(section: "daemon", index: nil, key: "a.b") == 3)
        #expect(lines.line(section: "daemon", index: nil, key: "spaced") == 4)
        #expect(lines.line(section: "stream", index: 0, key: "name") == 6)
    }

    @Test func windowsLineEndingsCountOneLineEach() {
        let lines = KeyLines("[daemon]\r\nlog_level = \"info\"\r\n\r\n[[stream]]\r\nname = \"a\"\r\n")
        #expect(lines.line(section: "daemon", index: nil, key: "log_level") == 2)
        #expect(lines.line(section: "stream", index: 0, key: "name") == 5)
    }

    /// A nested inline value (an array of strings, a table inside an inline table) is skipped whole.
    /// A byte-order mark before the first table (TOML allows one) hid that table's header: every later
    /// `[[stream]]` was numbered one too low, and errors named the wrong stream.
    @Test func aByteOrderMarkIsNoKey() throws {
        let lines = KeyLines("\u{FEFF}[[stream]]\nname = \"a\"\n\n[[stream]]\nname = \"b\"\n")
        #expect(lines.line(section: "stream", index: 0, key: "name") == 2)
        #expect(lines.line(section: "stream", index: 1, key: "name") == 5)
        // Through the loader: the message names the line (it had none).
        do {
            _ = try ConfigurationLoader.parse("\u{FEFF}[daemon]\nlog_level = \"loud\"\n", file: "t.toml")
            Issue.record("a log level of 'loud' loaded")
        } catch {
            #expect("\(error)".contains("t.toml:2:"), "\(error)")
        }
    }

    @Test func nestedInlineValuesAreSkippedWhole() {
        let lines = KeyLines("""
            stream = [{ name = "a", allow = ["10.0.0.0/8", "::1"], rtp = { x = [1, { y = 2 }] }, slots = 4 }]
            """)
        #expect(lines.line(section: "stream", index: 0, key: "slots") == 1)
        let places = lines.places(section: "stream", index: 0)
        #expect(Set(places.keys.keys) == ["name", "allow", "rtp", "slots"], "x and y belong to nested values: \(places.keys)")
    }

    /// One stream's keys with their lines, and the table's line for any key it lacks (`StreamConfiguration.lines`).
    @Test func placesGivesEveryKeyOfOneEntry() {
        let lines = KeyLines("""
            [[stream]]
            name = "a"
            [[stream]]
            name = "b"
            max_width = 1920

            hwaccel = "cuda"
            """)
        let second = lines.places(section: "stream", index: 1)
        #expect(second.keys == ["name": 4, "max_width": 5, "hwaccel": 7])
        #expect(second.line(of: "max_width") == 5)
        #expect(second.line(of: "ring_size_limit") == 3, "an absent key: the table's line")
        let first = lines.places(section: "stream", index: 0)
        #expect(first.keys == ["name": 2] && first.line(of: "hwaccel") == 1)
        let missing = lines.places(section: "stream", index: 2)
        #expect(missing.keys.isEmpty && missing.line(of: "name") == nil)
    }

    /// Text that ends in the middle of something (the scanner never judges, TOMLKit already has) ends the scan.
    @Test func anUnfinishedEndIsNoTrap() {
        let lines = KeyLines("[daemon]\nlog_level = \"info")
        #expect(lines.line(section: "daemon", index: nil, key: "log_level") == 2)
        #expect(KeyLines("stream = [{ name = ").line(section: "stream", index: 0, key: nil) == 1)
        #expect(KeyLines("").line(section: nil, index: nil, key: "x") == nil)
    }
}
