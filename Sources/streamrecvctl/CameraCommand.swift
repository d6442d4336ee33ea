import ArgumentParser
import Glibc

/// `streamrecvctl camera NAME`: the stream as a PipeWire camera. The work is done by `streamrecv-camera`, a small C
/// program beside this one, so that streamrecvctl itself does not need libpipewire on machines without PipeWire
/// (servers, the tarball's clean roots); this command finds it and replaces itself with it.
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

    func run() throws {
        guard let helper = Self.helperPath() else {
            printError("streamrecvctl: streamrecv-camera is not installed (looked in \(Self.candidates().joined(separator: ", "))): "
                       + "it comes with the streamrecvd-camera package, or `make camera` in a source tree")
            throw ExitCode(1)
        }
        var arguments = [helper]
        if let shm = stream.shm { arguments += ["--shm", shm] }
        if let nodeName { arguments += ["--node-name", nodeName] }
        if let description { arguments += ["--description", description] }
        if let rate { arguments += ["--rate", rate] }
        if let name = stream.name { arguments.append(name) }
        let pointers = arguments.map { strdup($0) } + [nil]
        execv(helper, pointers)
        printError("streamrecvctl: cannot run \(helper): \(String(cString: strerror(errno)))")
        throw ExitCode(1)
    }

    /// Beside this executable (a tarball's bin/), in ../lib/streamrecvd (the package's /usr/lib/streamrecvd),
    /// or a source tree's .build/pipewire (this executable is .build/TRIPLE/debug/streamrecvctl once the
    /// .build/debug link is resolved).
    static func candidates() -> [String] {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return [] }
        let executable = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let directory = executable.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        return ["\(directory)/streamrecv-camera", "\(directory)/../lib/streamrecvd/streamrecv-camera",
                "\(directory)/../../pipewire/streamrecv-camera"]
    }

    static func helperPath() -> String? { candidates().first { access($0, X_OK) == 0 } }
}
