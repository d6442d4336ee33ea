import CCUDAStream
import CFFmpeg
import Glibc
import Testing

/// With STREAMRECVD_CUDA_STREAM_PER_DECODER=1 each CUDA decoder gets the shared context with a stream of its own
/// (to be shown bit-exact and measured on a GPU by the kit); here, without a GPU, what happens where it cannot: the
/// decoder keeps the shared device, and says why.
struct CUDAStreamTests {
    /// Whether the NVIDIA driver's library is here (on a GPU machine the kit measures the real path instead).
    static let hasDriver: Bool = {
        guard let library = dlopen("libcuda.so.1", RTLD_NOW) else { return false }
        dlclose(library)
        return true
    }()

    private func why(_ device: UnsafeMutablePointer<AVBufferRef>) -> (made: Bool, why: String) {
        var reason: UnsafePointer<CChar>?
        var made = streamrecv_cuda_device_with_own_stream(device, &reason)
        defer { av_buffer_unref(&made) }
        return (made != nil, reason.map { String(cString: $0) } ?? "")
    }

    @Test func anotherKindOfDeviceIsLeftAsItIs() throws {
        var device: UnsafeMutablePointer<AVBufferRef>? = av_hwdevice_ctx_alloc(AV_HWDEVICE_TYPE_VAAPI)
        defer { av_buffer_unref(&device) }
        let outcome = why(try #require(device, "libavutil without VA-API"))
        #expect(!outcome.made && outcome.why == "not a CUDA device")
    }

    /// This machine has no NVIDIA driver: a CUDA device (allocated, as the daemon's would be) gets no stream of its
    /// own, and nothing is made.
    @Test(.disabled(if: hasDriver, "this machine has libcuda: the GPU kit measures this path"))
    func withoutTheDriverTheSharedDeviceIsKept() throws {
        var device: UnsafeMutablePointer<AVBufferRef>? = av_hwdevice_ctx_alloc(AV_HWDEVICE_TYPE_CUDA)
        defer { av_buffer_unref(&device) }
        let outcome = why(try #require(device, "libavutil without CUDA"))
        #expect(!outcome.made && outcome.why.contains("libcuda.so.1"), "\(outcome)")
    }
}
