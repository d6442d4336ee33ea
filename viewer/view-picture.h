/* A ring slot as a picture to draw: how each plane goes into a texture, and how the shader turns samples into RGB
 * (the slot's colour matrix, range and bit depth), which part of the frame to show, turned how, at what aspect.
 * Pure: no GL calls, no I/O (view-render.c does those). */
#ifndef STREAMRECV_VIEW_PICTURE_H
#define STREAMRECV_VIEW_PICTURE_H

#include "streamrecv_shm.h"

#include <stdint.h>

#define VIEW_MAX_PLANES 3

/* What a plane's texels are. */
enum view_texel {
    VIEW_TEXEL_R8,   /* one 8-bit sample */
    VIEW_TEXEL_RG8,  /* two interleaved 8-bit samples (NV12 chroma) */
    VIEW_TEXEL_R16,  /* one 16-bit sample */
    VIEW_TEXEL_RG16, /* two interleaved 16-bit samples (P010 chroma) */
};

/* How the shader reads the planes. */
enum view_layout {
    VIEW_LAYOUT_PLANAR_YUV,    /* Y, U, V in planes 0, 1, 2 */
    VIEW_LAYOUT_SEMIPLANAR_YUV, /* Y in plane 0, U and V interleaved in plane 1 */
    VIEW_LAYOUT_GRAY,           /* Y alone */
    VIEW_LAYOUT_PLANAR_GBR,     /* G, B, R in planes 0, 1, 2 */
};

struct view_picture {
    uint32_t width, height; /* the frame's size in pixels */
    enum view_layout layout;
    uint32_t plane_count;
    enum view_texel texel[VIEW_MAX_PLANES];
    uint32_t texels_wide[VIEW_MAX_PLANES]; /* texture width: plane_width bytes over the texel's size */
    uint32_t texels_high[VIEW_MAX_PLANES];
    uint32_t row_texels[VIEW_MAX_PLANES]; /* the plane's stride in texels (GL_UNPACK_ROW_LENGTH) */
    /* rgb = matrix · (sample · scale − offset), samples read as normalised texels (0…1), column-major for GL. */
    float scale;     /* normalised texel → normalised code value of the bit depth (P010's << 6, 10 bits in 16) */
    float offset[3]; /* black and the chroma midpoint, as normalised code values */
    float matrix[9];
    /* Chroma is sampled bilinearly at the pixel's centre, as FFmpeg's conversion (libswscale) does: placing it
     * where H.264's default chroma location puts it measured 10 dB further from FFmpeg's RGB (ViewerTests). */
    /* The part to show, in texture coordinates of plane 0 (the slot's visible rectangle). */
    float crop[4]; /* x, y, width, height */
    uint32_t shown_width, shown_height; /* the visible rectangle in pixels */
    float aspect;    /* display width over height of the visible picture, pixel aspect applied */
    float rotation;  /* anticlockwise, in radians */
    int flip_horizontal, flip_vertical;
    const char *matrix_name; /* "BT.709", … for the overlay */
    int full_range;
};

/* The picture a checked slot describes; -1 (nothing to draw) for a pixel format the viewer has no shader for,
 * planes smaller than its format and size call for, or rows GL cannot be told (strides over 2^31). */
int view_picture_from_slot(const struct streamrecv_shm_slot *slot, struct view_picture *picture);

/* Whether two pictures need the same textures (same planes, same texel sizes): otherwise they are made anew. */
int view_picture_same_textures(const struct view_picture *a, const struct view_picture *b);

/* Where the picture goes in a window of `window_width` × `window_height`: the largest rectangle of its aspect
 * (after rotation) that fits, centred. */
void view_fit(const struct view_picture *picture, int window_width, int window_height, int *x, int *y, int *width,
              int *height);

/* Short name of a slot's pixel format ("NV12"). */
const char *view_pixel_format_name(uint32_t pixel_format);

#endif
