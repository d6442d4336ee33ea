/* A complete streamrecvd consumer in C: everything it needs is streamrecv_shm.h.
 *
 *   cc -std=c11 -O2 -I Sources/CFrameRing/include docs/examples/consumer.c -o consumer
 *   ./consumer desk 100 > frames.yuv      # 100 frames of stream "desk", tightly packed planes
 *   ./consumer desk 100 60                # the same, waiting up to 60 s for a frame instead of 10
 *
 * It attaches read-only to /dev/shm/streamrecv-NAME and validates the header once against the size it mapped
 * (anyone can create an object there: nothing in it is trusted), keeping only the validated geometry. For each
 * frame it sleeps on the futex until the writer publishes, copies the slot out under its seqlock (a torn copy is
 * retried, a lapped frame is reported and skipped), checks the copied slot, and writes the planes without row
 * padding to standard output. When the daemon moves the stream to a new object (a larger format, a restart with
 * other settings) or the object is truncated under it (SIGBUS, caught), it opens the name again.
 * Discontinuities (a new sender, a decoder reset, lost data, a daemon restart) are reported on standard error.
 * Exit status: 0 after FRAMES frames, 1 on errors (not a ring, a damaged slot), 2 when no frame arrives for
 * TIMEOUT seconds (10 unless given). */
#define _GNU_SOURCE
#include "streamrecv_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct ring {
    const void *base;
    size_t size;
    ino_t inode;
    struct streamrecv_shm_geometry geometry; /* validated once; the header's own values are never used again */
};

/* A truncated object raises SIGBUS on access: the copies below run under this jump point. */
static sigjmp_buf bus_error;
static volatile sig_atomic_t copying;

static void on_bus_error(int signal_number) {
    if (copying) siglongjmp(bus_error, 1);
    signal(signal_number, SIG_DFL);
    raise(signal_number);
}

static int attach(const char *name, struct ring *ring, int quiet) {
    char path[256];
    snprintf(path, sizeof path, "/dev/shm/streamrecv-%s", name);
    /* O_NONBLOCK: a FIFO planted under the name must not hang open(2). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return -2; /* not there yet: the caller may wait for the daemon to make it */
        if (!quiet) perror(path);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < STREAMRECV_SHM_HEADER_SIZE) {
        if (!quiet) fprintf(stderr, "%s: not a streamrecv ring (not a plain object, or too small)\n", path);
        close(fd);
        return -1;
    }
    /* The writer reserves every page; a sparse object claiming terabytes is a forgery (we would allocate its
     * slot capacity). */
    if ((uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size) {
        if (!quiet) fprintf(stderr, "%s: not a streamrecv ring (a sparse object)\n", path);
        close(fd);
        return -1;
    }
    void *base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) { perror("mmap"); return -1; }
    const char *problem = "it shrank while being read";
    copying = 1;
    if (sigsetjmp(bus_error, 1) == 0) problem = streamrecv_shm_check_header(base, (uint64_t)st.st_size, &ring->geometry);
    copying = 0;
    if (problem) {
        if (!quiet) fprintf(stderr, "%s: not a streamrecv ring of ABI %u: %s\n", path, STREAMRECV_SHM_ABI_VERSION, problem);
        munmap(base, (size_t)st.st_size);
        return -1;
    }
    ring->base = base;
    ring->size = (size_t)st.st_size;
    ring->inode = st.st_ino;
    return 0;
}

static void detach(struct ring *ring) {
    munmap((void *)ring->base, ring->size);
    ring->base = NULL;
}

/* Whether the name now leads to another object than the one mapped (the writer moved on). */
static int replaced(const char *name, const struct ring *ring) {
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "/dev/shm/streamrecv-%s", name);
    return stat(path, &st) == 0 && st.st_ino != ring->inode;
}

static double monotonic_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

/* Copies frame `sequence` into `copy` and `pixels` (at least slot_data_capacity bytes). Returns 1 done, 0 not
 * published yet (or torn 64 times in a row, which only a forged ring does: try again later), -1 lapped (overwritten, or older than this object), -2 being overwritten (the next frame is
 * whole), -3 the slot is not a valid frame. Called with the SIGBUS jump point set: a truncated object lands there. */
static int read_frame(const struct ring *ring, uint64_t sequence, struct streamrecv_shm_slot *copy, uint8_t *pixels) {
    const struct streamrecv_shm_header *header = ring->base;
    uint32_t index = (uint32_t)((sequence - 1) % ring->geometry.slot_count);
    const struct streamrecv_shm_slot *slot = streamrecv_shm_slot_in(ring->base, &ring->geometry, index);
    for (int torn = 0; torn < 64; torn++) {
        uint64_t latest = streamrecv_shm_load_u64(&header->latest_sequence);
        if (sequence > latest) return 0;
        /* Never written while latest says the frame exists: this object began after it. */
        if (streamrecv_shm_load_u64(&slot->seqlock) == 0) return -1;
        uint64_t begin = streamrecv_shm_read_begin(slot);
        /* The writer is in this slot, which it only fills with frame latest + 1: a frame before latest is being
         * overwritten (lapped); frame latest itself, wait for the writer's wake-up (or it died mid-write). */
        if (begin == 0) return sequence < latest ? -2 : 0;
        memcpy(copy, slot, sizeof *copy);
        int valid = copy->sequence == sequence && streamrecv_shm_check_slot(copy, &ring->geometry) == NULL;
        if (valid) memcpy(pixels, streamrecv_shm_data_in(ring->base, &ring->geometry, index), copy->data_size);
        if (!streamrecv_shm_read_end(slot, begin)) continue; /* torn: written meanwhile, copy again */
        if (copy->sequence == sequence) return valid ? 1 : -3;
        return -1;
    }
    return 0;
}

