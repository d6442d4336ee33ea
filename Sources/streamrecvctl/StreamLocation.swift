import ArgumentParser
import SharedFrames

/// How a command names a stream: by its configured name (shm object `streamrecv-NAME`) or by `--shm`.
struct StreamLocation: ParsableArguments {
    @Argument(help: "The stream's name as configured (its shm object is streamrecv-NAME).")
    var name: String?

    @Option(help: "The shm object's name under /dev/shm, when it is not streamrecv-NAME.")
    var shm: String?

    var shmName: String? { shm ?? name.map { "streamrecv-" + $0 } }

    func validate() throws {
        guard let shmName else { throw ValidationError("name a stream, or give --shm SHMNAME") }
        // Refused here as a usage mistake; the library would refuse it too, as an error at attach.
        guard SharedMemoryDirectory.isPlainName(shmName) else {
            throw ValidationError("a stream or shm name is a plain name under /dev/shm: no '/', not '.' or '..'")
        }
    }

    /// The stream's ring; a missing object or one that is not a ring is an error (exit status 1), not a usage
    /// mistake. Names and reasons are printed with control characters replaced.
    func attach() throws -> FrameRingReader {
        do {
            return try FrameRingReader(shmName: shmName!)
        } catch {
            printError("streamrecvctl: \(StatusCommand.printable("\(error)"))")
            throw ExitCode(1)
        }
    }

    /// The stream's ring, waiting for it while it does not exist yet (consumers often start before the daemon
    /// has made it: socket activation starts the daemon at the first connection), saying so once on standard
    /// error. Up to `timeout` seconds (nil: for ever); exit status 2 when it did not appear, 1 when the object is
    /// not a ring.
    func attach(waitingUpTo timeout: Double?) throws -> FrameRingReader {
        let name = shmName!
        let found: FrameRingReader?
        do {
            found = try FrameRingReader.waitingForRing(shmName: name, timeoutNanoseconds: timeout.map(Seconds.nanoseconds)) {
                printError("streamrecvctl: waiting for /dev/shm/\(StatusCommand.printable(name)) (the daemon has not made the ring yet)")
            }
        } catch {
            printError("streamrecvctl: \(StatusCommand.printable("\(error)"))")
            throw ExitCode(1)
        }
        guard let found else {
            printError("streamrecvctl: /dev/shm/\(StatusCommand.printable(name)) did not appear within \(timeout ?? 0) s")
            throw ExitCode(2)
        }
        return found
    }
}
