/* A complete streamrecvd consumer in C: everything it needs is streamrecv_shm.h.
 *
 *   cc -std=c11 -O2 -I Sources/CFrameRing/include docs/examples/consumer.c -o consumer
 *   ./consumer desk 100 > frames.yuv      # 100 frames of stream "desk", tightly packed planes
 *   ./consumer desk 100 60                # the same, waiting up to 60 s for a frame instead of 10
 *   ./consumer --hash desk 100            # a hash of each frame's planes, read in place (no copy)
 *
 * It attaches read-only to /dev/shm/streamrecv-NAME and validates the header once against the size it mapped
 * (anyone can create an object there: nothing in it is trusted), keeping only the validated geometry. For each
 * frame it sleeps on the futex until the writer publishes, copies the slot out under its seqlock (a torn copy is
 * retried, a lapped frame is reported and skipped), checks the copied slot, and writes the planes without row
 * padding to standard output. When the daemon moves the stream to a new object (a larger format, a restart with
 * other settings) or the object is truncated under it (SIGBUS, caught), it opens the name again.
 * Discontinuities (a new sender, a decoder reset, lost data, a daemon restart) are reported on standard error.
 * With --hash it copies nothing: it borrows each frame where it lies (streamrecv_shm_borrow), hashes its planes
 * there, and prints "SEQUENCE HASH" (FNV-1a, 16 hex digits) only if the writer left the slot alone meanwhile
 * (streamrecv_shm_borrow_held); a borrow the writer overtook is thrown away and counted on standard error.
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

static const char *stream_name;

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

/* FNV-1a over the planes, rows without padding: what --hash prints, computed where the frame lies. */
static uint64_t hash_planes(const struct streamrecv_shm_slot *slot, const uint8_t *pixels) {
    uint64_t hash = 0xcbf29ce484222325ULL;
    for (uint32_t plane = 0; plane < slot->plane_count; plane++)
        for (uint32_t row = 0; row < slot->plane_height[plane]; row++) {
            const uint8_t *bytes = pixels + slot->plane_offset[plane] + (size_t)row * slot->plane_stride[plane];
            for (uint32_t column = 0; column < slot->plane_width[plane]; column++)
                hash = (hash ^ bytes[column]) * 0x100000001b3ULL;
        }
    return hash;
}

/* The header's latest frame, 0 if the object was truncated under us before it could be read (reading from the
 * oldest frame held then is what following the stream does anyway). */
static uint64_t latest_of(const struct ring *ring) {
    volatile uint64_t latest = 0; /* volatile: read after a siglongjmp */
    copying = 1;
    if (sigsetjmp(bus_error, 1) == 0) latest = streamrecv_shm_load_u64(&((const struct streamrecv_shm_header *)ring->base)->latest_sequence);
    copying = 0;
    return latest;
}

/* The stream moved to a new object (or this one was truncated): map what the name leads to now, once it is a
 * different object. Frames and sequence numbers go on there. */
