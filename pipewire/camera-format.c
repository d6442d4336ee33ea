/* See camera-format.h. */
#include "camera-format.h"

#include <spa/param/video/color.h>
#include <spa/param/video/raw.h>
#include <stdlib.h>
#include <string.h>

/* What a ring pixel format is to PipeWire: its SPA name, bytes per sample, chroma subsampling (as shifts) and
 * whether chroma is one interleaved plane (NV12, P010). */
struct layout_rule {
    uint32_t pixel_format;
    uint32_t spa_format;
    const char *name;
    uint32_t planes;
    uint32_t bytes_per_sample;
    uint32_t chroma_x_shift;
    uint32_t chroma_y_shift;
    int interleaved_chroma;
    int rgb;
    int even_rows; /* GStreamer reserves an even number of rows in every plane (its 10/12-bit 4:2:2 layouts) */
};

static const struct layout_rule rules[] = {
    { STREAMRECV_PIXEL_FORMAT_YUV420P, SPA_VIDEO_FORMAT_I420, "I420", 3, 1, 1, 1, 0, 0, 0 },
    { STREAMRECV_PIXEL_FORMAT_NV12, SPA_VIDEO_FORMAT_NV12, "NV12", 2, 1, 1, 1, 1, 0, 0 },
    { STREAMRECV_PIXEL_FORMAT_P010, SPA_VIDEO_FORMAT_P010_10LE, "P010_10LE", 2, 2, 1, 1, 1, 0, 0 },
    { STREAMRECV_PIXEL_FORMAT_YUV422P, SPA_VIDEO_FORMAT_Y42B, "Y42B", 3, 1, 1, 0, 0, 0, 0 },
    { STREAMRECV_PIXEL_FORMAT_YUV444P, SPA_VIDEO_FORMAT_Y444, "Y444", 3, 1, 0, 0, 0, 0, 0 },
    { STREAMRECV_PIXEL_FORMAT_GRAY8, SPA_VIDEO_FORMAT_GRAY8, "GRAY8", 1, 1, 0, 0, 0, 0, 0 },
    { STREAMRECV_PIXEL_FORMAT_YUV420P10, SPA_VIDEO_FORMAT_I420_10LE, "I420_10LE", 3, 2, 1, 1, 0, 0, 0 },
    { STREAMRECV_PIXEL_FORMAT_YUV422P10, SPA_VIDEO_FORMAT_I422_10LE, "I422_10LE", 3, 2, 1, 0, 0, 0, 1 },
    { STREAMRECV_PIXEL_FORMAT_YUV444P10, SPA_VIDEO_FORMAT_Y444_10LE, "Y444_10LE", 3, 2, 0, 0, 0, 0, 0 },
    { STREAMRECV_PIXEL_FORMAT_YUV420P12, SPA_VIDEO_FORMAT_I420_12LE, "I420_12LE", 3, 2, 1, 1, 0, 0, 0 },
    { STREAMRECV_PIXEL_FORMAT_YUV422P12, SPA_VIDEO_FORMAT_I422_12LE, "I422_12LE", 3, 2, 1, 0, 0, 0, 1 },
    { STREAMRECV_PIXEL_FORMAT_YUV444P12, SPA_VIDEO_FORMAT_Y444_12LE, "Y444_12LE", 3, 2, 0, 0, 0, 0, 0 },
    { STREAMRECV_PIXEL_FORMAT_GBRP, SPA_VIDEO_FORMAT_GBR, "GBR", 3, 1, 0, 0, 0, 1, 0 },
    { STREAMRECV_PIXEL_FORMAT_GBRP10, SPA_VIDEO_FORMAT_GBR_10LE, "GBR_10LE", 3, 2, 0, 0, 0, 1, 0 },
};

static const struct layout_rule *rule_for(uint32_t pixel_format) {
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (rules[i].pixel_format == pixel_format) return &rules[i];
    return NULL;
}

const char *camera_spa_format_name(uint32_t spa_format) {
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (rules[i].spa_format == spa_format) return rules[i].name;
    return "?";
}

static uint32_t round_up(uint32_t value, uint32_t multiple) { return (value + multiple - 1) / multiple * multiple; }
static uint32_t shifted_up(uint32_t value, uint32_t shift) { return (value + (1u << shift) - 1) >> shift; }

