/* See camera-follow.h. */
#define _GNU_SOURCE
#include "camera-follow.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

volatile sig_atomic_t camera_stopping;

static uint64_t now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}

void camera_say(const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    fputs("streamrecv-camera: ", stderr);
    vfprintf(stderr, format, arguments);
    fputc('\n', stderr);
    va_end(arguments);
}

static int warning_due(struct quiet_warning *warning) {
    uint64_t now = now_ns();
    if (warning->last_ns != 0 && now - warning->last_ns < 10000000000ULL) {
        warning->suppressed++;
        return 0;
    }
    warning->last_ns = now;
    return 1;
}

/* ring_copy_fn for a look at a slot alone (its format, its times). */
static void take_nothing(void *context, const struct streamrecv_shm_slot *slot, const uint8_t *data) {
    (void)context, (void)slot, (void)data;
}

struct fill_context {
    struct camera *camera;
    uint64_t sequence;
    const struct camera_format *format;
    uint8_t *destination;
    int other_format;
};

static void take_into_buffer(void *context, const struct streamrecv_shm_slot *slot, const uint8_t *data) {
    struct fill_context *fill = context;
    struct camera_format format;
    fill->other_format = camera_format_from_slot(slot, &format) != 0 || !camera_format_equal(&format, fill->format);
    if (!fill->other_format) camera_copy_planes(fill->format, slot, data, fill->destination);
}

/* camera_fill_fn: the frame `sequence` from its slot into PipeWire's buffer. */
static enum camera_fill_result fill_from_ring(void *context, const struct camera_format *format, uint8_t *destination,
                                              struct camera_frame_info *info) {
    struct fill_context *fill = context;
    fill->format = format;
    fill->destination = destination;
    struct streamrecv_shm_slot slot;
    enum ring_read_result result = ring_read(&fill->camera->ring, fill->sequence, &slot, take_into_buffer, fill);
    if (result != RING_READ_DONE) return CAMERA_FILL_FAILED;
    if (fill->other_format) return CAMERA_FILL_OTHER_FORMAT;
    info->sequence = slot.sequence;
    info->pts_ns = (int64_t)slot.time_published_ns;
    info->corrupt = (slot.flags & STREAMRECV_FRAME_CORRUPT) != 0;
    info->discontinuity = fill->camera->discontinuity || (slot.flags & STREAMRECV_FRAME_DISCONTINUITY) != 0;
    /* A crop inside the picture only (a forged slot can say anything). */
    if (slot.visible_width > 0 && slot.visible_height > 0 && slot.visible_x <= slot.width &&
        slot.visible_y <= slot.height && slot.visible_width <= slot.width - slot.visible_x &&
        slot.visible_height <= slot.height - slot.visible_y &&
        (slot.visible_width != slot.width || slot.visible_height != slot.height)) {
        info->crop_x = slot.visible_x;
        info->crop_y = slot.visible_y;
        info->crop_width = slot.visible_width;
        info->crop_height = slot.visible_height;
    }
    return CAMERA_FILLED;
}

/* The rate the ring's recent frames arrived at (their first bytes). A ring holding fewer than three frames is given
 * up to 1 s for more, so that a camera started before the sender still announces a rate (a sender's first frames
 * often arrive together). */
static void measure_rate(struct camera *camera, uint32_t *num, uint32_t *den) {
    uint64_t deadline = now_ns() + 1000000000ULL;
    for (;;) {
        int truncated = 0;
        uint32_t seen = ring_wake_word(&camera->ring, &truncated);
        uint64_t latest = ring_latest(&camera->ring, &truncated);
        if (truncated) break;
        uint64_t times[8];
        size_t count = 0;
        uint64_t first = latest > 7 ? latest - 7 : 1;
        for (uint64_t i = 0; latest > 0 && i <= latest - first && count < 8; i++) {
            struct streamrecv_shm_slot slot;
            if (ring_read(&camera->ring, first + i, &slot, take_nothing, NULL) == RING_READ_DONE)
                times[count++] = slot.time_first_byte_ns;
        }
        camera_rate_from_times(times, count, num, den);
        if ((*num != 0 && count >= 3) || now_ns() >= deadline || camera_stopping) return;
        ring_wait(&camera->ring, seen, 100000000LL);
    }
    *num = 0;
    *den = 1;
}