/* The stream moved to a new object (or this one was truncated): map what the name leads to now, once it is a
 * different object. Frames and sequence numbers go on there. */
static int follow(const char *name, struct ring *ring) {
    for (int tries = 0; tries < 1000; tries++) {
        struct ring moved = { 0 };
        if (attach(name, &moved, 1) == 0) {
            if (moved.inode != ring->inode) {
                detach(ring);
                *ring = moved;
                fprintf(stderr, "consumer: the stream moved to a new object; following it\n");
                return 0;
            }
            detach(&moved);
        }
        usleep(10000);
    }
    fprintf(stderr, "consumer: the ring was not re-created\n");
    return -1;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s NAME [FRAMES [TIMEOUT]]\n", argv[0]); return 1; }
    long wanted = argc > 2 ? atol(argv[2]) : -1;
    /* Seconds without a frame before giving up, whatever the ring does meanwhile (a forged one can keep a reader
     * lapping, or wake it, for ever). */
    double timeout = argc > 3 && atof(argv[3]) > 0 ? atof(argv[3]) : 10;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_bus_error;
    sigaction(SIGBUS, &action, NULL);
    struct ring ring;
    /* The daemon may not have made the ring yet (socket activation starts it at the first connection): wait. */
    int attached;
    for (int told = 0; (attached = attach(argv[1], &ring, 0)) == -2; told = 1) {
        if (!told) fprintf(stderr, "consumer: waiting for /dev/shm/streamrecv-%s (the daemon has not made it yet)\n", argv[1]);
        usleep(50000);
    }
    if (attached != 0) return 1;
    uint8_t *pixels = NULL;
    uint64_t capacity = 0;
    struct streamrecv_shm_slot frame;
    const struct streamrecv_shm_header *header = ring.base;
    uint64_t next = streamrecv_shm_load_u64(&header->latest_sequence) + 1; /* start with the next frame */
    fprintf(stderr, "consumer: attached to %s (%u slots), starting at frame %llu\n",
            argv[1], ring.geometry.slot_count, (unsigned long long)next);
    long written = 0;
    double last_frame = monotonic_seconds();
    int laps = 0; /* frames lost in a row to a slot being overwritten */
    while (wanted < 0 || written < wanted) {
        if (monotonic_seconds() - last_frame >= timeout) {
            fprintf(stderr, "consumer: no frame for %g s\n", timeout);
            return 2;
        }
        if (ring.geometry.slot_data_capacity > capacity) {
            capacity = ring.geometry.slot_data_capacity;
            free(pixels);
            pixels = malloc(capacity ? capacity : 1);
            if (!pixels) return 1;
        }
        header = ring.base;
        /* Every access to the mapping below may hit a truncated object: it then lands here. */
        if (sigsetjmp(bus_error, 1) != 0) {
            copying = 0;
            if (follow(argv[1], &ring) != 0) return 1;
            continue;
        }
        copying = 1;
        uint32_t seen = streamrecv_shm_load_u32(&header->wake_word);
        int outcome = read_frame(&ring, next, &frame, pixels);
        if (outcome == -3) { fprintf(stderr, "consumer: frame %llu is not a valid frame\n", (unsigned long long)next); return 1; }
        if (outcome == 0) {
            uint32_t state = streamrecv_shm_load_u32(&header->stream_state);
            if (state == STREAMRECV_STATE_REPLACED || replaced(argv[1], &ring)) {
                copying = 0;
                if (follow(argv[1], &ring) != 0) return 1;
                continue;
            }
            if (state == STREAMRECV_STATE_STOPPED) { fprintf(stderr, "consumer: stream stopped\n"); break; }
            /* Not there yet: sleep until the writer's next publish, 200 ms at a time (a truncated object's waiters
             * are never woken: the name is checked between waits), TIMEOUT in all. */
            streamrecv_shm_wait(header, seen, 200000000LL);
            continue;
        }
        if (outcome == -2) {
            fprintf(stderr, "consumer: lapped: frame %llu was overwritten before being read\n", (unsigned long long)next);
            next++;
            /* A real writer does this a few times in a row at most; a forged ring, for ever: back off. */
            if (++laps > 64) usleep(1000);
            continue;
        }
        if (outcome < 0) {
            uint64_t latest = streamrecv_shm_load_u64(&header->latest_sequence);
            uint64_t oldest = latest >= ring.geometry.slot_count ? latest - ring.geometry.slot_count + 1 : 1;
            if (oldest <= next) oldest = latest + 1; /* not in this object at all: go on with the next one published */
            fprintf(stderr, "consumer: lapped: frames %llu..%llu were overwritten before being read\n",
                    (unsigned long long)next, (unsigned long long)(oldest - 1));
            next = oldest;
            continue;
        }
        copying = 0;
        last_frame = monotonic_seconds();
        laps = 0;
        if (frame.flags & STREAMRECV_FRAME_DISCONTINUITY)
            fprintf(stderr, "consumer: discontinuity before frame %llu\n", (unsigned long long)frame.sequence);
        for (uint32_t plane = 0; plane < frame.plane_count; plane++)
            for (uint32_t row = 0; row < frame.plane_height[plane]; row++)
                fwrite(pixels + frame.plane_offset[plane] + (size_t)row * frame.plane_stride[plane], 1, frame.plane_width[plane], stdout);
        written++;
        next++;
    }
    copying = 0;
    fflush(stdout);
    free(pixels);
    detach(&ring);
    return 0;
}
