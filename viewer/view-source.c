/* See view-source.h. */
#define _GNU_SOURCE
#include "view-source.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}

/* Sets the status (and says it on standard error when it changed), then wakes the window. */
static void set_status(struct view_source *source, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void set_status(struct view_source *source, const char *format, ...) {
    char text[sizeof source->status];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(text, sizeof text, format, arguments);
    va_end(arguments);
    pthread_mutex_lock(&source->lock);
    int changed = strcmp(text, source->status) != 0;
    if (changed) memcpy(source->status, text, sizeof text);
    pthread_mutex_unlock(&source->lock);
    if (changed) {
        if (text[0]) fprintf(stderr, "streamrecv-view: %s\n", text);
        source->notify(source->notify_context);
    }
}

struct copy_context {
    struct view_frame *frame;
    int attempts;
    int failed;
};

/* The most bytes of pixels one frame may need: 8K 4:4:4 at 16 bits is 200 MB. */
#define LARGEST_FRAME ((uint64_t)512 << 20)

/* The bytes the slot's planes take, from the start of its data: all that is copied. A slot's `data_size` is only
 * what it says (a forged one says 512 MiB for a 320x240 frame, which would be copied, and kept, for nothing). */
static uint64_t bytes_used(const struct streamrecv_shm_slot *slot) {
    uint64_t end = 0;
    for (uint32_t i = 0; i < slot->plane_count && i < STREAMRECV_SHM_MAX_PLANES; i++) {
        if (slot->plane_height[i] == 0) continue;
        uint64_t plane_end = slot->plane_offset[i] + (uint64_t)slot->plane_stride[i] * (slot->plane_height[i] - 1) +
                             slot->plane_width[i];
        if (plane_end > end) end = plane_end;
    }
    return end;
}

/* ring_copy_fn: the slot's planes into the frame being filled (ring_read checked they lie inside its data). */
static void copy_pixels(void *context, const struct streamrecv_shm_slot *slot, const uint8_t *data) {
    struct copy_context *copy = context;
    struct view_frame *frame = copy->frame;
    uint64_t used = bytes_used(slot);
    /* A real writer tears a copy once at most; a forged ring that tears every one would have us copy it 64 times
     * per frame. */
    copy->failed = ++copy->attempts > 2 || used > LARGEST_FRAME || used > slot->data_size;
    if (copy->failed) return;
    /* Grown as frames need, and given back when a frame needs far less (a large format gone by). */
    if (used > frame->capacity || (frame->capacity > 2 * used + (16u << 20))) {
        free(frame->data);
        frame->capacity = 0;
        if (!(frame->data = malloc(used ? used : 1))) {
            copy->failed = 1;
            return;
        }
        frame->capacity = used;
    }
    memcpy(frame->data, data, used);
}

/* Copies frame `sequence` out and hands it to the window. 1 when it did, 0 when it could not be read, -1 when the
 * object shrank under the mapping. */
static int take_frame(struct view_source *source, struct ring_reader *ring, uint64_t sequence) {
    struct view_frame *frame = &source->frames[source->filling];
    struct copy_context copy = { .frame = frame };
    enum ring_read_result result = ring_read(ring, sequence, &frame->slot, copy_pixels, &copy);
    if (result == RING_READ_TRUNCATED) return -1;
    if (result != RING_READ_DONE || copy.failed) return 0;
    frame->taken_ns = now_ns();
    pthread_mutex_lock(&source->lock);
    if (source->fresh) source->lapped++; /* the window never took the one before */
    int filled = source->filling;
    source->filling = source->ready;
    source->ready = filled;
    source->fresh = 1;
    source->copied++;
    pthread_mutex_unlock(&source->lock);
    source->notify(source->notify_context);
    return 1;
}

/* Attaches to the ring, waiting for it; 0 once attached, -1 when stopping. `replaced`: an object that said it was
 * replaced, not attached again until the name leads elsewhere. */
static int attach(struct view_source *source, struct ring_reader *ring, ino_t replaced) {
    while (!atomic_load(&source->stopping)) {
        const char *problem = NULL;
        enum ring_attach_result result = ring_attach(source->path, ring, &problem);
        if (result == RING_ATTACHED) {
            int truncated = 0;
            if (replaced != 0 && ring->inode == replaced && ring_state(ring, &truncated) == STREAMRECV_STATE_REPLACED) {
                ring_detach(ring);
                usleep(50000);
                continue;
            }
            return 0;
        }
        if (result == RING_NOT_A_RING)
            set_status(source, "%s is not a streamrecv ring (%s): waiting for the daemon to replace it", source->path,
                       problem ? problem : "?");
        else
            set_status(source, "waiting for %s (the daemon has not made it yet)", source->path);
        /* Not a ring: looked at again every second, in steps that keep quitting prompt. */
        for (int step = 0; step < (result == RING_NOT_A_RING ? 20 : 1) && !atomic_load(&source->stopping); step++)
            usleep(50000);
    }
    return -1;
}

static const char *state_text(uint32_t state) {
    switch (state) {
    case STREAMRECV_STATE_STARTING: return "the stream is starting";
    case STREAMRECV_STATE_WAITING: return "waiting for a sender";
    case STREAMRECV_STATE_DEGRADED: return "decoding failed: waiting for the next keyframe";
    case STREAMRECV_STATE_STOPPED: return "the daemon stopped the stream";
    default: return "";
    }
}

static void *follow(void *context) {
    struct view_source *source = context;
    struct ring_reader ring;
    ino_t replaced = 0;
    /* The newest frame taken. Kept across objects: a new one starts with copies of the newest frames, under their
     * numbers, which the window has shown already. */
    uint64_t shown = 0;
    while (attach(source, &ring, replaced) == 0) {
        replaced = 0;
        set_status(source, "%s", "");
        while (!atomic_load(&source->stopping)) {
            int truncated = 0;
            uint32_t seen = ring_wake_word(&ring, &truncated);
            uint64_t latest = ring_latest(&ring, &truncated);
            uint32_t state = truncated ? STREAMRECV_STATE_REPLACED : ring_state(&ring, &truncated);
            if (truncated || ring_replaced(source->path, &ring) || state == STREAMRECV_STATE_REPLACED) {
                if (!truncated && state == STREAMRECV_STATE_REPLACED) replaced = ring.inode;
                break;
            }
            pthread_mutex_lock(&source->lock);
            int state_changed = source->state != state;
            source->state = state;
            pthread_mutex_unlock(&source->lock);
            if (state_changed) set_status(source, "%s", state_text(state));
            /* A restarted daemon may number from 1 again in a new object: a latest below ours starts over. */
            if (latest < shown) shown = 0;
            if (latest > shown) {
                int taken = take_frame(source, &ring, latest);
                if (taken < 0) break;
                if (taken > 0) {
                    /* Frames published between the one shown before and this one never reached the window. */
                    if (shown > 0 && latest - shown > 1) {
                        pthread_mutex_lock(&source->lock);
                        source->lapped += latest - shown - 1;
                        pthread_mutex_unlock(&source->lock);
                    }
                    shown = latest;
                    continue; /* a newer one may be there already */
                }
                shown = latest; /* unreadable (lapped or invalid): the next one, when it comes */
            }
            ring_wait(&ring, seen, 200000000LL);
        }
        ring_detach(&ring);
    }
    return NULL;
}

int view_source_start(struct view_source *source, const char *path, void (*notify)(void *), void *context) {
    memset(source, 0, sizeof *source);
    source->path = path;
    source->notify = notify;
    source->notify_context = context;
    source->filling = 0, source->ready = 1, source->shown = 2;
    source->state = STREAMRECV_STATE_STREAMING;
    pthread_mutex_init(&source->lock, NULL);
    return pthread_create(&source->thread, NULL, follow, source) == 0 ? 0 : -1;
}

void view_source_stop(struct view_source *source) {
    atomic_store(&source->stopping, 1);
    pthread_join(source->thread, NULL);
    for (int i = 0; i < 3; i++) free(source->frames[i].data);
    pthread_mutex_destroy(&source->lock);
}

const struct view_frame *view_source_take(struct view_source *source) {
    pthread_mutex_lock(&source->lock);
    const struct view_frame *frame = NULL;
    if (source->fresh) {
        int taken = source->ready;
        source->ready = source->shown;
        source->shown = taken;
        source->fresh = 0;
        frame = &source->frames[taken];
    }
    pthread_mutex_unlock(&source->lock);
    return frame;
}

void view_source_read_status(struct view_source *source, char *status, size_t size, uint64_t *lapped, uint32_t *state) {
    pthread_mutex_lock(&source->lock);
    snprintf(status, size, "%s", source->status);
    *lapped = source->lapped;
    *state = source->state;
    pthread_mutex_unlock(&source->lock);
}
