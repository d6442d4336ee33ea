import Glibc
import ArgumentParser
import Logging
import Pipeline

/// `streamrecvd`: parse arguments, set up logging, run the daemon. Nothing else lives here.
@main
struct StreamrecvdCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "streamrecvd",
        abstract: "Receive live H.264/H.265 over the network and publish decoded frames in shared memory.")

    @Option(help: "Configuration file.")
    var config: String = "/etc/streamrecvd/streamrecvd.toml"

    @Option(name: .customLong("check-config"), help: "Validate FILE, print a summary, and exit (status 1 on errors).")
    var checkConfig: String?

    @Option(name: .customLong("remove-foreign-rings"),
            help: "Remove the objects under the configured ring names that USER did not create, and exit (run as root before the daemon starts as USER).")
    var removeForeignRings: String?

    func run() async throws {
        let path = checkConfig ?? config
        let configuration: DaemonConfiguration
        do {
            configuration = try ConfigurationLoader.load(path: path)
        } catch {
            printError("streamrecvd: \(error)")
            throw ExitCode(1)
        }
        if let owner = removeForeignRings {
            guard let entry = getpwnam(owner) else {
                printError("streamrecvd: no user '\(owner)'")
                throw ExitCode(1)
            }
            for line in RingNames.removeForeign(configuration.streams, owner: entry.pointee.pw_uid) { print(line) }
            return
        }
        if checkConfig != nil {
            var report = ConfigurationReport(configuration)
            report.checkHardware(configuration)
            report.checkPorts(configuration)
            for line in report.lines { print(line) }
            for warning in report.warnings { print("warning: \(warning)") }
            for error in report.errors { printError("streamrecvd: \(path):\(error.line.map { "\($0):" } ?? "") \(error.message)") }
            guard report.errors.isEmpty else { throw ExitCode(1) }
            print("\(path): ok, \(configuration.streams.count) stream(s): "
                + configuration.streams.map { "\($0.name) on \($0.endpoint)" }.joined(separator: ", "))
            return
        }
        // A file-size limit (RLIMIT_FSIZE) must fail the ring's creation with EFBIG and a clear error, not kill us.
        signal(SIGXFSZ, SIG_IGN)
        let level = Logger.Level(rawValue: configuration.logLevel.rawValue) ?? .info
        JournalLogHandler.setDaemonLevel(level)
        LoggingSystem.bootstrap { label in JournalLogHandler(label: label) }
        let logger = Logger(label: "streamrecvd")
        do {
            try await Daemon.run(configuration: configuration, configurationPath: path, logger: logger)
        } catch {
            logger.critical("stopping: \(error)")
            throw ExitCode(1)
        }
    }
}

func printError(_ text: String) {
    let line = text + "\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
}
