import Bitstream
import CFFmpeg
import Glibc

/// Hardware decoders libavcodec can drive on Linux, in the order `hwaccel = "auto"` tries them.
public enum HardwareAccelerator: String, CaseIterable, Sendable {
    case vaapi, cuda, vdpau, qsv, drm

    var deviceType: AVHWDeviceType {
        switch self {
        case .vaapi: return AV_HWDEVICE_TYPE_VAAPI
        case .cuda: return AV_HWDEVICE_TYPE_CUDA
        case .vdpau: return AV_HWDEVICE_TYPE_VDPAU
        case .qsv: return AV_HWDEVICE_TYPE_QSV
        case .drm: return AV_HWDEVICE_TYPE_DRM
        }
    }

    /// What libavutil opens when no device is named: the text for log lines and errors.
    public var defaultDevice: String {
        switch self {
        case .vaapi: return "/dev/dri/renderD128"
        case .cuda: return "CUDA device 0"
        case .vdpau: return "the X display \(getenv("DISPLAY").map { String(cString: $0) } ?? ":0")"
        case .qsv: return "/dev/dri/renderD128 (through VAAPI)"
        case .drm: return "/dev/dri/card0"
        }
    }
}

/// The `hwaccel` setting.
public enum HardwarePreference: Sendable, Equatable, CustomStringConvertible {
    case auto
    case none
    case only(HardwareAccelerator)

    public init?(configValue: String) {
        switch configValue {
        case "auto": self = .auto
        case "none": self = .none
        default:
            guard let accelerator = HardwareAccelerator(rawValue: configValue) else { return nil }
            self = .only(accelerator)
        }
    }

    public var description: String {
        switch self {
        case .auto: return "auto"
        case .none: return "none"
        case .only(let accelerator): return accelerator.rawValue
        }
    }
}

/// An opened hardware device. Owns its `AVBufferRef` (released in deinit).
// @unchecked: immutable after init. Its one pointer is an `AVBufferRef` whose count libavutil changes atomically,
// and decoders only read the device context behind it (as the FFmpeg CLI's decoders share one).
public final class HardwareDevice: @unchecked Sendable {
    public let accelerator: HardwareAccelerator
    /// Nil only for a simulated device made by a test probe.
    let context: UnsafeMutablePointer<AVBufferRef>?
    /// The pixel format the decoder's hw config produces (`AV_PIX_FMT_VAAPI`, …).
    let pixelFormat: AVPixelFormat

    /// A simulated device whose (software) frames count as the device's own: the decoder then behaves as on a
    /// working device, until `injectedFailureAfterFrames`.
    let simulatesWorkingDevice: Bool
    /// The device "fails" after this many frames: the decoder falls back to software as if it had been lost
    /// (tests, and the GPU kit on a real device through `STREAMRECVD_INJECT_HARDWARE_FAILURE_AFTER_FRAMES`).
    public let injectedFailureAfterFrames: Int?

    init(accelerator: HardwareAccelerator, context: UnsafeMutablePointer<AVBufferRef>?, pixelFormat: AVPixelFormat,
         simulatesWorkingDevice: Bool = false, injectedFailureAfterFrames: Int? = nil) {
        self.accelerator = accelerator
        self.context = context
        self.pixelFormat = pixelFormat
        self.simulatesWorkingDevice = simulatesWorkingDevice
        self.injectedFailureAfterFrames = injectedFailureAfterFrames
    }

    /// A device with no FFmpeg context, for testing the selection logic with an injected probe. By default its
    /// first frame comes back in system memory (an unusable device); `working` makes its frames count as its own.
    public static func simulated(_ accelerator: HardwareAccelerator, working: Bool = false, failingAfterFrames: Int? = nil) -> HardwareDevice {
        HardwareDevice(accelerator: accelerator, context: nil, pixelFormat: AV_PIX_FMT_NONE, simulatesWorkingDevice: working,
                       injectedFailureAfterFrames: failingAfterFrames)
    }

