/* The ring side of the viewer: a thread that waits for the ring, follows it across a daemon's restarts and new
 * objects, and copies out the newest frame whenever one is published, for the window's thread to take. Three
 * frame buffers: the thread fills one while the window draws another; the third holds the newest frame not yet
 * taken, which a newer one replaces (counted as lapped): the window never gets an older frame than the newest. */
#ifndef STREAMRECV_VIEW_SOURCE_H
#define STREAMRECV_VIEW_SOURCE_H

#include "ring-reader.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct view_frame {
    struct streamrecv_shm_slot slot; /* the checked copy of its slot */
    uint8_t *data;                   /* its pixel data, as far as its planes reach */
    size_t capacity;
    uint64_t taken_ns; /* when it was copied out of the ring (CLOCK_MONOTONIC) */
};

struct view_source {
    const char *path;
    /* Called on the source's thread when a frame is ready or the status changed (it wakes the window). */
    void (*notify)(void *context);
    void *notify_context;
    pthread_t thread;
    atomic_int stopping;
    pthread_mutex_t lock;
    /* Under `lock`. */
    struct view_frame frames[3];
    int filling, ready, shown; /* indices into frames */
    int fresh;                 /* `ready` holds a frame not taken yet */
    uint64_t lapped;           /* frames published that the window never got */
    uint64_t copied;           /* frames copied out */
    char status[160];          /* what the source is doing, when it is not simply showing frames */
    uint32_t state;            /* the ring's stream state (enum streamrecv_stream_state) */
};

/* Starts following `path`; -1 when no thread could be started. */
int view_source_start(struct view_source *source, const char *path, void (*notify)(void *), void *context);
void view_source_stop(struct view_source *source);

/* The newest frame not taken yet, or NULL. It stays the caller's until the next call. */
const struct view_frame *view_source_take(struct view_source *source);

/* Copies the status line and the counters. */
void view_source_read_status(struct view_source *source, char *status, size_t size, uint64_t *lapped, uint32_t *state);

#endif
