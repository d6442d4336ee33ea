/* The PipeWire side of streamrecv-camera: one Video/Source node that drives its own graph, pushing a buffer each
 * time a frame is sent (pw_stream_trigger_process) instead of on a timer, so a frame leaves as soon as it is in the
 * ring. PipeWire runs on its own thread (pw_thread_loop); every call here takes that loop's lock, which is what
 * guards the negotiated format and the buffers against that thread. */
#ifndef STREAMRECV_CAMERA_NODE_H
#define STREAMRECV_CAMERA_NODE_H

#include "camera-format.h"

#include <stddef.h>
#include <stdint.h>

struct camera_node;

/* What goes with a frame: PipeWire's header metadata and the visible rectangle (crop metadata). */
struct camera_frame_info {
    uint64_t sequence;
    int64_t pts_ns; /* CLOCK_MONOTONIC, when the frame became readable */
    int corrupt;
    int discontinuity;
    uint32_t crop_x, crop_y, crop_width, crop_height; /* 0 x 0: the whole picture */
};

enum camera_fill_result {
    CAMERA_FILLED = 0,
    CAMERA_FILL_OTHER_FORMAT = 1, /* the frame is not of the negotiated format: renegotiate first */
    CAMERA_FILL_FAILED = -1,      /* the frame could not be read whole (overwritten, or the ring went away) */
};

/* Writes the frame into `destination` (`format->size` bytes, of the negotiated `format`). */
typedef enum camera_fill_result (*camera_fill_fn)(void *context, const struct camera_format *format,
                                                  uint8_t *destination, struct camera_frame_info *info);

enum camera_send_result {
    CAMERA_SENT = 0,
    CAMERA_NO_CONSUMER = 1,  /* nobody is linked, or the linked ones are still settling on a new format */
    CAMERA_BUSY = 2,         /* every buffer is still with the consumers: they are behind */
    CAMERA_OTHER_FORMAT = 3, /* the frame needs another format than the one negotiated */
    CAMERA_NOT_READ = 4,     /* fill failed */
};

struct camera_node_counters {
    uint64_t sent;
    uint64_t busy;
    uint64_t negotiations; /* formats the consumers settled on */
    uint64_t settle_timeouts; /* frames sent before the consumers finished the last one (they stalled) */
};

/* Connects to the PipeWire daemon of this session (PIPEWIRE_REMOTE, XDG_RUNTIME_DIR) and makes the node, which
 * shows once the first format is offered. NULL with `error` filled when PipeWire cannot be reached. */
struct camera_node *camera_node_new(const char *node_name, const char *description, char *error, size_t error_size);
void camera_node_free(struct camera_node *node);

/* Offers frames of `format` at `rate_num`/`rate_den` (0/1: variable): connects the node the first time,
 * renegotiates with the linked consumers when it changes. 0, or -1 with `error` filled. */
int camera_node_offer(struct camera_node *node, const struct camera_format *format, uint32_t rate_num,
                      uint32_t rate_den, char *error, size_t error_size);

enum camera_negotiation {
    CAMERA_NEGOTIATED = 0,    /* frames of the offered format can go now */
    CAMERA_NOBODY_LINKED = 1, /* nobody was linked when it was offered: frames go nowhere until someone links */
    CAMERA_NOT_TAKEN = 2,     /* linked consumers did not settle on it in time */
};

/* Waits up to `timeout_ns` for linked consumers to settle on the offered format; at once when none is linked. */
enum camera_negotiation camera_node_wait_negotiated(struct camera_node *node, int64_t timeout_ns);

/* Whether consumers are linked and frames of the offered format can be sent now. */
int camera_node_linked(struct camera_node *node);

/* Fills a free buffer through `fill` and sends it to the consumers. */
enum camera_send_result camera_node_send(struct camera_node *node, camera_fill_fn fill, void *context);

/* Frames queued but not yet taken by the graph: a trigger that came while the graph was still busy with the
 * previous frame leaves one behind. Triggers the graph again when there are; returns how many there were. */
uint32_t camera_node_kick(struct camera_node *node);

/* Triggers the graph until no frame is left queued, or `timeout_ns`. */
void camera_node_settle(struct camera_node *node, int64_t timeout_ns);

/* Why the node no longer works (PipeWire went away, or refused it), or NULL while it works. */
const char *camera_node_failure(struct camera_node *node, char *copy, size_t copy_size);

void camera_node_counters(struct camera_node *node, struct camera_node_counters *counters);

#endif
