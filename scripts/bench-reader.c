/* A reader of every frame for scripts/bench-readers.py: `copy` copies each frame out of its slot
 * (streamrecv_shm_copy), `borrow` looks at it where it lies (streamrecv_shm_borrow, then
 * streamrecv_shm_borrow_held); both then "look" at the frame the same way (one byte of every luma row), so the
 * difference is the copy. Reads until FRAMES frames were read or lapped, or IDLE seconds pass without one;
 * prints "read R lapped L overtaken O cpu SECONDS" on standard output (CPU time from attaching on: the loop's own).
 *
 *   cc -std=gnu11 -O2 -I Sources/CFrameRing/include scripts/bench-reader.c -o bench-reader
 *   ./bench-reader copy|borrow SHM_NAME FRAMES [IDLE]
 *
 * Not a consumer to copy from: it trusts the object's size not to shrink (docs/examples/consumer.c does not), and
 * follows the stream to a new object only when the old one says it was replaced. */
#include "streamrecv_shm.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return (double)time.tv_sec + (double)time.tv_nsec / 1e9;
}

static double cpu_seconds(void) {
    struct timespec time;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time);
    return (double)time.tv_sec + (double)time.tv_nsec / 1e9;
}

static unsigned look(const struct streamrecv_shm_slot *slot, const uint8_t *pixels) {
    unsigned sum = 0;
    for (uint32_t row = 0; row < slot->plane_height[0]; row++) sum += pixels[slot->plane_offset[0] + (size_t)row * slot->plane_stride[0]];
    return sum;
}

/* Maps the object behind `path` (the daemon replaces it when the ring grows for the first frame). */
static int attach(const char *path, const void **base, size_t *size, struct streamrecv_shm_geometry *geometry) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) { perror(path); return 1; }
    if (*base) munmap((void *)*base, *size);
    *size = (size_t)st.st_size;
    *base = mmap(NULL, *size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (*base == MAP_FAILED) { perror("mmap"); return 1; }
    const char *problem = streamrecv_shm_check_header(*base, (uint64_t)st.st_size, geometry);
    if (problem) { fprintf(stderr, "%s: %s\n", path, problem); return 1; }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s copy|borrow SHM_NAME FRAMES [IDLE]\n", argv[0]); return 1; }
    int borrowing = strcmp(argv[1], "borrow") == 0;
    long wanted = atol(argv[3]);
    double idle = argc > 4 ? atof(argv[4]) : 3;
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/%s", argv[2]);
    const void *base = NULL;
    size_t size = 0;
    struct streamrecv_shm_geometry geometry;
    if (attach(path, &base, &size, &geometry) != 0) return 1;
    const struct streamrecv_shm_header *header = base;
    uint8_t *pixels = NULL;
    uint64_t capacity = 0;
    uint64_t next = streamrecv_shm_load_u64(&header->latest_sequence) + 1;
    long read = 0, lapped = 0, overtaken = 0;
    unsigned sink = 0;
    double last = now();
    fprintf(stderr, "bench-reader: attached\n");
    double cpu_at_start = cpu_seconds();
    while (read + lapped < wanted && now() - last < idle) {
        if (streamrecv_shm_load_u32(&header->stream_state) == STREAMRECV_STATE_REPLACED) {
            if (attach(path, &base, &size, &geometry) != 0) return 1;
            header = base;
        }
        if (geometry.slot_data_capacity > capacity) {
            capacity = geometry.slot_data_capacity;
            free(pixels);
            if (!(pixels = malloc(capacity))) return 1;
        }
        uint32_t seen = streamrecv_shm_load_u32(&header->wake_word);
        struct streamrecv_shm_borrowed frame;
        int result = borrowing ? streamrecv_shm_borrow(base, &geometry, next, &frame)
                               : streamrecv_shm_copy(base, &geometry, next, &frame, pixels);
        if (result == STREAMRECV_SHM_FRAME) {
            unsigned looked = look(&frame.slot, frame.pixels);
            if (borrowing && !streamrecv_shm_borrow_held(&frame)) { overtaken++; continue; }
            sink += looked;
            read++;
            next++;
            last = now();
        } else if (result == STREAMRECV_SHM_NOT_YET) {
            streamrecv_shm_wait(header, seen, 100000000LL);
        } else if (result == STREAMRECV_SHM_INVALID) {
            fprintf(stderr, "bench-reader: frame %llu is not valid\n", (unsigned long long)next);
            return 1;
        } else {
            uint64_t latest = streamrecv_shm_load_u64(&header->latest_sequence);
            uint64_t oldest = latest >= geometry.slot_count ? latest - geometry.slot_count + 1 : 1;
            if (result == STREAMRECV_SHM_OVERWRITING || oldest <= next) oldest = next + 1;
            lapped += (long)(oldest - next);
            next = oldest;
        }
    }
    printf("read %ld lapped %ld overtaken %ld cpu %.4f (%u)\n", read, lapped, overtaken, cpu_seconds() - cpu_at_start, sink & 1);
    return 0;
}
