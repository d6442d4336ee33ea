import Bitstream
import CoreMetrics
import Decoding
import Glibc
import Logging
import NIOCore
import NIOPosix
import Prometheus
import ServiceLifecycle
import UnixSignals

/// Runs every configured stream until SIGTERM/SIGINT, reloading on SIGHUP: the whole daemon, minus argument parsing.
public enum Daemon {
    /// - Parameter configurationPath: the file SIGHUP reloads; nil disables reloading.
    public static func run(configuration: DaemonConfiguration, configurationPath: String?, logger: Logger) async throws {
        FFmpegLog.route(to: Logger(label: "libavcodec"))
        for warning in configuration.warnings { logger.warning("\(warning)") }
        try checkNamedHardware(configuration, logger: logger)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        // The HTTP endpoints (metrics, WHIP and its TLS) on a thread of their own: a flood of requests costs that
        // thread, not the one the ingest sockets and the WebRTC media are read on.
        let httpGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { httpGroup.shutdownGracefully { _ in } }
        let (inherited, inheritedWebRTC) = assignInheritedListeners(to: configuration.streams, webrtc: configuration.webrtc != nil, logger: logger)
        var factory: any MetricsFactory = NOOPMetricsHandler.instance
        var metricsServer: MetricsServer?
        if let address = configuration.metrics {
            let registry = PrometheusCollectorRegistry()
            factory = MetricsServer.factory(registry: registry)
            metricsServer = MetricsServer(address: address, registry: registry, group: httpGroup, logger: logger)
        }
        let webrtc = try configuration.webrtc.map {
            try WebRTCServer(configuration: $0, group: group, httpGroup: httpGroup, metricsFactory: factory, logger: logger)
        }
        do {
            try await webrtc?.bind(inherited: inheritedWebRTC)  // before any stream: a taken port ends the daemon before READY=1
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        let supervisor = StreamSupervisor(
            configuration: configuration, configurationPath: configurationPath, group: group,
            metricsFactory: factory, inherited: inherited, logger: logger, webrtc: webrtc)
        let notifier = SystemdNotifierService(supervisor: supervisor, initialStreams: configuration.streams.count, logger: logger)
        // Graceful shutdown runs in reverse order: the metrics endpoint closes, the notifier says STOPPING=1,
        // then the streams drain.
        // The WebRTC server comes first: it closes after the streams that attach to it have stopped.
        let services: [ServiceGroupConfiguration.ServiceConfiguration] = (webrtc.map { [.init(service: $0)] } ?? [])
            + [.init(service: supervisor), .init(service: notifier)]
            + (metricsServer.map { [.init(service: $0)] } ?? [])
        let serviceGroup = ServiceGroup(configuration: .init(
            services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await serviceGroup.run()
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        try await group.shutdownGracefully()
    }

    /// Socket activation: each inherited listener goes to the stream named by its `FileDescriptorName=`; a single
    /// listener with another name goes to a single stream. The reserved names `whip-http` and `whip-media` go to
    /// `[webrtc]` (never to a stream). Listeners nobody claims are closed, with a warning.
    static func assignInheritedListeners(
        to streams: [StreamConfiguration], webrtc hasWebRTC: Bool, logger: Logger
    ) -> (streams: [String: Int32], webrtc: InheritedWebRTCSockets) {
        let listeners = ServiceManager.inheritedListeners()
        guard !listeners.isEmpty else { return ([:], InheritedWebRTCSockets()) }
        var assigned: [String: Int32] = [:]
        var webrtc = InheritedWebRTCSockets()
        let forStreams = listeners.filter { !InheritedWebRTCSockets.reservedNames.contains($0.name) }
        for listener in listeners {
            if InheritedWebRTCSockets.reservedNames.contains(listener.name) {
                let isHTTP = listener.name == InheritedWebRTCSockets.httpName
                if !hasWebRTC {
                    logger.warning("socket activation: listener '\(listener.name)' is for [webrtc], which this configuration does not have; closing that listener")
                } else if (isHTTP ? webrtc.http : webrtc.media) != nil {
                    logger.warning("socket activation: a second listener named '\(listener.name)' ([webrtc] takes one); closing it")
                } else {
                    if isHTTP { webrtc.http = listener.descriptor } else { webrtc.media = listener.descriptor }
                    continue
                }
                close(listener.descriptor)
            } else if streams.contains(where: { $0.name == listener.name }) {
                assigned[listener.name] = listener.descriptor
            } else if forStreams.count == 1 && streams.count == 1 {
                assigned[streams[0].name] = listener.descriptor
                logger.notice("socket activation: listener '\(listener.name)' used for the only stream, '\(streams[0].name)'")
            } else {
                logger.warning("socket activation: no stream named '\(listener.name)' (FileDescriptorName=); closing that listener")
                close(listener.descriptor)
            }
        }
        return (assigned, webrtc)
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