    public var isSimulated: Bool { context == nil }

    deinit {
        var reference = context
        if reference != nil { av_buffer_unref(&reference) }
    }
}

/// Looks for hardware. The real one asks libavcodec; tests inject their own.
public protocol HardwareDeviceProbing: Sendable {
    /// Whether libavcodec's decoder for `codec` can use `accelerator` through a device context.
    func codecSupports(_ accelerator: HardwareAccelerator, codec: VideoCodec) -> Bool
    /// Opens the default device of `accelerator`, or says why it could not.
    func openDevice(_ accelerator: HardwareAccelerator, codec: VideoCodec) -> Result<HardwareDevice, HardwareProbeFailure>
    /// A decoder gave `device` up as lost: a probe that shares devices opens a fresh one next time.
    func deviceLost(_ device: HardwareDevice)
}

extension HardwareDeviceProbing {
    public func deviceLost(_ device: HardwareDevice) {}
}

public struct HardwareProbeFailure: Error, Sendable, Equatable {
    public var reason: String
    public init(reason: String) { self.reason = reason }
}

/// What happened to one accelerator while selecting.
public struct HardwareAttempt: Sendable, Equatable, CustomStringConvertible {
    public enum Outcome: Sendable, Equatable {
        case chosen
        case unsupportedByCodec
        case failed(String)
        case notTried
    }
    public var accelerator: HardwareAccelerator
    public var outcome: Outcome

    public var description: String {
        switch outcome {
        case .chosen: return "\(accelerator.rawValue): chosen"
        case .unsupportedByCodec: return "\(accelerator.rawValue): libavcodec's decoder has no \(accelerator.rawValue) support"
        case .failed(let reason): return "\(accelerator.rawValue): \(reason)"
        case .notTried: return "\(accelerator.rawValue): not tried"
        }
    }
}

/// The decoding path chosen for a stream, with why the others lost: one log line.
public struct HardwareSelection: Sendable {
    public var device: HardwareDevice?
    public var attempts: [HardwareAttempt]
    public var preference: HardwarePreference

    public var summary: String {
        let path = device.map { "hardware decoding with \($0.accelerator.rawValue) (\($0.accelerator.defaultDevice))" }
            ?? "software decoding"
        let others = attempts.filter { $0.outcome != .chosen }
        let reasons = others.isEmpty ? "" : "; " + others.map(\.description).joined(separator: "; ")
        return "\(path) (hwaccel = \(preference))\(reasons)"
    }

    /// Runs the probe for `preference`. `auto` falls back to software; a named accelerator is strict.
    public static func select(
        _ preference: HardwarePreference, codec: VideoCodec, probe: HardwareDeviceProbing
    ) throws(DecoderError) -> HardwareSelection {
        switch preference {
        case .none:
            return HardwareSelection(device: nil, attempts: [], preference: preference)
        case .only(let accelerator):
            guard probe.codecSupports(accelerator, codec: codec) else {
                throw .hardwareUnavailable(
                    accelerator: accelerator.rawValue, device: accelerator.defaultDevice,
                    reason: "libavcodec's \(codec.rawValue) decoder has no \(accelerator.rawValue) support")
            }
            switch probe.openDevice(accelerator, codec: codec) {
            case .success(let device):
                return HardwareSelection(
                    device: device, attempts: [HardwareAttempt(accelerator: accelerator, outcome: .chosen)],
                    preference: preference)
            case .failure(let failure):
                throw .hardwareUnavailable(
                    accelerator: accelerator.rawValue, device: accelerator.defaultDevice, reason: failure.reason)
            }
        case .auto:
            var attempts: [HardwareAttempt] = []
            for accelerator in HardwareAccelerator.allCases {
                guard probe.codecSupports(accelerator, codec: codec) else {
                    attempts.append(HardwareAttempt(accelerator: accelerator, outcome: .unsupportedByCodec))
                    continue
                }
                switch probe.openDevice(accelerator, codec: codec) {
                case .success(let device):
                    attempts.append(HardwareAttempt(accelerator: accelerator, outcome: .chosen))
                    return HardwareSelection(device: device, attempts: attempts, preference: preference)
                case .failure(let failure):
                    attempts.append(HardwareAttempt(accelerator: accelerator, outcome: .failed(failure.reason)))
                }
            }
            return HardwareSelection(device: nil, attempts: attempts, preference: preference)
        }
    }
}