/* Offers the format of the frame about to go (when it differs from the one offered) and waits a little for linked
 * consumers to take it, so that the frame itself still goes. */
static int offer(struct camera *camera, const struct camera_format *format) {
    if (camera->have_offer && camera_format_equal(format, &camera->offered)) return 0;
    uint32_t num = camera->rate_num, den = camera->rate_den;
    if (num == 0) measure_rate(camera, &num, &den);
    char error[256];
    if (camera_node_offer(camera->node, format, num, den, error, sizeof error) != 0) {
        camera_say("%s", error);
        return -1;
    }
    camera->offered = *format;
    camera->have_offer = 1;
    /* At most a line per 10 s: a forged ring can change its format with every frame. */
    if (warning_due(&camera->offer_warning)) {
        if (num)
            camera_say("offering %ux%u %s at %u/%u frames per second", format->width, format->height,
                camera_spa_format_name(format->spa_format), num, den);
        else
            camera_say("offering %ux%u %s (variable frame rate)", format->width, format->height,
                camera_spa_format_name(format->spa_format));
    }
    if (camera_node_wait_negotiated(camera->node, 1000000000LL) == CAMERA_NOT_TAKEN &&
        warning_due(&camera->negotiation_warning))
        camera_say("the linked consumers did not take %ux%u %s within 1 s: frames go nowhere until they do",
                   format->width, format->height, camera_spa_format_name(format->spa_format));
    return 0;
}

/* Sends frame `sequence` (published, possibly overwritten since). Returns -1 when the node can no longer work. */
static int send_frame(struct camera *camera, uint64_t sequence) {
    struct streamrecv_shm_slot slot;
    enum ring_read_result peeked = ring_read(&camera->ring, sequence, &slot, take_nothing, NULL);
    if (peeked == RING_READ_LAPPED) {
        uint64_t oldest = ring_oldest_after(&camera->ring, sequence, ring_latest(&camera->ring, &(int){ 0 }));
        camera->skipped += oldest > sequence ? oldest - sequence : 1;
        camera->next = oldest > sequence ? oldest : sequence + 1;
        camera->discontinuity = 1;
        return 0;
    }
    if (peeked == RING_READ_TRUNCATED) { /* the object shrank under the mapping: attach again */
        ring_detach(&camera->ring);
        camera->attached = 0;
        return 0;
    }
    if (peeked != RING_READ_DONE) {
        if (peeked == RING_READ_INVALID && warning_due(&camera->invalid_warning))
            camera_say("frame %llu in %s is not a valid frame (a damaged or forged ring): skipped",
                (unsigned long long)sequence, camera->path);
        camera->next = sequence + 1;
        return 0;
    }
    struct camera_format format;
    if (camera_format_from_slot(&slot, &format) != 0) {
        if (warning_due(&camera->format_warning)) {
            camera_say("frames of pixel format %u (%ux%u) have no PipeWire format: skipped (%llu more since the last "
                "warning)", slot.pixel_format, slot.width, slot.height,
                (unsigned long long)camera->format_warning.suppressed);
            camera->format_warning.suppressed = 0;
        }
        camera->skipped++;
        camera->next = sequence + 1;
        return 0;
    }
    if (offer(camera, &format) != 0) return -1;
    struct fill_context fill = { .camera = camera, .sequence = sequence };
    enum camera_send_result sent = camera_node_send(camera->node, fill_from_ring, &fill);
    camera->next = sequence + 1;
    if (sent == CAMERA_SENT) {
        camera->discontinuity = 0;
        camera->kicks_left = 5;
    } else if (sent == CAMERA_BUSY) {
        /* Every buffer is with the consumers: they are behind. The newest frame next, not a queue of old ones. */
        uint64_t latest = ring_latest(&camera->ring, &(int){ 0 });
        camera->skipped += 1 + (latest > sequence ? latest - sequence - 1 : 0);
        if (latest > sequence) camera->next = latest;
        camera->discontinuity = 1;
        if (warning_due(&camera->behind_warning))
            camera_say("the consumers are behind (every buffer still with them): going on from the newest frame");
    } else if (sent != CAMERA_NO_CONSUMER) {
        camera->skipped++;
    }
    return 0;
}

