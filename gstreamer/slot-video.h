/* A ring slot as GStreamer video: its format and caps, and its planes copied into a mapped frame. */
#ifndef STREAMRECV_SLOT_VIDEO_H
#define STREAMRECV_SLOT_VIDEO_H

#include "streamrecv_shm.h"

#include <gst/video/video.h>

/* The video info (caps) a checked slot describes; FALSE for a format GStreamer has no name for. Frame rate 0/1:
 * the ring carries no rate (frames come when they come). */
gboolean slot_video_info(const struct streamrecv_shm_slot *slot, GstVideoInfo *info);

/* Whether the slot's planes are the ones its format and size make (`info`, from slot_video_info): as many, each
 * with the frame's rows and bytes a row. Only then does slot_copy_planes fill the whole frame: a forged slot
 * claiming a large picture with small planes would otherwise leave most of the buffer as it was. */
gboolean slot_planes_match(const struct streamrecv_shm_slot *slot, const GstVideoInfo *info);

/* The slot's planes, row by row, from `data` (its pixel data) into `frame` (mapped for writing, of the info
 * slot_video_info gave; rows and widths are clamped to the frame's own). */
void slot_copy_planes(const struct streamrecv_shm_slot *slot, const uint8_t *data, GstVideoFrame *frame);

#endif
