/* LD_PRELOAD library for scripts/bench-allocations.py: counts heap allocations (malloc, calloc, realloc,
 * memalign family) of an unmodified process per thread and per calling library (the shared object holding the
 * allocator's immediate caller: libswiftCore for Swift objects and arrays, libavutil for av_malloc, ...), and
 * every 50 ms (and at exit) writes "TID COUNT THREAD-NAME<TAB>LIBRARY" lines to the file named by $MALLOC_COUNT_FILE (written
 * to a temporary name, then renamed: readers never see half a table). Callers are resolved (dladdr) by the
 * writer thread, never inside malloc; it allocates nothing itself (open/write/snprintf on the stack).
 *   gcc -O2 -shared -fPIC scripts/malloc-count.c -o malloc-count.so -lpthread */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

/* (thread, caller address) -> count, open addressing; a full table counts the rest in one overflow entry. */
#define ENTRIES 16384
static struct { _Atomic int tid; _Atomic uintptr_t caller; _Atomic uint64_t count; } table[ENTRIES];
static __thread int thread_id;

static void count(void *caller) {
    if (!thread_id) thread_id = (int)syscall(SYS_gettid);
    uintptr_t address = (uintptr_t)caller;
    size_t index = (size_t)((address * 0x9E3779B97F4A7C15ULL) ^ (uint64_t)thread_id * 0x85EBCA6BULL) % (ENTRIES - 1);
    for (int probe = 0; probe < 64; probe++, index = (index + 1) % (ENTRIES - 1)) {
        int tid = atomic_load_explicit(&table[index].tid, memory_order_acquire);
        if (tid == 0) {
            int expected = 0;
            if (atomic_compare_exchange_strong(&table[index].tid, &expected, -1)) {
                atomic_store(&table[index].caller, address);
                atomic_store_explicit(&table[index].tid, thread_id, memory_order_release);
                tid = thread_id;
            } else {
                tid = expected;
            }
        }
        while (tid == -1) tid = atomic_load_explicit(&table[index].tid, memory_order_acquire);
        if (tid == thread_id && atomic_load(&table[index].caller) == address) {
            atomic_fetch_add_explicit(&table[index].count, 1, memory_order_relaxed);
            return;
        }
    }
    atomic_fetch_add_explicit(&table[ENTRIES - 1].count, 1, memory_order_relaxed);
}

#define CALLER __builtin_return_address(0)
void *malloc(size_t size) { count(CALLER); return __libc_malloc(size); }
void *calloc(size_t n, size_t size) { count(CALLER); return __libc_calloc(n, size); }
void *realloc(void *pointer, size_t size) { count(CALLER); return __libc_realloc(pointer, size); }
void *memalign(size_t alignment, size_t size) { count(CALLER); return __libc_memalign(alignment, size); }
void *aligned_alloc(size_t alignment, size_t size) { count(CALLER); return __libc_memalign(alignment, size); }
int posix_memalign(void **out, size_t alignment, size_t size) {
    count(CALLER);
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL) return ENOMEM;
    *out = pointer;
    return 0;
}

static void thread_name(int tid, char *name, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
    int fd = open(path, O_RDONLY);
    ssize_t got = fd >= 0 ? read(fd, name, size - 1) : -1;
    if (fd >= 0) close(fd);
    if (got <= 0) { snprintf(name, size, "(exited)"); return; }
    name[got] = 0;
    if (name[got - 1] == '\n') name[got - 1] = 0;
}

/* Writes the table; allocates nothing. */
static void dump(const char *path) {
    char temporary[4096], line[512], name[64];
    snprintf(temporary, sizeof temporary, "%s.tmp", path);
    int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    for (int index = 0; index < ENTRIES; index++) {
        int tid = atomic_load_explicit(&table[index].tid, memory_order_acquire);
        uint64_t total = atomic_load_explicit(&table[index].count, memory_order_relaxed);
        if (tid <= 0 || total == 0) continue;
        Dl_info info;
        const char *library = "?";
        if (dladdr((void *)atomic_load(&table[index].caller), &info) && info.dli_fname) {
            library = strrchr(info.dli_fname, '/') ? strrchr(info.dli_fname, '/') + 1 : info.dli_fname;
        }
        thread_name(tid, name, sizeof name);
        int length = snprintf(line, sizeof line, "%d %llu %s\t%s\n", tid, (unsigned long long)total, name, library);
        if (write(fd, line, (size_t)length) < 0) break;
    }
    close(fd);
    rename(temporary, path);
}

static void *reporter(void *unused) {
    (void)unused;
    for (;;) {
        struct timespec pause = {0, 50 * 1000 * 1000};
        nanosleep(&pause, NULL);
        dump(getenv("MALLOC_COUNT_FILE"));
    }
    return NULL;
}

/* The last word at exit: a short-lived process may end between two periodic writes. */
__attribute__((destructor)) static void final_dump(void) {
    if (getenv("MALLOC_COUNT_FILE")) dump(getenv("MALLOC_COUNT_FILE"));
}

__attribute__((constructor)) static void start_reporter(void) {
    if (!getenv("MALLOC_COUNT_FILE")) return;
    pthread_t thread;
    pthread_create(&thread, NULL, reporter, NULL);
    pthread_detach(thread);
}