/* Attaches to the ring, waiting for it; 0 once attached, -1 when camera_stopping or when PipeWire failed meanwhile. */
static int attach(struct camera *camera) {
    int said = 0;
    char failure[256];
    while (!camera_stopping && camera_node_failure(camera->node, failure, sizeof failure) == NULL) {
        const char *problem = NULL;
        enum ring_attach_result result = ring_attach(camera->path, &camera->ring, &problem);
        if (result == RING_ATTACHED) {
            int truncated = 0;
            if (camera->replaced_inode != 0 && camera->ring.inode == camera->replaced_inode &&
                ring_state(&camera->ring, &truncated) == STREAMRECV_STATE_REPLACED) {
                /* Still the object that said it was replaced: wait for the name to lead to its successor. */
                ring_detach(&camera->ring);
                usleep(50000);
                continue;
            }
            camera->replaced_inode = 0;
            uint64_t latest = ring_latest(&camera->ring, &truncated);
            /* The first time, the newest frame there is (a camera shows a picture at once); after a restart,
             * everything the new object holds. */
            camera->next = camera->next == 0 ? (latest ? latest : 1) : ring_oldest_after(&camera->ring, 0, latest);
            camera->discontinuity = 1;
            camera->attached = 1;
            if (warning_due(&camera->attach_warning))
                camera_say("reading %s (%u slots)", camera->path, camera->ring.geometry.slot_count);
            return 0;
        }
        if (!said) {
            if (result == RING_NOT_A_RING) camera_say("%s is not a streamrecv ring (%s): waiting for the daemon to replace it",
                                               camera->path, problem ? problem : "?");
            else camera_say("waiting for %s (the daemon has not made it yet)", camera->path);
            said = 1;
        }
        usleep(result == RING_NOT_A_RING ? 1000000 : 50000);
    }
    return -1;
}

/* Follows the ring until stopped or PipeWire fails: 0, or 1 on failure. */
int camera_follow(struct camera *camera) {
    char failure[256];
    while (!camera_stopping) {
        if (camera_node_failure(camera->node, failure, sizeof failure)) {
            camera_say("%s", failure);
            return 1;
        }
        if (!camera->attached && attach(camera) != 0) continue; /* the loop's top says why */
        int truncated = 0;
        uint32_t seen = ring_wake_word(&camera->ring, &truncated);
        uint64_t latest = ring_latest(&camera->ring, &truncated);
        uint32_t state = truncated ? STREAMRECV_STATE_REPLACED : ring_state(&camera->ring, &truncated);
        int moved = truncated || ring_replaced(camera->path, &camera->ring);
        if (moved || state == STREAMRECV_STATE_REPLACED) {
            if (!moved) camera->replaced_inode = camera->ring.inode;
            if (warning_due(&camera->attach_warning))
                camera_say("%s was replaced (a daemon restart or a new format): attaching again", camera->path);
            ring_detach(&camera->ring);
            camera->attached = 0;
            continue;
        }
        if (latest >= UINT64_MAX / 2) { /* no writer numbers frames so far: a forged ring */
            if (warning_due(&camera->invalid_warning))
                camera_say("%s says its newest frame is %llu: not a ring a daemon writes; waiting for another",
                    camera->path, (unsigned long long)latest);
            ring_detach(&camera->ring);
            camera->attached = 0;
            usleep(1000000);
            continue;
        }
        if (latest + 1 < camera->next) { /* numbering started over in this object */
            camera->next = ring_oldest_after(&camera->ring, 0, latest);
            camera->discontinuity = 1;
        }
        if (camera->next <= latest) {
            /* Nobody linked: only the newest frame matters (its format is what the node offers). */
            if (camera->next < latest && camera->have_offer && !camera_node_linked(camera->node))
                camera->next = latest;
            if (send_frame(camera, camera->next) != 0) return 1;
            continue;
        }
        /* A frame left in the queue goes with a trigger of its own, not with the next frame's. */
        if (camera->kicks_left > 0 && camera_node_kick(camera->node) > 0) {
            camera->kicks_left--;
            ring_wait(&camera->ring, seen, 2000000LL);
            continue;
        }
        ring_wait(&camera->ring, seen, 100000000LL);
    }
    return 0;
}
