import ArgumentParser
import Glibc

/// `streamrecvctl camera NAME`: the stream as a PipeWire camera. The work is done by `streamrecv-camera`, a small C
/// program against libpipewire (`HelperProgram`).
struct CameraCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "camera",
        abstract: "Offer a stream as a PipeWire camera (a Video/Source node named streamrecv-NAME).",
        discussion: """
            For programs that take a PipeWire camera (OBS's PipeWire source, browsers with PipeWire camera support; \
            tested with pipewiresrc and a libpipewire consumer). \
            Waits for the ring, follows size changes by renegotiating and daemon restarts by attaching again, and \
            sends each frame as soon as it is published: every frame while the consumers keep up, the newest once \
            they fall behind. Runs until SIGINT or SIGTERM; systemd/user/streamrecv-camera@.service runs it per \
            stream in a user's session (systemctl --user enable --now streamrecv-camera@NAME).
            Needs streamrecv-camera (the streamrecvd-camera package, or `make camera` in a source tree) and a \
            PipeWire session. Exit status 1 when PipeWire cannot be reached or fails, or streamrecv-camera is missing.
            """)

    @OptionGroup var stream: StreamLocation

    @Option(help: "The PipeWire node's name (default: the shm object's name, streamrecv-NAME).")
    var nodeName: String?

    @Option(help: "The node's description, as applications list it (default: \"streamrecv NAME\").")
    var description: String?

    @Option(help: "The frame rate to announce, N or N/D (default: measured from the frames' arrival).")
    var rate: String?

    static let helper = HelperProgram(name: "streamrecv-camera", source: "the streamrecvd-camera package, or `make camera` in a source tree",
                                      buildDirectory: "pipewire")

    func run() throws {
        var arguments: [String] = []
        if let shm = stream.shm { arguments += ["--shm", shm] }
        if let nodeName { arguments += ["--node-name", nodeName] }
        if let description { arguments += ["--description", description] }
        if let rate { arguments += ["--rate", rate] }
        if let name = stream.name { arguments.append(name) }
        try Self.helper.exec(arguments)
    }
}
