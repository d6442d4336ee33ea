import ArgumentParser
import Glibc
import SharedFrames

/// `streamrecvctl status [NAME]`: what every stream (or one) is doing, from the shm headers alone.
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the state and counters of streams, read from their shared-memory headers.")

    @Argument(help: "A stream name; all streamrecv-* objects in /dev/shm when omitted.")
    var name: String?

    @Option(help: "The shm object's name under /dev/shm, when it is not streamrecv-NAME.")
    var shm: String?

    @Flag(help: "One JSON object per stream instead of a table.")
    var json = false

    func run() throws {
        try Self.printStatus(name: name, shm: shm, json: json)
    }

    /// Prints the table (or JSON lines) once.
    static func printStatus(name: String?, shm: String?, json: Bool) throws {
        let names: [String]
        if let shm { names = [shm] } else if let name { names = ["streamrecv-" + name] } else { names = Self.ringNames() }
        var rows: [RingStatus] = []
        var failures: [String] = []
        for shmName in names {
            // Any user can put an object under /dev/shm: one that is not a ring is reported, and the rest still shown.
            do {
                rows.append(try FrameRingReader(shmName: shmName).status)
            } catch {
                failures.append("\(error)")
            }
        }
        if json {
            for status in rows { print(Self.json(status)) }
        } else {
            print(pad("STREAM", 14) + pad("STATE", 10) + pad("CODEC", 6) + pad("FRAMES", 10) + pad("DROPPED", 8)
                  + pad("ERRORS", 7) + pad("RECREATED", 10) + pad("SENDERS", 8) + pad("SIZE", 10) + "WRITER")
            for status in rows {
                let c = status.counters
                print(pad(printable(status.streamName), 14) + pad(displayedState(status), 10)
                      + pad(status.codec.isEmpty ? "-" : printable(status.codec), 6)
                      + pad(String(c.framesPublished), 10) + pad(String(c.framesDropped), 8) + pad(String(c.decodeErrors), 7)
                      + pad(String(c.decoderRecreations), 10) + pad(String(c.connections), 8)
                      + pad("\(status.objectSize / 1_000_000).\(status.objectSize / 100_000 % 10)M", 10)
                      + "pid \(status.writerPID), owner \(owner(status.ownerUID))")
                // A pulled stream says where its source stands, under its row (only while the daemon runs).
                if !status.sourceStatus.isEmpty && status.writerAlive { print("  " + printable(status.sourceStatus)) }
            }
        }
        for failure in failures { printError("streamrecvctl: \(printable(failure))") }
        if rows.isEmpty && !failures.isEmpty { throw ExitCode(1) }
    }

    /// The header's state, unless nobody writes the ring any more: a daemon killed with SIGKILL leaves "streaming"
    /// in the header but never its lock.
    static func displayedState(_ status: RingStatus) -> String {
        if !status.writerAlive && status.state != .stopped && status.state != .replaced { return "dead" }
        return status.state.description
    }

    /// Text from the ring or a file name, safe for a terminal: control characters (escape sequences) and the
    /// bidirectional controls (which reorder what follows them on the line: a name that spoofs its row) as '?'.
    static func printable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.map {
            $0.value < 0x20 || (0x7f...0x9f).contains($0.value) || bidirectionalControls.contains($0.value) ? "?" : $0
        }))
    }

    /// LRM, RLM, ALM, the embeddings and overrides, and the isolates (Unicode's Bidi_Control).
    static let bidirectionalControls: Set<UInt32> = [0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E,
                                                      0x2066, 0x2067, 0x2068, 0x2069]

    private static func owner(_ uid: UInt32) -> String {
        guard let entry = getpwuid(uid) else { return "uid \(uid)" }
        return printable(String(cString: entry.pointee.pw_name))
    }

    static func ringNames() -> [String] {
        SharedMemoryDirectory.names().filter { $0.hasPrefix("streamrecv-") && !$0.contains("/") }.sorted()
    }

    static func json(_ status: RingStatus) -> String {
        var line = JSONLine()
        line.add("stream", status.streamName)
        line.add("state", status.state.description)
        line.add("writer_alive", status.writerAlive)
        line.add("owner_uid", Int(status.ownerUID))
        line.add("size_bytes", status.objectSize)
        line.add("codec", status.codec.isEmpty ? nil : status.codec)
        line.add("writer_pid", Int(status.writerPID))
        line.add("latest_sequence", status.latestSequence)
        line.add("latest_published_ns", status.latestPublishedNanoseconds)
        line.add("generation", status.generation)
        line.add("slots", status.slotCount)
        line.add("max_width", status.maxWidth)
        line.add("max_height", status.maxHeight)
        line.add("pts_clock_rate", Int(status.ptsClockRate))
        line.add("source_status", status.sourceStatus.isEmpty ? nil : status.sourceStatus)
        let c = status.counters
        line.add("bytes_received", c.bytesReceived)
        line.add("access_units", c.accessUnits)
        line.add("frames_decoded", c.framesDecoded)
        line.add("frames_published", c.framesPublished)
        line.add("frames_dropped", c.framesDropped)
        line.add("decode_errors", c.decodeErrors)
        line.add("decoder_recreations", c.decoderRecreations)
        line.add("connections", c.connections)
        return line.rendered
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }
}

/// `streamrecvctl watch [NAME]`: the status table, redrawn every interval until interrupted.
struct WatchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch", abstract: "Show the status table, refreshed live (Ctrl-C to stop).")

    @Argument(help: "A stream name; all streamrecv-* objects in /dev/shm when omitted.")
    var name: String?

    @Option(help: "Seconds between refreshes.")
    var interval: Double = 1

    @Option(help: "Stop after this many refreshes (for scripts and tests).")
    var count: Int?

    func validate() throws {
        // usleep takes at most 4294 s: an hour between refreshes is plenty (and inf or NaN would trap).
        guard interval >= 0.05, interval <= 3600 else { throw ValidationError("--interval must be 0.05 to 3600 s") }
    }

    func run() throws {
        var shown = 0
        while count.map({ shown < $0 }) ?? true {
            // Clear the screen and home the cursor, then draw: one frame per refresh, no scrolling.
            print("\u{1B}[2J\u{1B}[H", terminator: "")
            try StatusCommand.printStatus(name: name, shm: nil, json: false)
            fflush(nil)  // all output streams: the table must appear before the pause
            shown += 1
            if count.map({ shown >= $0 }) ?? false { break }
            usleep(UInt32(interval * 1_000_000))
        }
    }
}
