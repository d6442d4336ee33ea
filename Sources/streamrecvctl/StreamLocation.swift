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
        guard shmName != nil else { throw ValidationError("name a stream, or give --shm SHMNAME") }
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
}
