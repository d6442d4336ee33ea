/* Following a ring for the camera: waiting for it, reading each frame's format, offering it, sending frames as
 * they are published, attaching again when the daemon makes a new object (streamrecv-camera.c runs it). */
#ifndef STREAMRECV_CAMERA_FOLLOW_H
#define STREAMRECV_CAMERA_FOLLOW_H

#include "camera-format.h"
#include "camera-node.h"
#include "ring-reader.h"

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

/* A warning said at most once per 10 s; how many times it happened meanwhile goes with the next one. */
struct quiet_warning {
    uint64_t last_ns;
    uint64_t suppressed;
};

struct camera {
    const char *path;
    struct ring_reader ring;
    int attached;
    uint64_t next; /* the next frame to send */
    int discontinuity;
    struct camera_node *node;
    struct camera_format offered;
    int have_offer;
    uint32_t rate_num, rate_den; /* --rate, or 0 to measure */
    uint64_t skipped;            /* frames passed over: the consumers were behind, or the format could not go */
    unsigned kicks_left;         /* triggers for a frame left queued, before the next frame comes */
    ino_t replaced_inode; /* an object that said it was replaced: not attached again until the name leads elsewhere */
    struct quiet_warning behind_warning, format_warning, invalid_warning, offer_warning, attach_warning,
        negotiation_warning;
};

/* Set by SIGINT and SIGTERM: every wait in camera_follow ends soon after. */
extern volatile sig_atomic_t camera_stopping;

/* A line on standard error, "streamrecv-camera: " first. */
void camera_say(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* Follows camera->path until stopped (0) or until PipeWire fails (1, said). */
int camera_follow(struct camera *camera);

#endif
