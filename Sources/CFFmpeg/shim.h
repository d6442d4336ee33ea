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
#include <libavutil/md5.h>
#include <libavutil/pixdesc.h>
#include <malloc.h>  /* malloc_trim: what a closed decoder freed goes back to the system (StreamDecoder.release) */
#include <stdarg.h>
#include <string.h>

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

/// libavcodec's own log lines go to `sink` (one formatted line, no trailing newline) instead of stderr, so the
/// daemon can tag, rate-limit and route them like its own. av_log's callback takes a va_list, which Swift
/// cannot receive: this formats the line first.
/// `owner`: for a codec context, its `opaque`, which frame threads' copies of a decoder's context share with it
/// (libavcodec logs from those copies, which nobody outside it knows); NULL otherwise.
typedef void (*streamrecv_av_log_sink)(int level, const char *line, const void *context, const void *owner);
/* A function-local static, not a file-scope one: Swift's importer emits the functions it uses, not globals. */
static inline streamrecv_av_log_sink *streamrecv_av_log_sink_slot(void) {
    static streamrecv_av_log_sink sink;
    return &sink;
}

/// Set on a thread while it opens a hardware device: libavutil's own attempts are not passed on. The thread's own
/// flag, not the process's log level: threads opening devices at once would leave that level wrong (at QUIET).
static inline int *streamrecv_av_log_quiet_slot(void) {
    static _Thread_local int quiet;
    return &quiet;
}

static inline void streamrecv_av_log_set_quiet(int quiet) { *streamrecv_av_log_quiet_slot() = quiet; }

static void streamrecv_av_log_callback(void *context, int level, const char *format, va_list arguments) {
    streamrecv_av_log_sink sink = *streamrecv_av_log_sink_slot();
    if (level > av_log_get_level() || !sink || *streamrecv_av_log_quiet_slot()) return;
    char line[1024];
    int print_prefix = 1;
    av_log_format_line2(context, level, format, arguments, line, (int)sizeof line, &print_prefix);
    size_t length = strlen(line);
    while (length > 0 && (line[length - 1] == '\n' || line[length - 1] == '\r')) line[--length] = 0;
    const void *owner = context && *(const AVClass *const *)context == avcodec_get_class()
                            ? ((const AVCodecContext *)context)->opaque : NULL;
    if (length > 0) sink(level, line, context, owner);
}

static inline void streamrecv_av_log_route(streamrecv_av_log_sink sink) {
    *streamrecv_av_log_sink_slot() = sink;
    av_log_set_callback(streamrecv_av_log_callback);
}

#endif
