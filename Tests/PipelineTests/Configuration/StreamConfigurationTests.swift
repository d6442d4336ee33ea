import Glibc
@testable import Pipeline
import SharedFrames
import Testing

/// One validated `[[stream]]`: its defaults, what each transport's source answers for it, and the values that
/// must never be printed.
@Suite struct StreamConfigurationTests {
    static let local = ListenAddress(transport: .tcp, host: "127.0.0.1", port: 5000)

    static func token() throws -> BearerToken { try #require(BearerToken("0123456789abcdefXYZ")) }

    @Test func aNewStreamHasTheDocumentedDefaults() {
        let stream = StreamConfiguration(name: "desk", source: .tcp(Self.local))
        #expect(stream.shmName == "streamrecv-desk" && stream.shmMode == 0o640 && stream.shmGroup == nil)
        #expect(stream.slots == 8 && stream.maxWidth == 3840 && stream.maxHeight == 2160 && stream.codec == nil)
        #expect(stream.secondSender == .refuse && stream.idleTimeout == 10 && stream.decoderLinger == 30)
        #expect(stream.lossPolicy == .conceal && stream.allow.isEmpty && stream.maxConnectionsPerSecond == 20)
        #expect(stream.ringSizeLimit == nil && stream.retiredKeys.isEmpty)
        // Twice a 4K 4:2:0 8-bit picture's raw size (3840 × 2160 × 1.5 × 2).
        #expect(stream.maxAccessUnitBytes == 3840 * 2160 * 3)
    }

    /// The largest access unit defaults to twice the largest raw 4:2:0 picture, but never under 1 MiB.
    @Test func theDefaultAccessUnitLimitFollowsTheSizeWithAFloorOfOneMebibyte() {
        var stream = StreamConfiguration(name: "a", source: .tcp(Self.local))
        stream.maxWidth = 1920
        stream.maxHeight = 1080
        #expect(stream.defaultMaxAccessUnitBytes == 1920 * 1080 * 3)
        stream.maxWidth = 320
        stream.maxHeight = 240
        #expect(stream.defaultMaxAccessUnitBytes == 1 << 20)
    }

    @Test func theRingIsMadeFromTheStreamsSettings() {
        var stream = StreamConfiguration(name: "cam", source: .tcp(Self.local))
        stream.shmName = "cams-1"
        stream.slots = 4
        stream.maxWidth = 640
        stream.maxHeight = 480
        stream.shmMode = 0o600
        let ring = stream.ring(group: 44)
        #expect(ring.shmName == "cams-1" && ring.streamName == "cam" && ring.slotCount == 4)
        #expect(ring.maxWidth == 640 && ring.maxHeight == 480 && ring.mode == 0o600 && ring.group == 44)
        #expect(ring.sizeLimit == FrameRingConfiguration.defaultSizeLimit(slotCount: 4, maxWidth: 640, maxHeight: 480))
        stream.ringSizeLimit = 1 << 20
        #expect(stream.ring().sizeLimit == 1 << 20 && stream.ring().group == nil)
    }

    /// Listen addresses print as URLs, an IPv6 host in brackets; a WHIP stream has no address of its own.
    @Test func listenAddressesPrintAsURLs() {
        #expect(Self.local.description == "tcp://127.0.0.1:5000")
        #expect(ListenAddress(transport: .srt, host: "::1", port: 9000).description == "srt://[::1]:9000")
        #expect(ListenAddress(transport: .rtp, host: "0.0.0.0", port: 5004).description == "rtp://0.0.0.0:5004")
        #expect(ListenAddress(transport: .whip, host: "ignored", port: 1).description == "whip")
        // Only TCP takes a TCP port: the others' ports are UDP ports, which do not collide with TCP's.
        let transports: [ListenAddress.Transport] = [.tcp, .udp, .rtp, .srt, .rtsp, .whip]
        #expect(transports.filter(\.isDatagram) == [.udp, .rtp, .srt, .rtsp, .whip])
    }

    /// Each source answers for its own transport and falls back to the defaults for settings it does not have.
    @Test func eachSourceGivesItsAddressAndReceiveSettings() throws {
        var rtpSettings = RTPSettings()
        rtpSettings.receiveBufferBytes = 2 << 20
        rtpSettings.reorderWindow = 32
        let address = ListenAddress(transport: .rtp, host: "::", port: 5004)
        let rtp = StreamConfiguration(name: "r", source: .rtp(address, rtpSettings))
        #expect(rtp.listen == address && rtp.rtp == rtpSettings && rtp.receiveBufferBytes == 2 << 20)
        #expect(rtp.endpoint == "rtp://[::]:5004" && rtp.srt == nil && rtp.rtsp == nil && rtp.webrtc == nil)

        let udp = StreamConfiguration(name: "u", source: .udp(ListenAddress(transport: .udp, host: "0.0.0.0", port: 6000), receiveBufferBytes: 1 << 20))
        #expect(udp.receiveBufferBytes == 1 << 20 && udp.rtp == RTPSettings())

        let tcp = StreamConfiguration(name: "t", source: .tcp(Self.local))
        #expect(tcp.receiveBufferBytes == StreamSource.defaultReceiveBufferBytes && tcp.endpoint == "tcp://127.0.0.1:5000")

        var srtSettings = SRTSettings()
        srtSettings.delivery = .timed
        let srt = StreamConfiguration(name: "s", source: .srt(ListenAddress(transport: .srt, host: "0.0.0.0", port: 9000), srtSettings))
        #expect(srt.srt == srtSettings && srt.receiveBufferBytes == StreamSource.defaultReceiveBufferBytes)

        var camera = RTSPSettings(camera: try RTSPSource.parse("rtsp://viewer:hunter22@cam.local:8554/live").get())
        camera.rtp.receiveBufferBytes = 3 << 20
        let pulled = StreamConfiguration(name: "p", source: .rtsp(camera))
        #expect(pulled.listen == ListenAddress(transport: .rtsp, host: "cam.local", port: 8554))
        #expect(pulled.rtsp?.path == "/live" && pulled.receiveBufferBytes == 3 << 20)
        #expect(pulled.endpoint == "source rtsp://cam.local:8554/live (credentials set)", "never the password")

        let whip = StreamConfiguration(name: "screen", source: .webrtc(WebRTCSettings(token: try Self.token(), tokenFile: "/t")))
        #expect(whip.listen.transport == .whip && whip.endpoint == "WHIP /whip/screen")
        #expect(whip.rtp.keyframeRequest == .pli && whip.rtp.rtcpMux, "a WHIP stream's own RTP settings, not the defaults")
        #expect(whip.receiveBufferBytes == StreamSource.defaultReceiveBufferBytes)
    }

    /// `second_sender` and `idle_timeout` together decide a second sender: the hold before a quiet sender is taken
    /// over from is the idle timeout up to 2 s.
    @Test func theAdmissionPolicyCarriesSecondSenderAndIdleTimeout() {
        var stream = StreamConfiguration(name: "a", source: .tcp(Self.local))
        stream.idleTimeout = 0.5
        #expect(stream.admissionPolicy.secondSender == .refuse && stream.admissionPolicy.deadlines.hold == 500_000_000)
        #expect(stream.admissionPolicy.decide(currentQuietFor: 400_000_000) == .refuse)
        #expect(stream.admissionPolicy.decide(currentQuietFor: 600_000_000) == .takeOver(staleFor: 600_000_000))
        stream.secondSender = .takeover
        #expect(stream.admissionPolicy.decide(currentQuietFor: 0) == .takeOver(staleFor: nil))
    }

    /// SRT accepts 10 to 79 bytes; a NUL would cut the passphrase where C reads it, other controls would reach a
    /// terminal. The text itself is never printed.
    @Test func srtPassphrasesAreBoundedFreeOfControlsAndNeverPrinted() throws {
        #expect(SRTPassphrase(String(repeating: "a", count: 9)) == nil)
        #expect(SRTPassphrase(String(repeating: "a", count: 10)) != nil)
        #expect(SRTPassphrase(String(repeating: "a", count: 79)) != nil)
        #expect(SRTPassphrase(String(repeating: "a", count: 80)) == nil)
        // Bytes, not characters: 40 two-byte characters are 80 bytes.
        #expect(SRTPassphrase(String(repeating: "é", count: 40)) == nil)
        #expect(SRTPassphrase(String(repeating: "é", count: 39)) != nil)
        for control in ["\u{0}", "\n", "\u{1b}", "\u{7f}", "\u{85}", "\u{9f}"] {
            #expect(SRTPassphrase("secret-part" + control + "rest") == nil, "\(control.unicodeScalars.first!.value)")
        }
        #expect(SRTPassphrase("tab\tinside-it") == nil, "a tab is a control character too")
        #expect(SRTPassphrase("grün und \u{a0}breit") != nil, "from U+00A0 on, characters are allowed")

        let passphrase = try #require(SRTPassphrase("correct horse battery"))
        var settings = SRTSettings()
        settings.passphrase = passphrase
        let printed = "\(passphrase) \(String(reflecting: passphrase)) \(settings) \(String(reflecting: settings))"
        #expect(!printed.contains("horse"), "\(printed)")
        #expect(passphrase.description == "(set)")
    }

    /// Line places are not part of what a stream is: a reload that only moves lines changes no stream.
    @Test func keyPlacesFallBackToTheTableAndNeverMakeStreamsDiffer() {
        let places = KeyPlaces(table: 7, keys: ["slots": 9])
        #expect(places.line(of: "slots") == 9 && places.line(of: "hwaccel") == 7)
        #expect(KeyPlaces().line(of: "slots") == nil)
        var moved = StreamConfiguration(name: "a", source: .tcp(Self.local))
        let original = moved
        moved.lines = places
        #expect(moved == original)
        moved.slots = 4
        #expect(moved != original, "but a real change still does")
    }

    /// A file that holds a secret must not be readable by everyone: an SRT passphrase or an RTSP password written
    /// in it; a password read from its own file is not in it.
    @Test func theFileHoldsSecretsOnlyWhenAPasswordIsWrittenInIt() throws {
        var configuration = DaemonConfiguration()
        configuration.streams = [StreamConfiguration(name: "a", source: .tcp(Self.local))]
        #expect(!configuration.holdsSecrets)

        var srt = SRTSettings()
        srt.passphrase = SRTPassphrase("0123456789")
        configuration.streams.append(StreamConfiguration(name: "s", source: .srt(ListenAddress(transport: .srt, host: "::", port: 9000), srt)))
        #expect(configuration.holdsSecrets)

        var camera = try RTSPSource.parse("rtsp://u:pw@cam/x").get()
        configuration.streams = [StreamConfiguration(name: "p", source: .rtsp(RTSPSettings(camera: camera)))]
        #expect(configuration.holdsSecrets)
        camera.passwordFile = "/etc/streamrecvd/cam.password"
        configuration.streams = [StreamConfiguration(name: "p", source: .rtsp(RTSPSettings(camera: camera)))]
        #expect(!configuration.holdsSecrets)
    }

    @Test func controlCharactersAreC0DeleteAndC1() {
        #expect(!"plain, ünïcödé and \u{a0}".containsControlCharacters)
        #expect("\u{0}".containsControlCharacters && "a\u{1f}".containsControlCharacters)
        #expect("\u{7f}".containsControlCharacters && "\u{80}".containsControlCharacters && "\u{9f}".containsControlCharacters)
        #expect(!" ".containsControlCharacters, "U+0020 is the first character that is not one")
    }
}

