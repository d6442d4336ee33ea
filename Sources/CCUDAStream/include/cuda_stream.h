#ifndef STREAMRECV_CUDA_STREAM_H
#define STREAMRECV_CUDA_STREAM_H

#include <libavutil/buffer.h>

/// A device context for one decoder: the CUDA context of `shared` (no new context is made) with a CUDA stream of
/// its own, so that this decoder's frame mapping and downloads need not wait for other decoders' work. FFmpeg's
/// CUDA device leaves its stream NULL: every decoder sharing the device then queues on the context's legacy default
/// stream, and each download's cuStreamSynchronize waits for every other decoder's copies as well.
///
/// The stream is a blocking one (as NVIDIA's sample makes): work anything queues on the legacy default stream
/// still orders with it, so a decoder left on the shared device (this returned NULL) still holds the others up.
///
/// Not used unless STREAMRECVD_CUDA_STREAM_PER_DECODER=1 (VideoDecoder): libavcodec's NVDEC path unmaps a frame
/// right after queueing its copy, without waiting for it, and whether that stays safe on a stream of one's own has
/// to be shown bit-exact on a GPU first (the GPU kit's exact section and capacity A/B).
///
/// The new context holds a reference to `shared`; the stream is destroyed with it. Returns NULL (the caller then
/// uses `shared` as it is) when `shared` is not a CUDA device, libcuda cannot be loaded, or no stream can be made;
/// `why` (may be NULL) then says which, as a static string.
AVBufferRef *streamrecv_cuda_device_with_own_stream(AVBufferRef *shared, const char **why);

#endif
