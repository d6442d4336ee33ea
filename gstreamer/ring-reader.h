/* The ring side of streamrecvsrc: attaching to /dev/shm/streamrecv-NAME and copying frames out, from
 * streamrecv_shm.h alone (the same rules as docs/examples/consumer.c). Nothing in the object is trusted: the header
 * is validated once against the mapped size and each slot is checked after it is copied out under its seqlock. */
#ifndef STREAMRECV_RING_READER_H
#define STREAMRECV_RING_READER_H

#include "streamrecv_shm.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ring_reader {
    const void *base;
    size_t size;
    ino_t inode;
    struct streamrecv_shm_geometry geometry; /* validated once; the header's own geometry is never read again */
};

enum ring_attach_result {
    RING_ATTACHED = 0,
    RING_MISSING = -2,    /* no object under the name (yet) */
    RING_NOT_A_RING = -1, /* something is there, but not a valid ring: `problem` says what */
};

/* Whether `name` may be a name under /dev/shm: letters, digits, '-', '_' and '.', not starting with '.', at most
 * 200 bytes (nothing that leads elsewhere, such as "../etc"). */
int ring_name_valid(const char *name);

/* Maps `path` read-only. On RING_NOT_A_RING, `problem` (if given) points to a static description. */
enum ring_attach_result ring_attach(const char *path, struct ring_reader *ring, const char **problem);
void ring_detach(struct ring_reader *ring);

/* Whether `path` now leads to another object than the one mapped (the writer made a new one). */
int ring_replaced(const char *path, const struct ring_reader *ring);

enum ring_read_result {
    RING_READ_DONE = 1,
    RING_READ_NOT_YET = 0,   /* not published yet (or torn 64 times in a row: a forged ring; try again later) */
    RING_READ_LAPPED = -1,   /* overwritten before it could be read, or older than this object */
    RING_READ_INVALID = -3,  /* the slot does not describe a valid frame */
    RING_READ_TRUNCATED = -4 /* the object shrank under the mapping (SIGBUS caught): attach again */
};

/* Takes a frame's pixels while the seqlock is held: `slot` is the checked copy of its slot, `data` its pixel data
 * in the ring. Called again when the copy turns out torn; what it copied is only valid once ring_read returns
 * RING_READ_DONE. A truncated object may end it half way (ring_read then returns RING_READ_TRUNCATED). */
typedef void (*ring_copy_fn)(void *context, const struct streamrecv_shm_slot *slot, const uint8_t *data);

/* Copies frame `sequence`'s slot into `copy`, and hands its pixels to `take`. */
enum ring_read_result ring_read(const struct ring_reader *ring, uint64_t sequence, struct streamrecv_shm_slot *copy,
                                ring_copy_fn take, void *context);

/* Header fields, read under the SIGBUS guard: 0 when the object was truncated. `*truncated` is set then. */
uint64_t ring_latest(const struct ring_reader *ring, int *truncated);
uint32_t ring_state(const struct ring_reader *ring, int *truncated);
uint64_t ring_epoch(const struct ring_reader *ring, int *truncated);
uint32_t ring_wake_word(const struct ring_reader *ring, int *truncated);

/* The oldest frame after `sequence` the object holds, or `latest + 1` when it holds none: where to go on after a
 * lap, or in an object whose numbering started over. */
uint64_t ring_oldest_after(const struct ring_reader *ring, uint64_t sequence, uint64_t latest);

/* Sleeps until the writer's next publish or state change, or `timeout_ns`. */
void ring_wait(const struct ring_reader *ring, uint32_t seen, int64_t timeout_ns);

#endif
