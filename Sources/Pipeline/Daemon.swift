import Decoding
import Logging
import NIOPosix
import ServiceLifecycle

/// Runs every configured stream until SIGTERM/SIGINT: the whole daemon, minus argument parsing.
public enum Daemon {
    public static func run(configuration: DaemonConfiguration, logger: Logger) async throws {
        try checkNamedHardware(configuration, logger: logger)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let services = configuration.streams.map {
            StreamPipeline(configuration: $0, group: group, logger: logger)
        }
        let serviceGroup = ServiceGroup(configuration: .init(
            services: services.map { .init(service: $0) },
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
        do {
            try await serviceGroup.run()
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        try await group.shutdownGracefully()
    }

    /// A named hwaccel is strict: the daemon does not start when it cannot be used, and says which device failed.
    static func checkNamedHardware(_ configuration: DaemonConfiguration, logger: Logger) throws {
        for stream in configuration.streams {
            guard case .only = stream.decoder.hardware else { continue }
            for codec in stream.codec.map({ [$0] }) ?? [.h264, .h265] {
                let selection = try HardwareSelection.select(stream.decoder.hardware, codec: codec, probe: FFmpegHardwareProbe())
                logger.notice("stream \(stream.name): \(selection.summary)")
            }
        }
    }
}
