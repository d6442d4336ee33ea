import Decoding
import Logging
import MediaSecurity
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// What every request to the WHIP endpoint passes before it reaches a stream: its `Host:` must be a name the
/// endpoint answers to (ServedHostNames: DNS rebinding), and a party that keeps presenting wrong tokens waits
/// (AuthenticationFailures: online guessing). Shared by the endpoint's connections; any thread.
final class WHIPGate: Sendable {
    private let hosts: ServedHostNames
    /// The HTTPS certificate in use (WebRTCServer replaces it on reload): its names are served too.
    private let certificate: NIOLockedValueBox<TLSServerCertificate?>
    private let failures = NIOLockedValueBox(AuthenticationFailures())
    /// Whom each connection was admitted for.
    private let connections: ConnectionCap
    private let metrics: WebRTCMetrics
    private let log: NIOLockedValueBox<RateLimitedLogger>

    init(configuration: WebRTCServerConfiguration, certificate: NIOLockedValueBox<TLSServerCertificate?>, connections: ConnectionCap,
         metrics: WebRTCMetrics, logger: Logger) {
        hosts = ServedHostNames(configuration: configuration)
        self.certificate = certificate
        self.connections = connections
        self.metrics = metrics
        log = NIOLockedValueBox(RateLimitedLogger(logger: logger))
    }

    /// The refusal for a request whose `Host:` names nothing served (421), or that lacks one in HTTP/1.1 (400).
    func hostRefusal(_ request: HTTPRequestHead, remote: String, now: UInt64) -> WHIPRequestHandler.Reply? {
        let values = request.headers["Host"]
        if values.isEmpty, request.version.major == 1, request.version.minor == 0 { return nil }
        let certificate = self.certificate.withLockedValue { $0 }
        if values.count == 1, hosts.accepts(values[0], certificateCovers: { certificate?.covers(host: $0) ?? false }) { return nil }
        metrics.refused(.host)
        let shown = values.first.map { String($0.unicodeScalars.prefix(64).map { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7f ? Character($0) : "?" }) }
        log.withLockedValue {
            $0.log(.warning, key: "host", now: now, "WHIP endpoint: request for Host \(shown.map { "'\($0)'" } ?? "(none)") refused: not a name this endpoint serves (DNS rebinding?; add it to [webrtc] server_names if it is yours) (remote \(remote))")
        }
        guard values.count == 1 else { return .init(.badRequest, "one Host header is needed\n") }
        return .init(.misdirectedRequest, "this endpoint does not serve that host name\n")
    }

    /// Who sends on `channel`: as the cap admitted it (at accept: a client that has closed since is still its
    /// user's), else asked now.
    func party(of channel: Channel) -> ConnectionParty {
        connections.party(of: channel) ?? ConnectionParty.of(remote: channel.remoteAddress, local: channel.localAddress) ?? .loopback
    }

    /// The 429 for a party that must still wait after wrong tokens; nil when it may try.
    func throttled(_ party: ConnectionParty, now: UInt64) -> WHIPRequestHandler.Reply? {
        guard let wait = failures.withLockedValue({ $0.blocked(party, now: now) }) else { return nil }
        metrics.refused(.throttled)
        let seconds = (wait + 999_999_999) / 1_000_000_000
        return .init(.tooManyRequests, "too many wrong tokens from here: try again in \(seconds) s\n", headers: [("Retry-After", String(seconds))])
    }

    /// Whether `headers` carry `route`'s token; a failure counts against `party` (and may start its wait).
    func authorize(_ headers: HTTPHeaders, route: WebRTCRoute, party: ConnectionParty, now: UInt64) -> Bool {
        let values = headers["Authorization"]
        let presented = values.count == 1 && values[0].utf8.count > 7 && values[0].prefix(7).lowercased() == "bearer "
        guard presented, route.settings.token.matches(values[0].utf8.dropFirst(7)) else {
            if let block = failures.withLockedValue({ $0.failed(party, now: now) }) {
                log.withLockedValue {
                    $0.log(.warning, key: "guessing", now: now, "WHIP endpoint: wrong bearer tokens from \(party) again; its requests wait \(block / 1_000_000_000) s (429)")
                }
            }
            return false
        }
        failures.withLockedValue { $0.succeeded(party) }
        return true
    }
}
