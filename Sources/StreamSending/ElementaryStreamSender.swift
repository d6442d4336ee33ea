import CAVFormat
import Glibc

/// Why `send` stopped.
public struct SendError: Error, CustomStringConvertible {
    public var description: String
}

/// How fast `send` goes.
public enum SendRate: Sendable, Equatable {
    /// At the source's own timing (its decoding timestamps), as a live encoder would.
    case realtime
    /// As fast as the destination accepts.
    case maximum
    /// A fixed number of access units per second.
    case framesPerSecond(Double)
}

/// Sends the video of a file as a live sender would: demuxed with libavformat (MP4, MOV, MKV, or an Annex B
/// .h264/.h265 file), converted from AVCC/HVCC to Annex B with the parameter sets in front of every keyframe
/// (libavcodec's h264_mp4toannexb / hevc_mp4toannexb), paced, and written as raw Annex B to tcp:// or udp:// (or a
/// file), or as RTP (RFC 6184/7798, libavformat's packetizer, payload type 96) to rtp://.
public final class ElementaryStreamSender {
    public struct Summary: Sendable {
        public var accessUnits = 0
        public var bytes = 0
        public var codec = ""
    }

    private let source: String
    private let destination: String
    private let rate: SendRate
    private let loops: Int
    private let duration: Double?

    /// - Parameters:
    ///   - destination: tcp://HOST:PORT, udp://HOST:PORT, rtp://HOST:PORT, or a file path (Annex B).
    ///   - loops: how many times the source is sent (0: forever).
    ///   - duration: stop after this many seconds (at an access unit boundary).
    public init(source: String, destination: String, rate: SendRate, loops: Int = 1, duration: Double? = nil) {
        self.source = source
        self.destination = destination
        self.rate = rate
        self.loops = loops
        self.duration = duration
    }

    public func run() throws(SendError) -> Summary {
        var summary = Summary()
        var input = try DemuxedVideo(path: source)
        summary.codec = input.codecName
        // A raw file's packet times are libavformat's guess (25 per second): its SPS frame rate paces it instead.
        let rate = self.rate == .realtime ? input.rawFrameRate.map(SendRate.framesPerSecond) ?? .realtime : self.rate
        let output = try AnnexBOutput(destination: destination, codec: input.codecID, width: input.width, height: input.height)
        defer { output.close() }
        var pass = 0
        var clockStart = MonotonicClock.seconds()
        var timelineStart: Double?
        var nextDeadline = clockStart
        let end = duration.map { clockStart + $0 }
        // Timestamps keep growing across passes (`--loop`): each pass is shifted to start one frame after the
        // previous one ended, so muxers and receivers see one continuous stream.
        var passOffset: Int64 = 0
        var passEnd: Int64 = 0
        var lastDTS: Int64?
        var frameDuration: Int64 = 1
        sending: while loops == 0 || pass < loops {
            if pass > 0 {
                // Opened again rather than seeked: libavformat cannot seek in a raw Annex B file.
                input = try DemuxedVideo(path: source)
                passOffset = passEnd + frameDuration
                lastDTS = nil
                timelineStart = nil
                clockStart = MonotonicClock.seconds()
            }
            while var unit = try input.nextAccessUnit() {
                if let end, MonotonicClock.seconds() >= end { break sending }
                if let dts = unit.dts {
                    if let lastDTS, dts > lastDTS { frameDuration = dts - lastDTS }
                    lastDTS = dts
                }
                unit.pts = unit.pts.map { $0 + passOffset }
                unit.dts = unit.dts.map { $0 + passOffset }
                passEnd = max(passEnd, unit.pts ?? 0, unit.dts ?? 0)
                switch rate {
                case .maximum:
                    break
                case .realtime:
                    if let seconds = unit.decodingSeconds {
                        let start = timelineStart ?? seconds
                        timelineStart = start
                        sleep(until: clockStart + (seconds - start))
                    }
                case .framesPerSecond(let fps):
                    sleep(until: nextDeadline)
                    nextDeadline = max(nextDeadline + 1 / fps, MonotonicClock.seconds() - 1)
                }
                try output.write(unit)
                summary.accessUnits += 1
                summary.bytes += unit.data.count
            }
            pass += 1
        }
        try output.finish()
        return summary
    }

    private func sleep(until deadline: Double) {
        let wait = deadline - MonotonicClock.seconds()
        if wait > 0 { usleep(UInt32(min(wait, 10) * 1e6)) }
    }
}

enum MonotonicClock {
    static func seconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}

func describe(_ error: Int32) -> String {
    var buffer = [CChar](repeating: 0, count: 128)
    return String(cString: streamrecv_avf_err2str(error, &buffer, buffer.count))
}
