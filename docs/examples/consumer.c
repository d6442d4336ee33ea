/* A complete streamrecvd consumer in C: everything it needs is streamrecv_shm.h.
 *
 *   cc -std=c11 -O2 -I Sources/CFrameRing/include docs/examples/consumer.c -o consumer
 *   ./consumer desk 100 > frames.yuv      # 100 frames of stream "desk", tightly packed planes
 *
 * It attaches read-only to /dev/shm/streamrecv-NAME, checks the header, then for each frame: sleeps on the futex
 * until the writer publishes, copies the slot out under its seqlock (a torn copy is retried, a lapped frame is
 * reported and skipped), and writes the planes without row padding to standard output. Discontinuities (a new
 * sender, a decoder reset, lost data, a daemon restart) are reported on standard error.
 * Exit status: 0 after FRAMES frames, 1 on errors, 2 when no frame arrives for 10 s. */
#define _GNU_SOURCE
#include "streamrecv_shm.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct streamrecv_shm_header *attach(const char *name, size_t *size) {
    char path[256];
    snprintf(path, sizeof path, "/streamrecv-%s", name);
    int fd = shm_open(path, O_RDONLY, 0);
    if (fd < 0) { perror(path); return NULL; }
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < STREAMRECV_SHM_HEADER_SIZE) { fprintf(stderr, "%s: too small\n", path); close(fd); return NULL; }
    void *base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) { perror("mmap"); return NULL; }
    const struct streamrecv_shm_header *header = base;
    /* Never trust a mapping smaller than total_size, nor a header of another ABI. */
    if (streamrecv_shm_load_u64(&header->magic) != STREAMRECV_SHM_MAGIC || header->abi_version != STREAMRECV_SHM_ABI_VERSION ||
        header->slot_size != STREAMRECV_SHM_SLOT_SIZE || header->total_size > (uint64_t)st.st_size) {
        fprintf(stderr, "%s: not a streamrecv ring of ABI %u\n", path, STREAMRECV_SHM_ABI_VERSION);
        munmap(base, (size_t)st.st_size);
        return NULL;
    }
    *size = (size_t)st.st_size;
    return header;
}

/* Copies frame `sequence` into `copy` and `pixels`. Returns 1 done, 0 not published yet, -1 lapped (overwritten). */
static int read_frame(const struct streamrecv_shm_header *header, uint64_t sequence,
                      struct streamrecv_shm_slot *copy, uint8_t *pixels) {
    uint32_t index = (uint32_t)((sequence - 1) % header->slot_count);
    const struct streamrecv_shm_slot *slot = streamrecv_shm_slot_at(header, index);
    for (;;) {
        uint64_t begin = streamrecv_shm_read_begin(slot);
        if (begin & 1) return 0; /* the writer is in this slot now: wait for its wake-up (it may also have died) */
        memcpy(copy, slot, sizeof *copy);
        if (copy->sequence == sequence && copy->data_size <= header->slot_data_capacity)
            memcpy(pixels, streamrecv_shm_slot_data(header, index), copy->data_size);
        if (!streamrecv_shm_read_end(slot, begin)) continue; /* torn: written meanwhile, copy again */
        if (copy->sequence == sequence) return 1;
        return copy->sequence > sequence ? -1 : 0;
    }
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s NAME [FRAMES]\n", argv[0]); return 1; }
    long wanted = argc > 2 ? atol(argv[2]) : -1;
    size_t size = 0;
    const struct streamrecv_shm_header *header = attach(argv[1], &size);
    if (!header) return 1;
    uint8_t *pixels = malloc(header->slot_data_capacity);
    if (!pixels) return 1;
    struct streamrecv_shm_slot frame;
    uint64_t next = streamrecv_shm_load_u64(&header->latest_sequence) + 1; /* start with the next frame */
    fprintf(stderr, "consumer: attached to %s (%u slots), starting at frame %llu\n",
            header->stream_name, header->slot_count, (unsigned long long)next);
    for (long written = 0; wanted < 0 || written < wanted;) {
        uint32_t seen = streamrecv_shm_load_u32(&header->wake_word);
        int outcome = read_frame(header, next, &frame, pixels);
        if (outcome == 0) {
            /* Not there yet: sleep until the writer's next publish (or 10 s). */
            if (streamrecv_shm_load_u32(&header->stream_state) == STREAMRECV_STATE_STOPPED) { fprintf(stderr, "consumer: stream stopped\n"); break; }
            if (!streamrecv_shm_wait(header, seen, 10000000000LL) && streamrecv_shm_load_u32(&header->wake_word) == seen) {
                fprintf(stderr, "consumer: no frame for 10 s\n");
                return 2;
            }
            continue;
        }
        if (outcome < 0) {
            uint64_t latest = streamrecv_shm_load_u64(&header->latest_sequence);
            uint64_t oldest = latest >= header->slot_count ? latest - header->slot_count + 1 : 1;
            fprintf(stderr, "consumer: lapped: frames %llu..%llu were overwritten before being read\n",
                    (unsigned long long)next, (unsigned long long)(oldest - 1));
            next = oldest;
            continue;
        }
        if (frame.flags & STREAMRECV_FRAME_DISCONTINUITY)
            fprintf(stderr, "consumer: discontinuity before frame %llu\n", (unsigned long long)frame.sequence);
        for (uint32_t plane = 0; plane < frame.plane_count; plane++)
            for (uint32_t row = 0; row < frame.plane_height[plane]; row++)
                fwrite(pixels + frame.plane_offset[plane] + (size_t)row * frame.plane_stride[plane], 1, frame.plane_width[plane], stdout);
        written++;
        next++;
    }
    fflush(stdout);
    free(pixels);
    munmap((void *)header, size);
    return 0;
}
