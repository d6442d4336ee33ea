/* The consumer side of scripts/bench-latency.py: prints, for every frame, the CLOCK_MONOTONIC time at which it
 * became readable to this process (the same clock as the sender's timestamps).
 *
 *   latency-probe shm NAME COUNT     frames of stream NAME from its ring: "index readable_ns pts first_byte_ns
 *                                    au_complete_ns decoded_ns published_ns flags" (times from the slot)
 *   latency-probe pipe BYTES COUNT   raw frames of BYTES bytes each from standard input: "index readable_ns"
 *
 * A ring frame is readable once its slot's metadata has been read under the seqlock (a consumer reads the pixels
 * in place from there on); a pipe frame once its last byte has been read. Stops after COUNT frames, at end of
 * input, when the stream stops, or after 10 s without a frame. Built by the benchmark with the product's header. */
#define _GNU_SOURCE
#include "streamrecv_shm.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return (unsigned long long)time.tv_sec * 1000000000ULL + (unsigned long long)time.tv_nsec;
}

static int from_pipe(size_t frame_bytes, long count) {
    uint8_t *buffer = malloc(frame_bytes);
    if (!buffer) return 1;
    for (long index = 0; index < count; index++) {
        size_t have = 0;
        while (have < frame_bytes) {
            ssize_t got = read(STDIN_FILENO, buffer + have, frame_bytes - have);
            if (got <= 0) { free(buffer); return 0; }
            have += (size_t)got;
        }
        printf("%ld %llu\n", index, now_ns());
        fflush(stdout);
    }
    free(buffer);
    return 0;
}

/* Maps the ring of stream NAME; NULL (and a message) when it is not one. */
static const struct streamrecv_shm_header *map_ring(const char *name, size_t *size) {
    char path[256];
    snprintf(path, sizeof path, "/streamrecv-%s", name);
    int fd = shm_open(path, O_RDONLY, 0);
    if (fd < 0) { perror(path); return NULL; }
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < STREAMRECV_SHM_HEADER_SIZE) { close(fd); return NULL; }
    const struct streamrecv_shm_header *header = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (header == MAP_FAILED) return NULL;
    if (streamrecv_shm_load_u64(&header->magic) != STREAMRECV_SHM_MAGIC ||
        header->abi_version != STREAMRECV_SHM_ABI_VERSION || header->total_size > (uint64_t)st.st_size) {
        fprintf(stderr, "%s: not a streamrecv ring\n", path);
        munmap((void *)header, (size_t)st.st_size);
        return NULL;
    }
    *size = (size_t)st.st_size;
    return header;
}

/* Follows the stream when the daemon moves it to a new object (STREAMRECV_STATE_REPLACED: sized for the frames
 * now decoded); sequence numbers go on across the move. */
static int from_ring(const char *name, long count) {
    size_t size = 0;
    const struct streamrecv_shm_header *header = map_ring(name, &size);
    if (!header) return 1;
    uint64_t next = streamrecv_shm_load_u64(&header->latest_sequence) + 1;
    for (long index = 0; index < count;) {
        uint32_t seen = streamrecv_shm_load_u32(&header->wake_word);
        uint32_t state = streamrecv_shm_load_u32(&header->stream_state);
        if (state == STREAMRECV_STATE_REPLACED) {
            munmap((void *)header, size);
            if (!(header = map_ring(name, &size))) return 1;
            continue;
        }
        const struct streamrecv_shm_slot *slot =
            header->slot_count > 0 ? streamrecv_shm_slot_at(header, (uint32_t)((next - 1) % header->slot_count)) : NULL;
        uint64_t begin = slot ? streamrecv_shm_read_begin(slot) : 1;
        struct streamrecv_shm_slot copy;
        if (slot) memcpy(&copy, slot, sizeof copy);
        if (slot && !(begin & 1) && streamrecv_shm_read_end(slot, begin) && copy.sequence >= next) {
            unsigned long long readable = now_ns();
            if (copy.sequence > next) { fprintf(stderr, "lapped at %llu\n", (unsigned long long)next); next = copy.sequence; }
            printf("%ld %llu %lld %llu %llu %llu %llu %u\n", index, readable, (long long)copy.pts,
                   (unsigned long long)copy.time_first_byte_ns, (unsigned long long)copy.time_au_complete_ns,
                   (unsigned long long)copy.time_decoded_ns, (unsigned long long)copy.time_published_ns, copy.flags);
            fflush(stdout);
            index++;
            next++;
            continue;
        }
        if (state == STREAMRECV_STATE_STOPPED) break;
        if (!streamrecv_shm_wait(header, seen, 10000000000LL) && streamrecv_shm_load_u32(&header->wake_word) == seen) break;
    }
    munmap((void *)header, size);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s shm NAME COUNT | pipe BYTES COUNT\n", argv[0]); return 1; }
    if (strcmp(argv[1], "shm") == 0) return from_ring(argv[2], atol(argv[3]));
    return from_pipe((size_t)atoll(argv[2]), atol(argv[3]));
}
