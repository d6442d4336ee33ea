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

    func attach() throws -> FrameRingReader {
        do {
            return try FrameRingReader(shmName: shmName!)
        } catch {
            throw ValidationError("\(error)")
        }
    }
}
