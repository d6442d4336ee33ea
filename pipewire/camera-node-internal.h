/* What camera-node.c (the node's life: connection, events, formats) and camera-send.c (frames: buffers, graph
 * cycles) share. Every field is read and written under the thread loop's lock (PipeWire's callbacks run with it held). */
#ifndef STREAMRECV_CAMERA_NODE_INTERNAL_H
#define STREAMRECV_CAMERA_NODE_INTERNAL_H

#include "camera-node.h"

#include <pipewire/pipewire.h>

struct camera_node {
    struct pw_thread_loop *loop;
    struct pw_context *context;
    struct pw_core *core;
    struct pw_stream *stream;
    struct spa_hook listener;
    struct spa_hook core_listener;
    int connected;
    enum pw_stream_state state;
    char failure[256]; /* "" while the node works */
    struct camera_format offered;
    uint32_t rate_num, rate_den;
    int negotiated; /* the consumers settled on `offered` */
    int awaiting;   /* consumers were linked when the format changed: they will settle on the new one */
    int buffers;    /* buffers PipeWire gave the stream since the format was negotiated (it replaces them all) */
    uint64_t triggers_done;   /* graph cycles completed (counted in trigger_done, on PipeWire's thread) */
    uint64_t done_at_trigger; /* how many had when this node last started one */
    int triggered;            /* it started one since the stream started streaming */
    uint64_t last_sent_ns;    /* when the last frame went */
    int was_ready;            /* consumers could take frames when last looked at (note_readiness) */
    uint64_t ready_noted_ns;  /* when that was last said */
    struct pw_buffer *held; /* dequeued, not sent (its frame could not be read): used for the next frame */
    struct camera_node_counters counters;
};

/* Consumers are linked, settled on the offered format, and have buffers: frames can go. */
int camera_node_ready(const struct camera_node *node);
uint64_t camera_monotonic_ns(void);

#endif