/// The probe that asks libavcodec and libavutil: `avcodec_get_hw_config` for support, `av_hwdevice_ctx_create`
/// to open the default device.
public struct FFmpegHardwareProbe: HardwareDeviceProbing {
    public init() {}

    func hardwarePixelFormat(_ accelerator: HardwareAccelerator, codec: VideoCodec) -> AVPixelFormat? {
        guard let decoder = avcodec_find_decoder(codec.codecID) else { return nil }
        var index: Int32 = 0
        while let config = avcodec_get_hw_config(decoder, index) {
            if config.pointee.device_type == accelerator.deviceType
                && config.pointee.methods & Int32(AV_CODEC_HW_CONFIG_METHOD_HW_DEVICE_CTX) != 0 {
                return config.pointee.pix_fmt
            }
            index += 1
        }
        return nil
    }

    public func codecSupports(_ accelerator: HardwareAccelerator, codec: VideoCodec) -> Bool {
        hardwarePixelFormat(accelerator, codec: codec) != nil
    }

    public func openDevice(_ accelerator: HardwareAccelerator, codec: VideoCodec) -> Result<HardwareDevice, HardwareProbeFailure> {
        guard let pixelFormat = hardwarePixelFormat(accelerator, codec: codec) else {
            return .failure(HardwareProbeFailure(reason: "not supported by the \(codec.rawValue) decoder"))
        }
        // One context per accelerator for the whole process (SharedHardwareDevices): opened by the first decoder.
        let shared = SharedHardwareDevices.reference(accelerator) {
            var context: UnsafeMutablePointer<AVBufferRef>?
            // libavutil logs its own attempts at warning level; keep our one summary line instead. Not by the
            // process's log level: two streams probing at once left it at QUIET, and decoders' errors went uncounted.
            let result = FFmpegLog.quietly { av_hwdevice_ctx_create(&context, accelerator.deviceType, nil, nil, 0) }
            guard result >= 0, let context else {
                return .failure(HardwareProbeFailure(reason: "cannot open \(accelerator.defaultDevice): \(ffmpegErrorText(result))"))
            }
            return .success(context)
        }
        return shared.map {
            HardwareDevice(accelerator: accelerator, context: $0, pixelFormat: pixelFormat,
                           injectedFailureAfterFrames: Self.injectedFailureAfterFrames)
        }
    }

    /// The next decoder opens a fresh context: this one is taken for lost.
    public func deviceLost(_ device: HardwareDevice) {
        guard let context = device.context else { return }
        SharedHardwareDevices.drop(device.accelerator, context: context)
    }

    /// `STREAMRECVD_INJECT_HARDWARE_FAILURE_AFTER_FRAMES=N`: every hardware decoder "loses" its device after N
    /// frames (a test of the fallback on a real device: docs/decoding.md). Unset in production.
    static var injectedFailureAfterFrames: Int? {
        getenv("STREAMRECVD_INJECT_HARDWARE_FAILURE_AFTER_FRAMES").flatMap { Int(String(cString: $0)) }.flatMap { $0 > 0 ? $0 : nil }
    }
}

extension VideoCodec {
    var codecID: AVCodecID {
        switch self {
        case .h264: return AV_CODEC_ID_H264
        case .h265: return AV_CODEC_ID_HEVC
        }
    }
}
