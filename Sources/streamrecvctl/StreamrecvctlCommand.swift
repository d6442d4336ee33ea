import ArgumentParser

/// `streamrecvctl`: the operator's and consumer's tool. Subcommands parse their arguments and call into the
/// library modules; they hold no stream logic of their own.
@main
struct StreamrecvctlCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "streamrecvctl",
        abstract: "Inspect H.264/H.265 streams and the streams of a running streamrecvd.",
        subcommands: [InspectCommand.self, CatCommand.self, StatusCommand.self, WatchCommand.self]
    )
}
