// swift-tools-version:6.1
// libFuzzer targets for the pure Bitstream module (issue: never fall over). Build and run with scripts/fuzz.sh:
//   swift build -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library
// Each target's `<Target>_main` hands control to libFuzzer's driver (SwiftPM links executables through that
// symbol), and `LLVMFuzzerTestOneInput` feeds one input to the parsers.
import PackageDescription

let bitstream = Target.Dependency.product(name: "Bitstream", package: "streamrecvd")

let package = Package(
    name: "streamrecvd-fuzz",
    dependencies: [.package(name: "streamrecvd", path: "..")],
    targets: [
        .target(name: "FuzzSupport"),
        .executableTarget(name: "FuzzAnnexB", dependencies: [bitstream, "FuzzSupport"]),
        .executableTarget(name: "FuzzH264ParameterSets", dependencies: [bitstream, "FuzzSupport"]),
        .executableTarget(name: "FuzzH265ParameterSets", dependencies: [bitstream, "FuzzSupport"]),
        .executableTarget(name: "FuzzSEI", dependencies: [bitstream, "FuzzSupport"]),
        .executableTarget(name: "FuzzRTP", dependencies: [bitstream, "FuzzSupport"]),
        .executableTarget(name: "FuzzTransportStream", dependencies: [bitstream, "FuzzSupport"]),
        .executableTarget(name: "FuzzRTSP", dependencies: [bitstream, "FuzzSupport"]),
        .executableTarget(name: "FuzzSTUN", dependencies: [bitstream, "FuzzSupport"]),
        .executableTarget(name: "FuzzRTCP", dependencies: [bitstream, "FuzzSupport"]),
        .executableTarget(name: "FuzzWebRTCOffer", dependencies: [bitstream, "FuzzSupport"]),
    ]
)
