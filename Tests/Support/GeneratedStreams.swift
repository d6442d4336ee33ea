import Foundation

/// Streams encoded at test time with FFmpeg's libx264/libx265 (never committed).
public enum GeneratedStreams {
    /// Encodes `seconds` of the testsrc2 pattern to a raw Annex B file and returns its path.
    /// - Parameters:
    ///   - codec: "h264" (libx264) or "h265" (libx265).
    ///   - encoderParameters: `-x264-params` / `-x265-params` text.
    public static func encode(
        codec: String, size: String, frames: Int, pixelFormat: String = "yuv420p",
        encoderParameters: String = "", in directory: URL, name: String
    ) throws -> URL {
        let output = directory.appendingPathComponent(name)
        let encoder = codec == "h264" ? "libx264" : "libx265"
        var parameters = encoderParameters
        if codec == "h265" { parameters = parameters.isEmpty ? "log-level=error" : "log-level=error:" + parameters }
        var arguments = [
            "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=\(size):rate=25",
            "-frames:v", String(frames), "-pix_fmt", pixelFormat, "-c:v", encoder,
        ]
        if !parameters.isEmpty { arguments += ["-\(codec == "h264" ? "x264" : "x265")-params", parameters] }
        arguments += ["-f", codec == "h264" ? "h264" : "hevc", output.path]
        try runChecked("ffmpeg", arguments)
        return output
    }
}
