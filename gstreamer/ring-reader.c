/* See ring-reader.h. A GStreamer pipeline is someone else's process: the SIGBUS handler that turns a truncated
 * object into an error is installed once, acts only while this thread is inside a guarded copy, and passes every
 * other SIGBUS on to the handler that was there before. */
#define _GNU_SOURCE
#include "ring-reader.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static __thread sigjmp_buf *guard;
static struct sigaction previous_action;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

static void on_bus_error(int number, siginfo_t *info, void *context) {
    if (guard) siglongjmp(*guard, 1);
    if (previous_action.sa_flags & SA_SIGINFO) {
        if (previous_action.sa_sigaction) { previous_action.sa_sigaction(number, info, context); return; }
    } else if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler != SIG_IGN) {
        previous_action.sa_handler(number);
        return;
    }
    signal(number, SIG_DFL);
    raise(number);
}

static void install_handler(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_bus_error;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &previous_action);
}

/* Runs BODY with the guard set; TRUNCATED runs instead of the rest of BODY when the mapping faults. */
#define GUARDED(BODY, TRUNCATED)                                                                                    \
    do {                                                                                                            \
        sigjmp_buf here;                                                                                            \
        if (sigsetjmp(here, 1) == 0) {                                                                              \
            guard = &here;                                                                                          \
            BODY;                                                                                                   \
            guard = NULL;                                                                                           \
        } else {                                                                                                    \
            guard = NULL;                                                                                           \
            TRUNCATED;                                                                                              \
        }                                                                                                           \
    } while (0)

static const char *check_header(const void *base, uint64_t size, struct streamrecv_shm_geometry *geometry) {
    const char *volatile reason = NULL;
    GUARDED(reason = streamrecv_shm_check_header(base, size, geometry), reason = "it shrank while being read");
    return reason;
}

enum ring_attach_result ring_attach(const char *path, struct ring_reader *ring, const char **problem) {
    pthread_once(&install_once, install_handler);
    const char *ignored;
    if (!problem) problem = &ignored;
    /* O_NONBLOCK: a FIFO planted under the name must not hang open(2). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return RING_MISSING;
        *problem = errno == ELOOP    ? "a symbolic link"
                   : errno == EACCES ? "permission denied (this user is not in the ring's group: shm_group, shm_mode)"
                                     : "cannot be opened";
        return RING_NOT_A_RING;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < STREAMRECV_SHM_HEADER_SIZE) {
        close(fd);
        *problem = "not a plain object, or too small";
        return RING_NOT_A_RING;
    }
    /* The writer reserves every page: a sparse object claiming terabytes is a forgery. */
    if ((uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size) {
        close(fd);
        *problem = "a sparse object";
        return RING_NOT_A_RING;
    }
    void *base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        *problem = "cannot be mapped";
        return RING_NOT_A_RING;
    }
    const char *reason = check_header(base, (uint64_t)st.st_size, &ring->geometry);
    if (reason) {
        munmap(base, (size_t)st.st_size);
        *problem = reason;
        return RING_NOT_A_RING;
    }
    ring->base = base;
    ring->size = (size_t)st.st_size;
    ring->inode = st.st_ino;
    return RING_ATTACHED;
}

int ring_name_valid(const char *name) {
    size_t length = strlen(name);
    if (length == 0 || length > 200 || name[0] == '.') return 0;
    for (size_t i = 0; i < length; i++)
        if (!(name[i] == '-' || name[i] == '_' || name[i] == '.' || (name[i] >= '0' && name[i] <= '9') ||
              (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z')))
            return 0;
    return 1;
}

void ring_detach(struct ring_reader *ring) {
    if (ring->base) munmap((void *)ring->base, ring->size);
    ring->base = NULL;
}

int ring_replaced(const char *path, const struct ring_reader *ring) {
    struct stat st;
    return stat(path, &st) == 0 && st.st_ino != ring->inode;
}

__attribute__((noinline)) static enum ring_read_result read_unguarded(const struct ring_reader *ring, uint64_t sequence,
                                            struct streamrecv_shm_slot *copy, ring_copy_fn take,
                                            void *context) {
    /* The header's borrowed read: `take` copies the frame out of the slot, and counts only if the writer left the
     * slot alone meanwhile (otherwise it is called again, on a later frame or not at all). A real writer tears a
     * copy once; 64 in a row is a forged ring. */
    for (int torn = 0; torn < 64; torn++) {
        struct streamrecv_shm_borrowed frame;
        switch (streamrecv_shm_borrow(ring->base, &ring->geometry, sequence, &frame)) {
        case STREAMRECV_SHM_FRAME: break;
        case STREAMRECV_SHM_NOT_YET: return RING_READ_NOT_YET;
        case STREAMRECV_SHM_INVALID: return RING_READ_INVALID;
        /* Lapped, or being overwritten (lost: the next frame is whole in its slot; waiting for this one chased
         * the slot written next). */
        default: return RING_READ_LAPPED;
        }
        take(context, &frame.slot, frame.pixels);
        if (streamrecv_shm_borrow_held(&frame)) {
            *copy = frame.slot;
            return RING_READ_DONE;
        }
    }
    return RING_READ_NOT_YET;
}

enum ring_read_result ring_read(const struct ring_reader *ring, uint64_t sequence, struct streamrecv_shm_slot *copy,
                                ring_copy_fn take, void *context) {
    volatile enum ring_read_result result = RING_READ_TRUNCATED;
    GUARDED(result = read_unguarded(ring, sequence, copy, take, context), result = RING_READ_TRUNCATED);
    return result;
}

#define HEADER_FIELD(NAME, TYPE, LOAD, FIELD)                                                                       \
    TYPE NAME(const struct ring_reader *ring, int *truncated) {                                                     \
        const struct streamrecv_shm_header *header = ring->base;                                                    \
        volatile TYPE value = 0;                                                                                    \
        GUARDED(value = LOAD(&header->FIELD), (value = 0, *truncated = 1));                                         \
        return value;                                                                                               \
    }

HEADER_FIELD(ring_latest, uint64_t, streamrecv_shm_load_u64, latest_sequence)
HEADER_FIELD(ring_state, uint32_t, streamrecv_shm_load_u32, stream_state)
HEADER_FIELD(ring_epoch, uint64_t, streamrecv_shm_load_u64, writer_epoch)
HEADER_FIELD(ring_wake_word, uint32_t, streamrecv_shm_load_u32, wake_word)

__attribute__((noinline)) static uint64_t oldest_unguarded(const struct ring_reader *ring, uint64_t sequence,
                                                           uint64_t latest) {
    uint64_t oldest = latest + 1;
    for (uint32_t index = 0; index < ring->geometry.slot_count; index++) {
        const struct streamrecv_shm_slot *slot = streamrecv_shm_slot_in(ring->base, &ring->geometry, index);
        uint64_t begin = streamrecv_shm_read_begin(slot);
        uint64_t held = slot->sequence;
        if (streamrecv_shm_read_end(slot, begin) && held > sequence && held < oldest) oldest = held;
    }
    return oldest;
}

uint64_t ring_oldest_after(const struct ring_reader *ring, uint64_t sequence, uint64_t latest) {
    volatile uint64_t oldest = latest + 1;
    GUARDED(oldest = oldest_unguarded(ring, sequence, latest), oldest = latest + 1);
    return oldest;
}

void ring_wait(const struct ring_reader *ring, uint32_t seen, int64_t timeout_ns) {
    /* futex(2) on a truncated page fails with EFAULT rather than raising SIGBUS; the caller notices on the next
     * guarded read. */
    streamrecv_shm_wait(ring->base, seen, timeout_ns);
}
