import ArgumentParser

/// `streamrecvctl`: the operator's and consumer's tool. Subcommands parse their arguments and call into the
/// library modules; they hold no stream logic of their own.
@main
struct StreamrecvctlCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "streamrecvctl",
        abstract: "Inspect, send and read H.264/H.265 streams, and watch the streams of a running streamrecvd.",
        subcommands: [
            InspectCommand.self, CatCommand.self, SnapshotCommand.self, WaitCommand.self, SendCommand.self, StatusCommand.self, WatchCommand.self, CameraCommand.self, ViewCommand.self,
        ]
    )
}
