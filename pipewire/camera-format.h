/* A ring slot as PipeWire raw video: the SPA format it has, the one-block layout its planes take in a PipeWire
 * buffer (GStreamer's default layout for the format, which pipewiresrc, OBS and browsers assume for one block),
 * the copy into that layout, and the frame rate a ring's recent frames show. Pure: no PipeWire calls, no I/O. */
#ifndef STREAMRECV_CAMERA_FORMAT_H
#define STREAMRECV_CAMERA_FORMAT_H

#include "streamrecv_shm.h"

#include <stddef.h>
#include <stdint.h>

#define CAMERA_MAX_PLANES 3

struct camera_format {
    uint32_t spa_format; /* enum spa_video_format */
    uint32_t width;
    uint32_t height;
    uint32_t plane_count;
    uint32_t row_bytes[CAMERA_MAX_PLANES]; /* bytes of pixels in a row: what the slot must hold */
    uint32_t rows[CAMERA_MAX_PLANES];      /* rows of pixels: what the slot must hold */
    uint32_t stride[CAMERA_MAX_PLANES];    /* in the PipeWire buffer */
    uint32_t offset[CAMERA_MAX_PLANES];    /* in the PipeWire buffer */
    uint32_t size;                         /* bytes of the whole frame in the PipeWire buffer */
    /* Colorimetry, as SPA names it (enum spa_video_color_range / _matrix / _transfer / _primaries). */
    uint32_t color_range;
    uint32_t color_matrix;
    uint32_t transfer_function;
    uint32_t color_primaries;
    uint32_t aspect_num; /* pixel aspect ratio, 1:1 when the stream gives none */
    uint32_t aspect_den;
};

/* The format a checked slot describes. -1 when PipeWire has no name for its pixel format (GRAY10, whose 10-bit
 * values in the low bits of 16-bit words no SPA format means) or when the slot's planes do not have the sizes its
 * format and picture size call for (then nothing of it is copied anywhere). */
int camera_format_from_slot(const struct streamrecv_shm_slot *slot, struct camera_format *format);

/* Whether two formats describe the same PipeWire format (layout and colorimetry): frames of one can go into
 * buffers negotiated for the other. */
int camera_format_equal(const struct camera_format *a, const struct camera_format *b);

/* The slot's planes from `data` (its pixel data in the ring) into `destination` (format->size bytes), row by row;
 * padding between rows is left as it is. `format` is the slot's own (camera_format_from_slot). */
void camera_copy_planes(const struct camera_format *format, const struct streamrecv_shm_slot *slot,
                        const uint8_t *data, uint8_t *destination);

/* The frame rate that frames arriving at `times_ns` (CLOCK_MONOTONIC, oldest first; their first bytes) show: the
 * mean interval (the median when one interval is off by 2x: a pause), snapped to the nearest broadcast rate
 * (24000/1001 … 60) within 2 %, otherwise whole frames per second.
 * 0/1 ("variable", as SPA says it) from fewer than 2 times or intervals outside 1 ms … 10 s. */
void camera_rate_from_times(const uint64_t *times_ns, size_t count, uint32_t *num, uint32_t *den);

/* Short name of an SPA video format for messages ("NV12"). */
const char *camera_spa_format_name(uint32_t spa_format);

#endif
