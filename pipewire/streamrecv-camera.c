/* streamrecv-camera: a streamrecvd stream as a PipeWire camera (a Video/Source node named streamrecv-NAME), for
 * OBS, browsers and anything else that takes a PipeWire camera. `streamrecvctl camera NAME` runs it. It follows
 * the ring as every reader does (waits for it, follows size changes by renegotiating, and daemon restarts by
 * attaching again) and sends each frame as soon as it is published: every frame in order while the consumers
 * keep up, the newest once they fall behind. Frames are copied once, from the slot into PipeWire's buffer, and
 * sent only when the copy was seen whole (the slot's seqlock). */
#define _GNU_SOURCE
#include "camera-format.h"
#include "camera-node.h"
#include "ring-reader.h"

#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stopping;
static void on_stop_signal(int number) { (void)number; stopping = 1; }

static uint64_t now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}

static void say(const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    fputs("streamrecv-camera: ", stderr);
    vfprintf(stderr, format, arguments);
    fputc('\n', stderr);
    va_end(arguments);
}

/* A warning said at most once per 10 s; how many times it happened meanwhile goes with the next one. */
struct quiet_warning {
    uint64_t last_ns;
    uint64_t suppressed;
};

static int warning_due(struct quiet_warning *warning) {
    uint64_t now = now_ns();
    if (warning->last_ns != 0 && now - warning->last_ns < 10000000000ULL) {
        warning->suppressed++;
        return 0;
    }
    warning->last_ns = now;
    return 1;
}

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
    struct quiet_warning behind_warning, format_warning, invalid_warning;
};

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
    if (slot.visible_width > 0 && slot.visible_height > 0 &&
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
        for (uint64_t sequence = latest > 7 ? latest - 7 : 1; sequence <= latest && count < 8; sequence++) {
            struct streamrecv_shm_slot slot;
            if (ring_read(&camera->ring, sequence, &slot, take_nothing, NULL) == RING_READ_DONE)
                times[count++] = slot.time_first_byte_ns;
        }
        camera_rate_from_times(times, count, num, den);
        if ((*num != 0 && count >= 3) || now_ns() >= deadline || stopping) return;
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
        say("%s", error);
        return -1;
    }
    camera->offered = *format;
    camera->have_offer = 1;
    if (num) say("offering %ux%u %s at %u/%u frames per second", format->width, format->height,
                 camera_spa_format_name(format->spa_format), num, den);
    else say("offering %ux%u %s (variable frame rate)", format->width, format->height,
             camera_spa_format_name(format->spa_format));
    camera_node_wait_negotiated(camera->node, 500000000LL);
    return 0;
}

/* Sends frame `sequence` (published, possibly overwritten since). Returns -1 when the node can no longer work. */
static int send_frame(struct camera *camera, uint64_t sequence) {
    struct streamrecv_shm_slot slot;
    enum ring_read_result peeked = ring_read(&camera->ring, sequence, &slot, take_nothing, NULL);
    if (peeked == RING_READ_LAPPED) {
        uint64_t oldest = ring_oldest_after(&camera->ring, sequence, ring_latest(&camera->ring, &(int){ 0 }));
        camera->skipped += oldest - sequence;
        camera->next = oldest;
        camera->discontinuity = 1;
        return 0;
    }
    if (peeked != RING_READ_DONE) {
        if (peeked == RING_READ_INVALID && warning_due(&camera->invalid_warning))
            say("frame %llu in %s is not a valid frame (a damaged or forged ring): skipped",
                (unsigned long long)sequence, camera->path);
        camera->next = sequence + 1;
        return 0;
    }
    struct camera_format format;
    if (camera_format_from_slot(&slot, &format) != 0) {
        if (warning_due(&camera->format_warning))
            say("frames of pixel format %u (%ux%u) have no PipeWire format: skipped (%llu more since the last "
                "warning)", slot.pixel_format, slot.width, slot.height,
                (unsigned long long)camera->format_warning.suppressed);
        camera->format_warning.suppressed = 0;
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
            say("the consumers are behind (every buffer still with them): going on from the newest frame");
    } else if (sent != CAMERA_NO_CONSUMER) {
        camera->skipped++;
    }
    return 0;
}

/* Attaches to the ring, waiting for it; 0 once attached, -1 when stopping or when PipeWire failed meanwhile. */
static int attach(struct camera *camera) {
    int said = 0;
    char failure[256];
    while (!stopping && camera_node_failure(camera->node, failure, sizeof failure) == NULL) {
        const char *problem = NULL;
        enum ring_attach_result result = ring_attach(camera->path, &camera->ring, &problem);
        if (result == RING_ATTACHED) {
            int truncated = 0;
            uint64_t latest = ring_latest(&camera->ring, &truncated);
            /* The first time, the newest frame there is (a camera shows a picture at once); after a restart,
             * everything the new object holds. */
            camera->next = camera->next == 0 ? (latest ? latest : 1) : ring_oldest_after(&camera->ring, 0, latest);
            camera->discontinuity = 1;
            camera->attached = 1;
            say("reading %s (%u slots)", camera->path, camera->ring.geometry.slot_count);
            return 0;
        }
        if (!said) {
            if (result == RING_NOT_A_RING) say("%s is not a streamrecv ring (%s): waiting for the daemon to replace it",
                                               camera->path, problem ? problem : "?");
            else say("waiting for %s (the daemon has not made it yet)", camera->path);
            said = 1;
        }
        usleep(result == RING_NOT_A_RING ? 1000000 : 50000);
    }
    return -1;
}

