import FrameFormats
import Glibc
import MediaSecurity
import SharedFrames

/// What `streamrecvd --check-config` says beyond the file's syntax: each stream's ring sizes, and whether
/// /dev/shm can hold them. Rings are sized to the frames actually decoded, up to `ring_size_limit`.
public struct ConfigurationReport: Sendable {
    public var lines: [String] = []
    /// Problems that make a stream unable to work here: --check-config fails.
    public var errors: [Problem] = []

    /// An error, with the line of the key it is about when the file has it.
    public struct Problem: Sendable, CustomStringConvertible {
        public var line: Int?
        public var message: String

        /// "12: stream cam: …" (the caller puts the file's path before it), or the message alone.
        public var description: String { line.map { "\($0): \(message)" } ?? message }
    }
    public var warnings: [String] = []

    /// - Parameter shm: the size of the file system under /dev/shm and what is free on it, in bytes (nil: unknown).
    public init(_ configuration: DaemonConfiguration, shm: (total: Int, free: Int)? = ConfigurationReport.shmSpace()) {
        var limits = 0
        warnings = configuration.warnings
        for stream in configuration.streams {
            let ring = stream.ring()
            let largest = FrameLayout(format: .nv12, width: stream.maxWidth, height: stream.maxHeight).byteCount
            let limit = ring.sizeLimit
            limits += limit
            let endpoint = stream.webrtc != nil ? configuration.webrtc.map { "WHIP \($0.url(of: stream.name))" } ?? stream.endpoint : stream.endpoint
            var line = "stream \(stream.name): \(endpoint), ring /dev/shm/\(stream.shmName), \(stream.slots) slots"
            line += ", at most \(Self.size(limit)) (ring_size_limit)"
            if let atLargest = ring.ringSize(frameBytes: largest) {
                line += "; \(stream.maxWidth)x\(stream.maxHeight) 4:2:0 8-bit takes \(Self.size(atLargest.bytes)) in \(atLargest.slots) slots"
            } else {
                errors.append(Problem(line: stream.lines.line(of: stream.ringSizeLimit == nil ? "max_width" : "ring_size_limit"),
                                      message: "stream \(stream.name): ring_size_limit (\(Self.size(limit))) cannot hold two \(stream.maxWidth)x\(stream.maxHeight) 4:2:0 frames"))
            }
            for (width, height) in [(640, 360), (1920, 1080)] where width <= stream.maxWidth && height <= stream.maxHeight {
                let bytes = FrameLayout(format: .nv12, width: width, height: height).byteCount
                if let size = ring.ringSize(frameBytes: bytes) { line += ", \(height)p \(Self.size(size.bytes))" }
            }
            lines.append(line)
            if !stream.retiredKeys.isEmpty { warnings.append(Self.retiredKeysWarning(stream)) }
            guard let shm else { continue }
            let minimum = Self.twoSlots(of: largest, ring: ring)
            if minimum > shm.total {
                errors.append(Problem(line: stream.lines.line(of: "max_width"),
                                      message: "stream \(stream.name): two \(stream.maxWidth)x\(stream.maxHeight) frames (\(Self.size(minimum))) do not fit in /dev/shm (\(Self.size(shm.total))); lower max_width/max_height or enlarge /dev/shm"))
            }
        }
        if let tls = configuration.webrtc?.tls, let certificate = try? TLSServerCertificate(certificatePath: tls.certificate, keyPath: tls.key) {
            lines.append("[webrtc] HTTPS certificate \(tls.certificate): \(certificate.subject), \(certificate.secondsUntilExpiry / 86400) days left")
        }
        if let shm, limits > shm.free {
            warnings.append("the rings may grow to \(Self.size(limits)) in all (ring_size_limit), more than /dev/shm has free (\(Self.size(shm.free))): a stream whose ring cannot grow drops frames and says so")
        }
    }

    /// Keys that no longer do anything: said at --check-config and when the stream starts.
    static func retiredKeysWarning(_ stream: StreamConfiguration) -> String {
        "stream \(stream.name): \(stream.retiredKeys.joined(separator: ", ")) no longer used and ignored: an access unit closes when its end is known (the next one's first bytes, the RTP marker, the end of the input), never on a pause (docs/latency.md)"
    }

    /// The size and free space of the file system under /dev/shm.
    public static func shmSpace() -> (total: Int, free: Int)? {
        var info = statvfs()
        guard statvfs("/dev/shm", &info) == 0 else { return nil }
        return (Int(info.f_blocks) * Int(info.f_frsize), Int(info.f_bavail) * Int(info.f_frsize))
    }

    /// The smallest ring that holds frames of `frameBytes`: two slots.
    private static func twoSlots(of frameBytes: Int, ring: FrameRingConfiguration) -> Int {
        var two = ring
        two.slotCount = 2
        two.sizeLimit = .max
        return two.ringSize(frameBytes: frameBytes)?.bytes ?? .max
    }

    static func size(_ bytes: Int) -> String {
        bytes >= 1 << 30 ? String(Double(bytes) / Double(1 << 30), decimals: 1) + " GiB"
            : bytes >= 1 << 20 ? String(Double(bytes) / Double(1 << 20), decimals: 1) + " MiB" : "\(bytes >> 10) KiB"
    }
}


/// The objects under the configured ring names.
public enum RingNames {
    /// Removes each object under a configured ring name that `owner` did not create (a local user who got there
    /// first); returns a line for each, saying what it was. Run as root before the daemon starts as `owner`.
    public static func removeForeign(_ streams: [StreamConfiguration], owner: uid_t) -> [String] {
        var removed: [String] = []
        for stream in streams {
            let path = "/dev/shm/" + stream.shmName
            var status = stat()
            guard lstat(path, &status) == 0, status.st_uid != owner else { continue }
            let what = "owner uid \(status.st_uid), mode \(String(status.st_mode & 0o7777, radix: 8)), \(status.st_size) bytes"
            if unlink(path) == 0 {
                removed.append("removed \(path) (\(what)): not created by uid \(owner), never adopted")
            } else {
                removed.append("cannot remove \(path) (\(what)): \(String(cString: strerror(errno)))")
            }
        }
        return removed
    }
}