/* ISO/IEC 23091-2 code points (what the slot carries) to SPA's names. Unspecified YUV is limited range: H.264
 * and H.265 default video_full_range_flag to 0. Transfer curves SPA has no name for, but which are BT.709's
 * (BT.601, BT.2020 10-bit), take BT.709's. */
static uint32_t spa_range(uint8_t range, int rgb) {
    if (rgb) return SPA_VIDEO_COLOR_RANGE_0_255;
    return range == 2 ? SPA_VIDEO_COLOR_RANGE_0_255 : SPA_VIDEO_COLOR_RANGE_16_235;
}

static uint32_t spa_matrix(uint8_t matrix, int rgb) {
    if (rgb) return SPA_VIDEO_COLOR_MATRIX_RGB;
    switch (matrix) {
    case 0: return SPA_VIDEO_COLOR_MATRIX_RGB;
    case 1: return SPA_VIDEO_COLOR_MATRIX_BT709;
    case 4: return SPA_VIDEO_COLOR_MATRIX_FCC;
    case 5: case 6: return SPA_VIDEO_COLOR_MATRIX_BT601;
    case 7: return SPA_VIDEO_COLOR_MATRIX_SMPTE240M;
    case 9: case 10: return SPA_VIDEO_COLOR_MATRIX_BT2020;
    default: return SPA_VIDEO_COLOR_MATRIX_UNKNOWN;
    }
}

static uint32_t spa_transfer(uint8_t transfer) {
    switch (transfer) {
    case 1: case 6: case 14: return SPA_VIDEO_TRANSFER_BT709;
    case 4: return SPA_VIDEO_TRANSFER_GAMMA22;
    case 5: return SPA_VIDEO_TRANSFER_GAMMA28;
    case 7: return SPA_VIDEO_TRANSFER_SMPTE240M;
    case 8: return SPA_VIDEO_TRANSFER_GAMMA10;
    case 9: return SPA_VIDEO_TRANSFER_LOG100;
    case 10: return SPA_VIDEO_TRANSFER_LOG316;
    case 13: return SPA_VIDEO_TRANSFER_SRGB;
    case 15: return SPA_VIDEO_TRANSFER_BT2020_12;
    default: return SPA_VIDEO_TRANSFER_UNKNOWN;
    }
}

static uint32_t spa_primaries(uint8_t primaries) {
    switch (primaries) {
    case 1: return SPA_VIDEO_COLOR_PRIMARIES_BT709;
    case 4: return SPA_VIDEO_COLOR_PRIMARIES_BT470M;
    case 5: return SPA_VIDEO_COLOR_PRIMARIES_BT470BG;
    case 6: return SPA_VIDEO_COLOR_PRIMARIES_SMPTE170M;
    case 7: return SPA_VIDEO_COLOR_PRIMARIES_SMPTE240M;
    case 8: return SPA_VIDEO_COLOR_PRIMARIES_FILM;
    case 9: return SPA_VIDEO_COLOR_PRIMARIES_BT2020;
    default: return SPA_VIDEO_COLOR_PRIMARIES_UNKNOWN;
    }
}

int camera_format_from_slot(const struct streamrecv_shm_slot *slot, struct camera_format *format) {
    const struct layout_rule *rule = rule_for(slot->pixel_format);
    if (rule == NULL || slot->plane_count != rule->planes || slot->width == 0 || slot->height == 0 ||
        slot->width > 16384 || slot->height > 16384)
        return -1;
    memset(format, 0, sizeof *format);
    format->spa_format = rule->spa_format;
    format->width = slot->width;
    format->height = slot->height;
    format->plane_count = rule->planes;
    uint32_t offset = 0;
    for (uint32_t plane = 0; plane < rule->planes; plane++) {
        int chroma = plane > 0 && !rule->rgb;
        uint32_t columns = chroma ? shifted_up(slot->width, rule->chroma_x_shift) : slot->width;
        uint32_t samples = columns * (chroma && rule->interleaved_chroma ? 2 : 1);
        format->row_bytes[plane] = samples * rule->bytes_per_sample;
        format->rows[plane] = chroma ? shifted_up(slot->height, rule->chroma_y_shift) : slot->height;
        /* GStreamer's default layout (scripts/camera-format-check.c compares them): rows padded to 4 bytes; a
         * vertically halved format reserves an even number of luma rows. */
        format->stride[plane] = round_up(format->row_bytes[plane], 4);
        format->offset[plane] = offset;
        uint32_t reserved_rows = rule->even_rows || (!chroma && rule->chroma_y_shift) ? round_up(format->rows[plane], 2)
                                                                                     : format->rows[plane];
        offset += format->stride[plane] * reserved_rows;
        if (slot->plane_width[plane] != format->row_bytes[plane] || slot->plane_height[plane] != format->rows[plane])
            return -1;
    }
    format->size = offset;
    format->color_range = spa_range(slot->color_range, rule->rgb);
    format->color_matrix = spa_matrix(slot->color_matrix, rule->rgb);
    format->transfer_function = spa_transfer(slot->color_transfer);
    format->color_primaries = spa_primaries(slot->color_primaries);
    int aspect = slot->sample_aspect_num > 0 && slot->sample_aspect_den > 0;
    format->aspect_num = aspect ? slot->sample_aspect_num : 1;
    format->aspect_den = aspect ? slot->sample_aspect_den : 1;
    return 0;
}