/* Follows the ring until stopped or PipeWire fails: 0, or 1 on failure. */
static int follow(struct camera *camera) {
    char failure[256];
    while (!stopping) {
        if (camera_node_failure(camera->node, failure, sizeof failure)) {
            say("%s", failure);
            return 1;
        }
        if (!camera->attached && attach(camera) != 0) continue; /* the loop's top says why */
        int truncated = 0;
        uint32_t seen = ring_wake_word(&camera->ring, &truncated);
        uint64_t latest = ring_latest(&camera->ring, &truncated);
        uint32_t state = truncated ? STREAMRECV_STATE_REPLACED : ring_state(&camera->ring, &truncated);
        if (truncated || state == STREAMRECV_STATE_REPLACED || ring_replaced(camera->path, &camera->ring)) {
            say("%s was replaced (a daemon restart or a new format): attaching again", camera->path);
            ring_detach(&camera->ring);
            camera->attached = 0;
            continue;
        }
        if (latest + 1 < camera->next) { /* numbering started over in this object */
            camera->next = ring_oldest_after(&camera->ring, 0, latest);
            camera->discontinuity = 1;
        }
        if (camera->next <= latest) {
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

static void usage(FILE *to) {
    fputs("usage: streamrecv-camera [--shm SHMNAME] [--node-name NAME] [--description TEXT] [--rate N[/D]] STREAM\n"
          "Offers the frames of streamrecvd's stream STREAM as a PipeWire camera (a Video/Source node named\n"
          "streamrecv-STREAM), until SIGINT or SIGTERM. Exit status 1 when PipeWire cannot be reached or fails,\n"
          "2 on a usage error.\n", to);
}

static int valid_name(const char *name) {
    size_t length = strlen(name);
    if (length == 0 || length > 200 || name[0] == '.') return 0;
    for (size_t i = 0; i < length; i++)
        if (!(name[i] == '-' || name[i] == '_' || name[i] == '.' || (name[i] >= '0' && name[i] <= '9') ||
              (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z')))
            return 0;
    return 1;
}

int main(int argc, char **argv) {
    static const struct option options[] = {
        { "shm", required_argument, NULL, 's' }, { "node-name", required_argument, NULL, 'n' },
        { "description", required_argument, NULL, 'd' }, { "rate", required_argument, NULL, 'r' },
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
    };
    const char *shm = NULL, *node_name = NULL, *description = NULL;
    struct camera camera = { 0 };
    for (int option; (option = getopt_long(argc, argv, "h", options, NULL)) != -1;) {
        switch (option) {
        case 's': shm = optarg; break;
        case 'n': node_name = optarg; break;
        case 'd': description = optarg; break;
        case 'r': {
            unsigned num = 0, den = 1;
            int fields = sscanf(optarg, "%u/%u", &num, &den);
            if (fields < 1 || num == 0 || num > 1000000 || den == 0 || den > 1000000) {
                fprintf(stderr, "streamrecv-camera: --rate takes N or N/D (30, 30000/1001), not %s\n", optarg);
                return 2;
            }
            camera.rate_num = num;
            camera.rate_den = den;
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind + 1 != argc && !(optind == argc && shm)) {
        usage(stderr);
        return 2;
    }
    const char *stream = optind < argc ? argv[optind] : NULL;
    if ((stream && !valid_name(stream)) || (shm && !valid_name(shm[0] == '/' ? shm + 1 : shm)) ||
        (node_name && !valid_name(node_name))) {
        fprintf(stderr, "streamrecv-camera: names are letters, digits, '-', '_' and '.', not starting with '.'\n");
        return 2;
    }
    char path[256], default_node[256], default_description[300];
    if (shm) snprintf(path, sizeof path, "/dev/shm/%s", shm[0] == '/' ? shm + 1 : shm);
    else snprintf(path, sizeof path, "/dev/shm/streamrecv-%s", stream);
    snprintf(default_node, sizeof default_node, "%s", path + strlen("/dev/shm/"));
    snprintf(default_description, sizeof default_description, "streamrecv %s", stream ? stream : default_node);
    camera.path = path;

    struct sigaction action = { 0 };
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);

    char error[512];
    camera.node = camera_node_new(node_name ? node_name : default_node, description ? description : default_description,
                                  error, sizeof error);
    if (camera.node == NULL) {
        say("%s", error);
        return 1;
    }
    say("node %s for %s", node_name ? node_name : default_node, path);
    int status = follow(&camera);
    struct camera_node_counters counters;
    camera_node_counters(camera.node, &counters);
    say("sent %llu frames, skipped %llu (consumers busy %llu times), formats negotiated %llu",
        (unsigned long long)counters.sent, (unsigned long long)camera.skipped, (unsigned long long)counters.busy,
        (unsigned long long)counters.negotiations);
    if (camera.attached) ring_detach(&camera.ring);
    camera_node_free(camera.node);
    return status;
}
