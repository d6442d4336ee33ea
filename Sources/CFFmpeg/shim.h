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


/// Rows of the picture being decoded that libavcodec is done with, as its H.264 decoder reports them through
/// `draw_horiz_band`: the rows it also reports to frame threads as final. A slice that deblocks reports a macroblock
/// row 20 rows late (what the next row's deblocking and intra prediction may still touch); a slice that does not
/// deblocks reports it at once, and the next slice may deblock its bottom rows: Swift's `PictureBands` keeps 4 rows
/// back from such a band. The decode thread arms the tracker before a picture's first slice and reads it after each
/// slice; the daemon copies the rows out while the next slices are still on the wire.
/// States: 0 disarmed, 1 armed (no band yet), 2 tracking, 3 unusable for this picture (a band out of order, of
/// another picture, or of a field).
typedef struct streamrecv_band_tracker {
    int state;
    /// Rows were skipped (a band began below the rows reported, or the first one below the top, by more than a
    /// slice that deblocks leaves unreported before one that does not: 20 rows, up to a macroblock row's top):
    /// macroblock rows were never decoded, the picture lacks slices. Kept until the tracker is armed again.
    int rows_missing;
    /// Luma rows [0, rows_final) of the coded picture were reported.
    int rows_final;
    const uint8_t *data[4];
    int linesize[4];
    int coded_width, coded_height, format;
} streamrecv_band_tracker;

/// What a decoder's `opaque` points to: the hardware pixel format get_format must pick (first: read as an int32),
/// and the band tracker.
typedef struct streamrecv_decoder_owner {
    int32_t hardware_format;
    streamrecv_band_tracker bands;
} streamrecv_decoder_owner;

#define STREAMRECV_BANDS_DISARMED 0
#define STREAMRECV_BANDS_ARMED 1
#define STREAMRECV_BANDS_TRACKING 2
#define STREAMRECV_BANDS_UNUSABLE 3

/// A band at `y` after rows reported up to `reported` skips only what a slice that deblocks left unreported before
/// one that does not reports its row at once: up to 20 rows, ending at a macroblock row's top.
static inline int streamrecv_bands_skip_deblocking_margin(int reported, int y) { return y % 16 == 0 && y - reported <= 20; }

/// Installed only on a decoder without threads (one thread calls it, the one decoding) and in software. Bands are
/// taken only from the top down without a gap or overlap, all of one frame picture (type 3, PICT_FRAME): anything
/// else makes the picture's bands unusable, and the daemon then copies the whole frame once it is out.
static void streamrecv_draw_horiz_band(struct AVCodecContext *context, const AVFrame *source, int offset[AV_NUM_DATA_POINTERS],
                                       int y, int type, int height) {
    (void)offset;
    streamrecv_decoder_owner *owner = (streamrecv_decoder_owner *)context->opaque;
    if (!owner) return;
    streamrecv_band_tracker *bands = &owner->bands;
    if (bands->state == STREAMRECV_BANDS_DISARMED || bands->state == STREAMRECV_BANDS_UNUSABLE) return;
    if (type != 3 || !source || height <= 0) { bands->state = STREAMRECV_BANDS_UNUSABLE; return; }
    if (bands->state == STREAMRECV_BANDS_ARMED) {
        if (y != 0) {
            bands->state = STREAMRECV_BANDS_UNUSABLE;
            bands->rows_missing = !streamrecv_bands_skip_deblocking_margin(0, y);
            return;
        }
        for (int plane = 0; plane < 4; plane++) {
            bands->data[plane] = source->data[plane];
            bands->linesize[plane] = source->linesize[plane];
        }
        bands->coded_width = source->width;
        bands->coded_height = source->height;
        bands->format = source->format;
        bands->rows_final = height;
        bands->state = STREAMRECV_BANDS_TRACKING;
        return;
    }
    if (source->data[0] == bands->data[0] && y > bands->rows_final
        && !streamrecv_bands_skip_deblocking_margin(bands->rows_final, y)) bands->rows_missing = 1;
    if (source->data[0] != bands->data[0] || y != bands->rows_final) { bands->state = STREAMRECV_BANDS_UNUSABLE; return; }
    bands->rows_final = y + height;
}

static inline void streamrecv_track_bands(AVCodecContext *context) { context->draw_horiz_band = streamrecv_draw_horiz_band; }

#endif
