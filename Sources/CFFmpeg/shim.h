#ifndef STREAMRECV_CFFMPEG_SHIM_H
#define STREAMRECV_CFFMPEG_SHIM_H
// libavcodec/libavutil for the Decoding module (its only importer). Macros Swift cannot import are wrapped in
// static inline functions; nothing here holds logic.
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
#include <libavutil/buffer.h>
#include <libavutil/error.h>
#include <libavutil/frame.h>
#include <libavutil/hwcontext.h>
#include <libavutil/imgutils.h>
#include <libavutil/log.h>
#include <libavutil/pixdesc.h>

static inline int streamrecv_averror(int posix_error) { return AVERROR(posix_error); }
static inline int streamrecv_averror_eof(void) { return AVERROR_EOF; }
static inline int streamrecv_averror_eagain(void) { return AVERROR(EAGAIN); }
static inline int64_t streamrecv_av_nopts_value(void) { return AV_NOPTS_VALUE; }

/// FFmpeg's text for an error code, written into `buffer` (at least AV_ERROR_MAX_STRING_SIZE bytes).
static inline const char *streamrecv_av_err2str(int error, char *buffer, size_t size) {
    av_strerror(error, buffer, size);
    return buffer;
}

static inline int streamrecv_error_max_string_size(void) { return AV_ERROR_MAX_STRING_SIZE; }

#endif
