// The CUDA driver API is loaded at run time (as FFmpeg loads it): the daemon runs on machines without libcuda.
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

// Only the handle types hwcontext_cuda.h needs; <cuda.h> is not installed on a machine without the toolkit.
typedef int CUresult;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
#define CUDA_VERSION 0
#include <libavutil/hwcontext.h>
#include <libavutil/hwcontext_cuda.h>
#include <libavutil/log.h>
#include <libavutil/mem.h>

#include "cuda_stream.h"

// A blocking stream, as NVIDIA's own decoder sample makes one per decoder: work on the context's legacy default
// stream (where anything of libavcodec's that takes no stream runs) stays ordered with it.
#define CU_STREAM_DEFAULT 0x0

static struct {
    CUresult (*push_context)(CUcontext);
    CUresult (*pop_context)(CUcontext *);
    CUresult (*create_stream)(CUstream *, unsigned int);
    CUresult (*destroy_stream)(CUstream);
    int loaded;
} cuda;

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;

static void load_cuda(void) {
    // Never closed: the driver stays loaded for the process, as FFmpeg's own loader leaves it while a device lives.
    void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library) return;
    *(void **)&cuda.push_context = dlsym(library, "cuCtxPushCurrent_v2");
    *(void **)&cuda.pop_context = dlsym(library, "cuCtxPopCurrent_v2");
    *(void **)&cuda.create_stream = dlsym(library, "cuStreamCreate");
    *(void **)&cuda.destroy_stream = dlsym(library, "cuStreamDestroy_v2");
    cuda.loaded = cuda.push_context && cuda.pop_context && cuda.create_stream && cuda.destroy_stream;
}

typedef struct {
    AVBufferRef *shared;
    CUstream stream;
} OwnStream;

// Called by libavutil after the device's uninit (which leaves a context it did not create alone).
static void free_own_stream(AVHWDeviceContext *device) {
    OwnStream *own = device->user_opaque;
    AVCUDADeviceContext *context = device->hwctx;
    if (!own) return;
    CUcontext previous;
    if (own->stream && cuda.push_context(context->cuda_ctx) == 0) {
        cuda.destroy_stream(own->stream);
        cuda.pop_context(&previous);
    }
    av_buffer_unref(&own->shared);
    av_free(own);
    device->user_opaque = NULL;
}

static AVBufferRef *make(AVBufferRef *shared, const char **why);

AVBufferRef *streamrecv_cuda_device_with_own_stream(AVBufferRef *shared, const char **why) {
    const char *ignored;
    if (!why) why = &ignored;
    if (((AVHWDeviceContext *)shared->data)->type != AV_HWDEVICE_TYPE_CUDA) { *why = "not a CUDA device"; return NULL; }
    AVBufferRef *made = make(shared, why);
    // Through FFmpeg's log, which the daemon routes to its own (rate-limited): the decoder still works, on the
    // shared default stream.
    if (!made) av_log(NULL, AV_LOG_WARNING, "no CUDA stream of its own for this decoder (%s): using the device's default stream\n", *why);
    return made;
}

static AVBufferRef *make(AVBufferRef *shared, const char **why) {
    AVHWDeviceContext *shared_device = (AVHWDeviceContext *)shared->data;
    pthread_once(&cuda_once, load_cuda);
    if (!cuda.loaded) { *why = "libcuda.so.1 or its stream functions could not be loaded"; return NULL; }
    AVCUDADeviceContext *shared_context = shared_device->hwctx;

    AVBufferRef *reference = av_hwdevice_ctx_alloc(AV_HWDEVICE_TYPE_CUDA);
    OwnStream *own = av_mallocz(sizeof *own);
    if (!reference || !own || !(own->shared = av_buffer_ref(shared))) {
        if (own) av_free(own);
        av_buffer_unref(&reference);
        *why = "out of memory";
        return NULL;
    }
    AVHWDeviceContext *device = (AVHWDeviceContext *)reference->data;
    AVCUDADeviceContext *context = device->hwctx;
    device->user_opaque = own;
    device->free = free_own_stream;
    context->cuda_ctx = shared_context->cuda_ctx;

    CUcontext previous;
    if (cuda.push_context(context->cuda_ctx) != 0) {
        av_buffer_unref(&reference);
        *why = "cuCtxPushCurrent failed";
        return NULL;
    }
    CUresult made = cuda.create_stream(&own->stream, CU_STREAM_DEFAULT);
    cuda.pop_context(&previous);
    if (made != 0) {
        own->stream = NULL;
        av_buffer_unref(&reference);
        *why = "cuStreamCreate failed";
        return NULL;
    }
    context->stream = own->stream;
    if (av_hwdevice_ctx_init(reference) < 0) {
        av_buffer_unref(&reference);
        *why = "av_hwdevice_ctx_init failed";
        return NULL;
    }
    return reference;
}