static int follow(const char *name, struct ring *ring, double patience) {
    /* 10 s at most, and never past the consumer's own timeout (an object replaced again and again by whoever owns
     * the name must not keep it). */
    int most = patience < 10 ? (int)(patience * 100) + 1 : 1000;
    for (int tries = 0; tries < most; tries++) {
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
    const int hashing = argc > 1 && strcmp(argv[1], "--hash") == 0;
    const int arguments = argc - hashing;
    if (arguments < 2) { fprintf(stderr, "usage: %s [--hash] NAME [FRAMES [TIMEOUT]]\n", argv[0]); return 1; }
    stream_name = argv[1 + hashing];
    long wanted = arguments > 2 ? atol(argv[2 + hashing]) : -1;
    /* Seconds without a frame before giving up, whatever the ring does meanwhile (a forged one can keep a reader
     * lapping, or wake it, for ever). */
    double timeout = arguments > 3 && atof(argv[3 + hashing]) > 0 ? atof(argv[3 + hashing]) : 10;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_bus_error;
    sigaction(SIGBUS, &action, NULL);
    struct ring ring;
    /* The daemon may not have made the ring yet (socket activation starts it at the first connection): wait. */
    int attached;
    for (int told = 0; (attached = attach(stream_name, &ring, 0)) == -2; told = 1) {
        if (!told) fprintf(stderr, "consumer: waiting for /dev/shm/streamrecv-%s (the daemon has not made it yet)\n", stream_name);
        usleep(50000);
    }
    if (attached != 0) return 1;
    uint8_t *pixels = NULL;
    uint64_t capacity = 0;
    struct streamrecv_shm_borrowed borrowed;
    const struct streamrecv_shm_slot *frame = &borrowed.slot;
    unsigned long overtaken = 0; /* borrows the writer overtook (--hash) */
    const struct streamrecv_shm_header *header = ring.base;
    uint64_t next = latest_of(&ring) + 1; /* start with the next frame */
    fprintf(stderr, "consumer: attached to %s (%u slots), starting at frame %llu\n",
            stream_name, ring.geometry.slot_count, (unsigned long long)next);
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
            if (follow(stream_name, &ring, timeout - (monotonic_seconds() - last_frame)) != 0) return 1;
            continue;
        }
        copying = 1;
        uint32_t seen = streamrecv_shm_load_u32(&header->wake_word);
        int outcome = hashing ? streamrecv_shm_borrow(ring.base, &ring.geometry, next, &borrowed)
                              : streamrecv_shm_copy(ring.base, &ring.geometry, next, &borrowed, pixels);
        uint64_t hash = 0;
        if (outcome == STREAMRECV_SHM_FRAME && hashing) {
            hash = hash_planes(frame, borrowed.pixels);
            /* The writer reused the slot while we hashed: the hash is not the frame's. Borrow again (the
             * frame is then lapped, or being overwritten). */
            if (!streamrecv_shm_borrow_held(&borrowed)) { overtaken++; continue; }
        }
        if (outcome == STREAMRECV_SHM_INVALID) { fprintf(stderr, "consumer: frame %llu is not a valid frame\n", (unsigned long long)next); return 1; }
        if (outcome == STREAMRECV_SHM_NOT_YET) {
            uint32_t state = streamrecv_shm_load_u32(&header->stream_state);
            if (state == STREAMRECV_STATE_REPLACED || replaced(stream_name, &ring)) {
                copying = 0;
                if (follow(stream_name, &ring, timeout - (monotonic_seconds() - last_frame)) != 0) return 1;
                continue;
            }
            if (state == STREAMRECV_STATE_STOPPED) { fprintf(stderr, "consumer: stream stopped\n"); break; }
            /* Not there yet: sleep until the writer's next publish, 200 ms at a time (a truncated object's waiters
             * are never woken: the name is checked between waits), TIMEOUT in all. */
            streamrecv_shm_wait(header, seen, 200000000LL);
            continue;
        }
        if (outcome == STREAMRECV_SHM_OVERWRITING) {
            fprintf(stderr, "consumer: lapped: frame %llu was overwritten before being read\n", (unsigned long long)next);
            next++;
            /* A real writer does this a few times in a row at most; a forged ring, for ever: back off. */
            if (++laps > 64) usleep(1000);
            continue;
        }
        if (outcome == STREAMRECV_SHM_LAPPED) {
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
        if (frame->flags & STREAMRECV_FRAME_DISCONTINUITY)
            fprintf(stderr, "consumer: discontinuity before frame %llu\n", (unsigned long long)frame->sequence);
        if (hashing) {
            printf("%llu %016llx\n", (unsigned long long)frame->sequence, (unsigned long long)hash);
        } else {
            for (uint32_t plane = 0; plane < frame->plane_count; plane++)
                for (uint32_t row = 0; row < frame->plane_height[plane]; row++)
                    fwrite(pixels + frame->plane_offset[plane] + (size_t)row * frame->plane_stride[plane], 1,
                           frame->plane_width[plane], stdout);
        }
        written++;
        next++;
    }
    copying = 0;
    if (overtaken) fprintf(stderr, "consumer: %lu borrowed frame(s) overtaken by the writer, thrown away\n", overtaken);
    fflush(stdout);
    free(pixels);
    detach(&ring);
    return 0;
}
