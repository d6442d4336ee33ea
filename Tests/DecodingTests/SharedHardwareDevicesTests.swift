import Bitstream
import CFFmpeg
@testable import Decoding
import Dispatch
import Glibc
import StreamrecvTestSupport
import Synchronization
import Testing

/// One device context per accelerator for the whole process (the H200 run: 48 contexts took 14 s to open).
/// `.drm` stands in for a real accelerator: libavcodec's native H.264/H.265 decoders have no DRM config, so no real
/// probe of any other test ever opens it.
@Suite(.serialized) struct SharedHardwareDevicesTests {
    /// An "opened device": a real `AVBufferRef`, refcounted as libavutil's device contexts are.
    static func fakeContext() -> UnsafeMutablePointer<AVBufferRef> { av_buffer_allocz(64)! }

    @Test func decodersStartingTogetherWaitForOneOpenAndShareIt() {
        SharedHardwareDevices.dropAll(.drm)
        let opens = Atomic(0)
        let addresses = Mutex<[Int]>([])  // the references' addresses: plain integers cross threads
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            let result = SharedHardwareDevices.reference(.drm) {
                opens.add(1, ordering: .relaxed)
                usleep(50_000)  // an open as slow as CUDA's: the others must wait for it, not make their own
                return .success(Self.fakeContext())
            }
            if case .success(let reference) = result {
                let address = Int(bitPattern: reference)
                addresses.withLock { $0.append(address) }
            }
        }
        let references = addresses.withLock { $0 }.map { UnsafeMutablePointer<AVBufferRef>(bitPattern: $0)! }
        #expect(opens.load(ordering: .relaxed) == 1)
        #expect(references.count == 16)
        #expect(Set(references.map { $0.pointee.data }).count == 1, "every decoder refers to the same device")
        #expect(Set(references).count == 16, "each decoder owns its own reference")
        for reference in references {
            var owned: UnsafeMutablePointer<AVBufferRef>? = reference
            av_buffer_unref(&owned)
        }
        #expect(SharedHardwareDevices.isOpen(.drm), "the process keeps the device for the next decoder")
        SharedHardwareDevices.dropAll(.drm)
    }

    @Test func aFailedOpenIsTriedAgainByTheNextDecoder() {
        SharedHardwareDevices.dropAll(.drm)
        var opens = 0
        let failed = SharedHardwareDevices.reference(.drm) {
            opens += 1
            return .failure(HardwareProbeFailure(reason: "no device"))
        }
        #expect(failed == .failure(HardwareProbeFailure(reason: "no device")))
        #expect(!SharedHardwareDevices.isOpen(.drm))
        var reference = try? SharedHardwareDevices.reference(.drm) {
            opens += 1
            return .success(Self.fakeContext())
        }.get()
        #expect(opens == 2 && reference != nil)
        av_buffer_unref(&reference)
        SharedHardwareDevices.dropAll(.drm)
    }

    /// A device taken for lost is opened afresh by the next decoder; a late report about an older context does not
    /// drop its successor; the decoders still holding the lost one keep a valid reference.
    @Test func aLostDeviceIsReopenedAndALateReportDropsNothing() throws {
        SharedHardwareDevices.dropAll(.drm)
        var opens = 0
        let open = { () -> Result<UnsafeMutablePointer<AVBufferRef>, HardwareProbeFailure> in
            opens += 1
            return .success(Self.fakeContext())
        }
        let first = HardwareDevice(accelerator: .drm, context: try SharedHardwareDevices.reference(.drm, open: open).get(),
                                   pixelFormat: AV_PIX_FMT_NONE)
        FFmpegHardwareProbe().deviceLost(first)
        #expect(!SharedHardwareDevices.isOpen(.drm))
        #expect(first.context!.pointee.data != nil && av_buffer_get_ref_count(first.context) == 1,
                "the stream that lost it still owns its reference")
        let second = HardwareDevice(accelerator: .drm, context: try SharedHardwareDevices.reference(.drm, open: open).get(),
                                    pixelFormat: AV_PIX_FMT_NONE)
        #expect(opens == 2 && second.context!.pointee.data != first.context!.pointee.data)
        FFmpegHardwareProbe().deviceLost(first)  // a second stream reporting the old device, late
        #expect(SharedHardwareDevices.isOpen(.drm))
        var third: UnsafeMutablePointer<AVBufferRef>? = try SharedHardwareDevices.reference(.drm, open: open).get()
        #expect(opens == 2 && third?.pointee.data == second.context!.pointee.data)
        av_buffer_unref(&third)
        SharedHardwareDevices.dropAll(.drm)
    }

    /// A sender whose stream makes working decoders fail again and again gets at most one new context a minute.
    @Test func atMostOneDropAMinute() throws {
        SharedHardwareDevices.dropAll(.drm)
        var opens = 0
        let open = { () -> Result<UnsafeMutablePointer<AVBufferRef>, HardwareProbeFailure> in
            opens += 1
            return .success(Self.fakeContext())
        }
        let start: UInt64 = 1_000_000_000_000
        var first: UnsafeMutablePointer<AVBufferRef>? = try SharedHardwareDevices.reference(.drm, open: open).get()
        #expect(SharedHardwareDevices.drop(.drm, context: first!, now: start))
        var second: UnsafeMutablePointer<AVBufferRef>? = try SharedHardwareDevices.reference(.drm, open: open).get()
        #expect(!SharedHardwareDevices.drop(.drm, context: second!, now: start + 1_000_000_000), "a second drop within the minute")
        #expect(SharedHardwareDevices.isOpen(.drm) && opens == 2)
        #expect(SharedHardwareDevices.drop(.drm, context: second!, now: start + SharedHardwareDevices.dropInterval))
        av_buffer_unref(&first)
        av_buffer_unref(&second)
        SharedHardwareDevices.dropAll(.drm)
    }

    /// The stream decoder reports a device that worked and then failed (the next decoder opens a fresh context), but
    /// not one that never gave a frame (it may only lack this profile, as NVDEC lacks H.264 High 10).
    @Test(arguments: [(true, 1), (false, 0)])
    func aDecoderReportsOnlyADeviceThatWorkedAsLost(working: Bool, expectedReports: Int) throws {
        let inputs = decoderInputs(try encode("h264", size: "96x64", frames: 30, parameters: "keyint=10:bframes=2"))
        let probe = LossRecordingProbe(working: working)
        let decoder = StreamDecoder(configuration: DecoderConfiguration(hardware: .only(.cuda)), probe: probe)
        let reference = decodeAll(inputs, decoder: StreamDecoder(configuration: DecoderConfiguration(hardware: .none)))
        #expect(decodeAll(inputs, decoder: decoder) == reference)
        #expect(decoder.statistics.hardwareFallbacks == 1)
        #expect(probe.reports.withLock { $0 } == expectedReports)
    }
}

/// A probe whose devices fail after 12 frames (or give their first frame in system memory), recording `deviceLost`.
final class LossRecordingProbe: HardwareDeviceProbing {
    let working: Bool
    let reports = Mutex(0)
    init(working: Bool) { self.working = working }

    func codecSupports(_ accelerator: HardwareAccelerator, codec: VideoCodec) -> Bool { accelerator == .cuda }

    func openDevice(_ accelerator: HardwareAccelerator, codec: VideoCodec) -> Result<HardwareDevice, HardwareProbeFailure> {
        .success(.simulated(accelerator, working: working, failingAfterFrames: working ? 12 : nil))
    }

    func deviceLost(_ device: HardwareDevice) { reports.withLock { $0 += 1 } }
}