int camera_format_equal(const struct camera_format *a, const struct camera_format *b) {
    return a->spa_format == b->spa_format && a->width == b->width && a->height == b->height &&
           a->size == b->size && a->color_range == b->color_range && a->color_matrix == b->color_matrix &&
           a->transfer_function == b->transfer_function && a->color_primaries == b->color_primaries &&
           a->aspect_num == b->aspect_num && a->aspect_den == b->aspect_den;
}

void camera_copy_planes(const struct camera_format *format, const struct streamrecv_shm_slot *slot,
                        const uint8_t *data, uint8_t *destination) {
    for (uint32_t plane = 0; plane < format->plane_count; plane++) {
        const uint8_t *source = data + slot->plane_offset[plane];
        uint8_t *target = destination + format->offset[plane];
        if (slot->plane_stride[plane] == format->stride[plane]) {
            memcpy(target, source, (size_t)format->stride[plane] * (format->rows[plane] - 1) + format->row_bytes[plane]);
            continue;
        }
        for (uint32_t row = 0; row < format->rows[plane]; row++)
            memcpy(target + (size_t)row * format->stride[plane], source + (size_t)row * slot->plane_stride[plane],
                   format->row_bytes[plane]);
    }
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

void camera_rate_from_times(const uint64_t *times_ns, size_t count, uint32_t *num, uint32_t *den) {
    static const struct { uint32_t num, den; } broadcast[] = {
        { 24000, 1001 }, { 24, 1 }, { 25, 1 }, { 30000, 1001 }, { 30, 1 },
        { 50, 1 }, { 60000, 1001 }, { 60, 1 },
    };
    *num = 0;
    *den = 1;
    uint64_t intervals[64], sorted[64];
    size_t n = 0;
    for (size_t i = 1; i < count && n < 64; i++)
        if (times_ns[i] > times_ns[i - 1]) intervals[n++] = times_ns[i] - times_ns[i - 1];
    if (n == 0) return;
    memcpy(sorted, intervals, n * sizeof intervals[0]);
    qsort(sorted, n, sizeof sorted[0], compare_u64);
    uint64_t median = sorted[n / 2];
    if (median < 1000000ULL || median > 10000000000ULL) return;
    /* The mean interval cancels each arrival's own jitter; the median stands in when there was a pause. */
    uint64_t total = 0;
    int steady = 1;
    for (size_t i = 0; i < n; i++) {
        total += intervals[i];
        if (intervals[i] * 2 < median || intervals[i] > median * 2) steady = 0;
    }
    uint64_t interval = steady ? total / n : median;
    double rate = 1e9 / (double)interval, closest = 0.02;
    for (size_t i = 0; i < sizeof broadcast / sizeof broadcast[0]; i++) {
        double candidate = (double)broadcast[i].num / broadcast[i].den;
        double distance = rate > candidate ? rate / candidate - 1 : candidate / rate - 1;
        if (distance < closest) {
            closest = distance;
            *num = broadcast[i].num;
            *den = broadcast[i].den;
        }
    }
    if (*num != 0) return;
    *num = (uint32_t)(rate + 0.5);
    if (*num == 0) *num = 1;
}
