/* A ring slot as GStreamer video: its format and caps, and its planes copied into a mapped frame. */
#ifndef STREAMRECV_SLOT_VIDEO_H
#define STREAMRECV_SLOT_VIDEO_H

#include "streamrecv_shm.h"

#include <gst/video/video.h>

/* The video info (caps) a checked slot describes; FALSE for a format GStreamer has no name for. Frame rate 0/1:
 * the ring carries no rate (frames come when they come). */
gboolean slot_video_info(const struct streamrecv_shm_slot *slot, GstVideoInfo *info);

/* The slot's planes, row by row, from `data` (its pixel data) into `frame` (mapped for writing, of the info
 * slot_video_info gave; rows and widths are clamped to the frame's own). */
void slot_copy_planes(const struct streamrecv_shm_slot *slot, const uint8_t *data, GstVideoFrame *frame);

#endif
