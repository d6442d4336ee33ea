import ArgumentParser

/// `streamrecvctl view NAME`: a window showing the stream's newest frame. The work is done by `streamrecv-view`, a
/// small C program against SDL2 and OpenGL (`HelperProgram`).
struct ViewCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "view",
        abstract: "Show a stream in a window: always its newest frame, as soon as it is published.",
        discussion: """
            Each frame is copied out of its slot once, uploaded once into textures and converted to RGB by a shader \
            with the frame's own colour matrix and range (NV12, P010, I420, 4:2:2 and 4:4:4 at 8 to 12 bits, gray, \
            GBR), cropped, turned and flipped as the stream asks, at its pixel aspect, and presented at the \
            display's refresh. A frame published while the window is busy replaces the one waiting: never a queue. \
            Waits for the ring, follows size changes and daemon restarts. X11 or Wayland, through SDL2 \
            (SDL_VIDEODRIVER=wayland to prefer Wayland). Keys: f or F11 fullscreen (or a double click), o or Tab \
            the overlay (frames per second, size and format, the frame's age, flags, lapped frames), q or Escape quits.
            Needs streamrecv-view (the streamrecvd-viewer package, or `make viewer` in a source tree) and a display. \
            Exit status 1 when no display or OpenGL 3.3 can be had, or streamrecv-view is missing.
            """)

    @OptionGroup var stream: StreamLocation

    @Flag(help: "Start fullscreen.")
    var fullscreen = false

    @Flag(help: "Start with the overlay shown.")
    var overlay = false

    @Flag(help: "Present as soon as drawn instead of at the display's refresh (may tear).")
    var noVsync = false

    @Option(help: "The window's title (default: \"streamrecv NAME\").")
    var title: String?

    @Option(help: "Write a line per frame shown: sequence, published, copied out, presented (CLOCK_MONOTONIC ns), drawn size.")
    var frameLog: String?

    static let helper = HelperProgram(name: "streamrecv-view", source: "the streamrecvd-viewer package, or `make viewer` in a source tree",
                                      buildDirectory: "viewer")

    func run() throws {
        var arguments: [String] = []
        if let shm = stream.shm { arguments += ["--shm", shm] }
        if fullscreen { arguments.append("--fullscreen") }
        if overlay { arguments.append("--overlay") }
        if noVsync { arguments.append("--no-vsync") }
        if let title { arguments += ["--title", title] }
        if let frameLog { arguments += ["--frame-log", frameLog] }
        if let name = stream.name { arguments.append(name) }
        try Self.helper.exec(arguments)
    }
}
