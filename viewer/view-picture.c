/* See view-picture.h. */
#include "view-picture.h"

#include <math.h>
#include <string.h>

struct format_shape {
    uint32_t pixel_format;
    const char *name;
    enum view_layout layout;
    uint32_t planes;
    uint32_t bits;        /* of the values */
    uint32_t msb_aligned; /* values << (16 - bits) in 16-bit samples (P010) */
    uint32_t chroma_x, chroma_y; /* log2 subsampling */
};

static const struct format_shape shapes[] = {
    { STREAMRECV_PIXEL_FORMAT_YUV420P, "I420", VIEW_LAYOUT_PLANAR_YUV, 3, 8, 0, 1, 1 },
    { STREAMRECV_PIXEL_FORMAT_NV12, "NV12", VIEW_LAYOUT_SEMIPLANAR_YUV, 2, 8, 0, 1, 1 },
    { STREAMRECV_PIXEL_FORMAT_P010, "P010", VIEW_LAYOUT_SEMIPLANAR_YUV, 2, 10, 1, 1, 1 },
    { STREAMRECV_PIXEL_FORMAT_YUV422P, "I422", VIEW_LAYOUT_PLANAR_YUV, 3, 8, 0, 1, 0 },
    { STREAMRECV_PIXEL_FORMAT_YUV444P, "Y444", VIEW_LAYOUT_PLANAR_YUV, 3, 8, 0, 0, 0 },
    { STREAMRECV_PIXEL_FORMAT_GRAY8, "GRAY8", VIEW_LAYOUT_GRAY, 1, 8, 0, 0, 0 },
    { STREAMRECV_PIXEL_FORMAT_YUV420P10, "I420_10", VIEW_LAYOUT_PLANAR_YUV, 3, 10, 0, 1, 1 },
    { STREAMRECV_PIXEL_FORMAT_YUV422P10, "I422_10", VIEW_LAYOUT_PLANAR_YUV, 3, 10, 0, 1, 0 },
    { STREAMRECV_PIXEL_FORMAT_YUV444P10, "Y444_10", VIEW_LAYOUT_PLANAR_YUV, 3, 10, 0, 0, 0 },
    { STREAMRECV_PIXEL_FORMAT_GRAY10, "GRAY10", VIEW_LAYOUT_GRAY, 1, 10, 0, 0, 0 },
    { STREAMRECV_PIXEL_FORMAT_YUV420P12, "I420_12", VIEW_LAYOUT_PLANAR_YUV, 3, 12, 0, 1, 1 },
    { STREAMRECV_PIXEL_FORMAT_YUV422P12, "I422_12", VIEW_LAYOUT_PLANAR_YUV, 3, 12, 0, 1, 0 },
    { STREAMRECV_PIXEL_FORMAT_YUV444P12, "Y444_12", VIEW_LAYOUT_PLANAR_YUV, 3, 12, 0, 0, 0 },
    { STREAMRECV_PIXEL_FORMAT_GBRP, "GBR", VIEW_LAYOUT_PLANAR_GBR, 3, 8, 0, 0, 0 },
    { STREAMRECV_PIXEL_FORMAT_GBRP10, "GBR_10", VIEW_LAYOUT_PLANAR_GBR, 3, 10, 0, 0, 0 },
};

static const struct format_shape *shape_of(uint32_t pixel_format) {
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (shapes[i].pixel_format == pixel_format) return &shapes[i];
    return NULL;
}

const char *view_pixel_format_name(uint32_t pixel_format) {
    const struct format_shape *shape = shape_of(pixel_format);
    return shape ? shape->name : "unknown";
}

/* Kr and Kb of a matrix code (ISO/IEC 23091-2); unspecified ones as mpv guesses them: BT.709 from HD up. */
static void matrix_weights(uint32_t code, uint32_t width, uint32_t height, float *kr, float *kb, const char **name) {
    switch (code) {
    case 1: *kr = 0.2126f, *kb = 0.0722f, *name = "BT.709"; return;
    case 4: *kr = 0.30f, *kb = 0.11f, *name = "FCC"; return;
    case 5: case 6: *kr = 0.299f, *kb = 0.114f, *name = "BT.601"; return;
    case 7: *kr = 0.212f, *kb = 0.087f, *name = "SMPTE 240M"; return;
    case 9: case 10: *kr = 0.2627f, *kb = 0.0593f, *name = "BT.2020"; return;
    default:
        if (width >= 1280 || height > 576) *kr = 0.2126f, *kb = 0.0722f, *name = "BT.709 (guessed)";
        else *kr = 0.299f, *kb = 0.114f, *name = "BT.601 (guessed)";
    }
}

/* Column-major 3x3: m[column * 3 + row]. */
static void set(float *m, int row, int column, float value) { m[column * 3 + row] = value; }

