// swift-tools-version:6.2
import PackageDescription

// Module map: see docs/architecture.md. `Bitstream` is pure (no I/O, no C, no logging) and fuzzed. C code and
// system libraries sit in targets of their own (CFFmpeg, CAVFormat, CSwscale, CSRT, CSystemd, CFrameRing,
// CMappingGuard, CAllocationCounter). `Pipeline` is the daemon: its network ingest (Sources/Pipeline/Ingest) and
// its decode thread (Sources/Pipeline/Decode) are folders inside that one target, not targets of their own.
// `streamrecvd` and `streamrecvctl` are thin executables over the library targets.
let package = Package(
    name: "streamrecvd",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "Bitstream", targets: ["Bitstream"]),
        // For consumers written in Swift: FrameStream (async sequence), FrameRingReader (zero-copy withFrame).
        .library(name: "SharedFrames", targets: ["SharedFrames"]),
        .executable(name: "streamrecvctl", targets: ["streamrecvctl"]),
        .executable(name: "streamrecvd", targets: ["streamrecvd"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        .target(name: "Bitstream"),
        .target(name: "FrameFormats"),
        // The shared-memory ABI: one C header (include/streamrecv_shm.h) with inline helpers.
        .target(name: "CFrameRing"),
        // A SIGBUS handler that turns a shrunk shm object under a mapping into zero pages and a flag.
        .target(name: "CMappingGuard"),
        .target(name: "SharedFrames", dependencies: ["CFrameRing", "CMappingGuard", "FrameFormats"]),
        .systemLibrary(
            name: "CFFmpeg", pkgConfig: "libavcodec",
            providers: [.apt(["libavcodec-dev", "libavutil-dev"])]
        ),
        .target(
            name: "Decoding",
            dependencies: ["CFFmpeg", "CCUDAStream", "Bitstream", "FrameFormats", .product(name: "Logging", package: "swift-log")]
        ),
        .systemLibrary(name: "CSwscale", pkgConfig: "libswscale", providers: [.apt(["libswscale-dev"])]),
        // Frames out of the ring into other formats (PNG snapshots), for streamrecvctl.
        .target(name: "FrameExport", dependencies: ["CFFmpeg", "CSwscale", "FrameFormats"]),
        .systemLibrary(name: "CAVFormat", pkgConfig: "libavformat", providers: [.apt(["libavformat-dev"])]),
        // `streamrecvctl send`: files demuxed and sent as a live encoder would.
        .target(name: "StreamSending", dependencies: ["CAVFormat"]),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        // WebRTC's security layer: DTLS 1.2 over memory BIOs, the self-signed identity and HMAC-SHA1 (OpenSSL 3),
        // SRTP/SRTCP (libsrtp2), and their Swift owners.
        .target(name: "CDTLS", linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]),
        .systemLibrary(name: "CSRTP", pkgConfig: "libsrtp2", providers: [.apt(["libsrtp2-dev"])]),
        .target(name: "MediaSecurity", dependencies: ["CDTLS", "CSRTP"]),
        // The local user behind a loopback connection (the kernel's sock_diag), for the HTTP endpoints' fair shares.
        .target(name: "CSocketOwner"),
        // A CUDA stream of its own for each hardware decoder (libcuda loaded at run time, as FFmpeg loads it).
        .target(name: "CCUDAStream", linkerSettings: [.linkedLibrary("avutil"), .linkedLibrary("dl")]),
        // srt:// listeners (the GnuTLS build of libsrt: the one Debian's FFmpeg links).
        .systemLibrary(name: "CSRT", pkgConfig: "srt", providers: [.apt(["libsrt-gnutls-dev"])]),
        .target(
            name: "Pipeline",
            dependencies: [
                "Bitstream", "CFFmpeg", "Decoding", "FrameExport", "FrameFormats", "SharedFrames", "CSystemd", "CSRT", "CSocketOwner", "MediaSecurity",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "TOMLKit", package: "TOMLKit"),
            ],
            // The share page is a file of its own, compiled into the daemon as bytes (`PackageResources`): an
            // installed daemon serves it with nothing beside the binary.
            resources: [.embedInCode("WebRTC/SharePage.html")],
            // TOMLKit imports Foundation; without this its extensions (String.contains(_:), range(of:)) were
            // visible here, and a few calls linked all of Foundation and ICU's data (34 MB) into the daemon.
            swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")]
        ),
        .executableTarget(
            name: "streamrecvd",
            dependencies: [
                "Pipeline",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")]
        ),
        .executableTarget(
            name: "streamrecvctl",
            dependencies: [
                "Bitstream", "FrameFormats", "SharedFrames", "FrameExport", "StreamSending",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Benchmarks are executables, never tests: they print ratios and are run by `make bench`.
        .target(name: "CAllocationCounter"),
        .executableTarget(
            name: "BitstreamBenchmark",
            dependencies: ["Bitstream", "CAllocationCounter"]
        ),
        // Helpers shared by the test targets: bit writer, seeded generator, corpus and FFmpeg access.
        .target(
            name: "StreamrecvTestSupport",
            dependencies: ["Bitstream", .product(name: "Logging", package: "swift-log")],
            path: "Tests/Support"
        ),
        .testTarget(name: "BitstreamTests", dependencies: ["Bitstream", "StreamrecvTestSupport"]),
        .testTarget(
            name: "DecodingTests",
            dependencies: ["Decoding", "CCUDAStream", "Bitstream", "FrameFormats", "StreamrecvTestSupport"]
        ),
        .testTarget(
            name: "PipelineTests",
            dependencies: [
                "Pipeline", "Bitstream", "Decoding", "SharedFrames", "FrameFormats", "StreamrecvTestSupport", "MediaSecurity",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .testTarget(name: "FrameFormatsTests", dependencies: ["FrameFormats"]),
        .testTarget(name: "MediaSecurityTests", dependencies: ["MediaSecurity", "Bitstream"]),
        .testTarget(
            name: "SharedFramesTests",
            dependencies: ["SharedFrames", "CFrameRing", "FrameFormats", "StreamrecvTestSupport"]
        ),
        .testTarget(
            name: "StreamrecvdTests",
            dependencies: ["Bitstream", "SharedFrames", "FrameFormats", "Decoding", "MediaSecurity", "streamrecvd", "streamrecvctl", "StreamrecvTestSupport"]
        ),
        .testTarget(
            name: "StreamrecvctlTests",
            dependencies: ["Bitstream", "SharedFrames", "FrameFormats", "streamrecvctl", "StreamrecvTestSupport"]
        ),
    ]
)

// No compiler warning in the project's own code, in debug and release builds alike: a warning in any target of
// ours (tests included) fails the build, so `make check` keeps it so. Dependencies are not ours to judge.
for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + [.treatAllWarnings(as: .error)]
    target.cSettings = (target.cSettings ?? []) + [.treatAllWarnings(as: .error)]
}
