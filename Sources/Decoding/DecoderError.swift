import CFFmpeg

/// Why a decoder could not be created or used. Carries FFmpeg's own text where FFmpeg said something.
public enum DecoderError: Error, Sendable, Equatable, CustomStringConvertible {
    case codecNotFound(String)
    case allocationFailed(String)
    case openFailed(String)
    /// A named hwaccel could not be used; `device` names what was tried.
    case hardwareUnavailable(accelerator: String, device: String, reason: String)
    case sendFailed(String)
    case receiveFailed(String)
    case unsupportedPixelFormat(String)
    case transferFailed(String)

    public var description: String {
        switch self {
        case .codecNotFound(let text): return "no libavcodec decoder for \(text)"
        case .allocationFailed(let text): return "allocation failed: \(text)"
        case .openFailed(let text): return "avcodec_open2 failed: \(text)"
        case .hardwareUnavailable(let accelerator, let device, let reason):
            return "hwaccel \(accelerator) unavailable on \(device): \(reason)"
        case .sendFailed(let text): return "avcodec_send_packet failed: \(text)"
        case .receiveFailed(let text): return "avcodec_receive_frame failed: \(text)"
        case .unsupportedPixelFormat(let name): return "pixel format \(name) is not supported for publishing"
        case .transferFailed(let text): return "GPU frame download failed: \(text)"
        }
    }
}

/// FFmpeg's description of an error code (`av_strerror`).
func ffmpegErrorText(_ code: Int32) -> String {
    var buffer = [CChar](repeating: 0, count: Int(streamrecv_error_max_string_size()))
    return buffer.withUnsafeMutableBufferPointer { pointer in
        String(cString: streamrecv_av_err2str(code, pointer.baseAddress, pointer.count))
    }
}
