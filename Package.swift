// swift-tools-version:6.1
import PackageDescription

// Module map: see docs/architecture.md. `Bitstream` is pure (no I/O, no C, no logging) and fuzzed;
// later modules (CFFmpeg, Decoding, CFrameRing, SharedFrames, Ingest, CSystemd, Pipeline, streamrecvd)
// slot in beside it as their issues land.
let package = Package(
    name: "streamrecvd",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "Bitstream", targets: ["Bitstream"]),
        .executable(name: "streamrecvctl", targets: ["streamrecvctl"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    ],
    targets: [
        .target(name: "Bitstream"),
        .executableTarget(
            name: "streamrecvctl",
            dependencies: [
                "Bitstream",
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
        .target(name: "StreamrecvTestSupport", path: "Tests/Support"),
        .testTarget(name: "BitstreamTests", dependencies: ["Bitstream", "StreamrecvTestSupport"]),
        .testTarget(
            name: "StreamrecvctlTests",
            dependencies: ["Bitstream", "streamrecvctl", "StreamrecvTestSupport"]
        ),
    ]
)