static void colour(const struct format_shape *shape, const struct streamrecv_shm_slot *slot, struct view_picture *p) {
    float maximum = (float)((1u << shape->bits) - 1);
    float unit = (float)(1u << (shape->bits - 8)) / maximum; /* one 8-bit code step, normalised */
    p->scale = shape->bits == 8 ? 1.0f
             : shape->msb_aligned ? 65535.0f / (maximum * (float)(1u << (16 - shape->bits)))
             : 65535.0f / maximum;
    /* GBR is full range unless it says otherwise; YUV limited unless it says full. */
    p->full_range = shape->layout == VIEW_LAYOUT_PLANAR_GBR ? slot->color_range != 1 : slot->color_range == 2;
    float black = p->full_range ? 0 : 16 * unit, luma_range = p->full_range ? 1 : 219 * unit;
    float middle = p->full_range ? (float)(1u << (shape->bits - 1)) / maximum : 128 * unit;
    float chroma_range = p->full_range ? 1 : 224 * unit;
    memset(p->matrix, 0, sizeof p->matrix);
    if (shape->layout == VIEW_LAYOUT_PLANAR_GBR) {
        p->offset[0] = p->offset[1] = p->offset[2] = black;
        set(p->matrix, 0, 2, 1 / luma_range); /* R from the third plane */
        set(p->matrix, 1, 0, 1 / luma_range); /* G from the first */
        set(p->matrix, 2, 1, 1 / luma_range); /* B from the second */
        p->matrix_name = "GBR";
        return;
    }
    p->offset[0] = black;
    p->offset[1] = p->offset[2] = middle;
    for (int row = 0; row < 3; row++) set(p->matrix, row, 0, 1 / luma_range);
    if (shape->layout == VIEW_LAYOUT_GRAY) {
        p->matrix_name = "gray";
        return;
    }
    float kr, kb;
    matrix_weights(slot->color_matrix, slot->width, slot->height, &kr, &kb, &p->matrix_name);
    float kg = 1 - kr - kb;
    set(p->matrix, 0, 2, 2 * (1 - kr) / chroma_range);
    set(p->matrix, 1, 1, -2 * kb * (1 - kb) / kg / chroma_range);
    set(p->matrix, 1, 2, -2 * kr * (1 - kr) / kg / chroma_range);
    set(p->matrix, 2, 1, 2 * (1 - kb) / chroma_range);
}

int view_picture_from_slot(const struct streamrecv_shm_slot *slot, struct view_picture *p) {
    const struct format_shape *shape = shape_of(slot->pixel_format);
    if (!shape || slot->plane_count != shape->planes || slot->width == 0 || slot->height == 0) return -1;
    memset(p, 0, sizeof *p);
    p->width = slot->width;
    p->height = slot->height;
    p->layout = shape->layout;
    p->plane_count = shape->planes;
    uint32_t sample_bytes = shape->bits > 8 ? 2 : 1;
    for (uint32_t i = 0; i < shape->planes; i++) {
        int chroma = i > 0 && shape->layout != VIEW_LAYOUT_PLANAR_GBR;
        uint32_t wide = chroma ? (slot->width + (1u << shape->chroma_x) - 1) >> shape->chroma_x : slot->width;
        uint32_t high = chroma ? (slot->height + (1u << shape->chroma_y) - 1) >> shape->chroma_y : slot->height;
        uint32_t per_texel = sample_bytes * (chroma && shape->layout == VIEW_LAYOUT_SEMIPLANAR_YUV ? 2 : 1);
        /* The plane must hold the texels, and its rows must start on whole texels (GL's row length is in texels). */
        if (slot->plane_width[i] < wide * per_texel || slot->plane_height[i] < high ||
            slot->plane_stride[i] % per_texel != 0 || slot->plane_offset[i] % sample_bytes != 0 ||
            slot->plane_stride[i] > INT32_MAX)
            return -1;
        p->texel[i] = per_texel == 1 ? VIEW_TEXEL_R8 : per_texel == 4 ? VIEW_TEXEL_RG16
                    : sample_bytes == 2 ? VIEW_TEXEL_R16 : VIEW_TEXEL_RG8;
        p->texels_wide[i] = wide;
        p->texels_high[i] = high;
        p->row_texels[i] = slot->plane_stride[i] / per_texel;
    }
    colour(shape, slot, p);
    uint32_t x = 0, y = 0, w = slot->width, h = slot->height;
    /* A crop inside the picture only (a forged slot can say anything). */
    if (slot->visible_width > 0 && slot->visible_height > 0 && slot->visible_x <= slot->width &&
        slot->visible_y <= slot->height && slot->visible_width <= slot->width - slot->visible_x &&
        slot->visible_height <= slot->height - slot->visible_y)
        x = slot->visible_x, y = slot->visible_y, w = slot->visible_width, h = slot->visible_height;
    p->crop[0] = (float)x / (float)slot->width;
    p->crop[1] = (float)y / (float)slot->height;
    p->crop[2] = (float)w / (float)slot->width;
    p->crop[3] = (float)h / (float)slot->height;
    p->shown_width = w;
    p->shown_height = h;
    double sar = slot->sample_aspect_num && slot->sample_aspect_den
                     ? (double)slot->sample_aspect_num / slot->sample_aspect_den : 1.0;
    if (!(sar > 0.01 && sar < 100)) sar = 1.0;
    p->aspect = (float)((double)w * sar / (double)h);
    p->rotation = (float)((double)slot->rotation * 2.0 * M_PI / 65536.0);
    p->flip_horizontal = (slot->flags & STREAMRECV_FRAME_HFLIP) != 0;
    p->flip_vertical = (slot->flags & STREAMRECV_FRAME_VFLIP) != 0;
    return 0;
}

int view_picture_same_textures(const struct view_picture *a, const struct view_picture *b) {
    if (a->plane_count != b->plane_count) return 0;
    for (uint32_t i = 0; i < a->plane_count; i++)
        if (a->texel[i] != b->texel[i] || a->texels_wide[i] != b->texels_wide[i] || a->texels_high[i] != b->texels_high[i])
            return 0;
    return 1;
}

void view_fit(const struct view_picture *picture, int window_width, int window_height, int *x, int *y, int *width,
              int *height) {
    /* The bounding box of the turned picture, of height 1. */
    double c = fabs(cos(picture->rotation)), s = fabs(sin(picture->rotation));
    double box_w = picture->aspect * c + s, box_h = picture->aspect * s + c;
    double scale = fmin(window_width / box_w, window_height / box_h);
    *width = (int)lround(box_w * scale);
    *height = (int)lround(box_h * scale);
    *x = (window_width - *width) / 2;
    *y = (window_height - *height) / 2;
}
