#define _GNU_SOURCE
#include "mapping_guard.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define GUARD_SLOTS 1024
/* A slot being filled in or emptied: its start matches no address. */
#define CLAIMED UINTPTR_MAX

struct guarded_mapping {
    uintptr_t start; /* 0: free; CLAIMED: changing */
    uintptr_t end;
    int faulted;
};

static struct guarded_mapping guards[GUARD_SLOTS];
static struct sigaction previous_action;
static int installed; /* 0 no, 1 installing, 2 yes */

static void on_bus_error(int signal_number, siginfo_t *info, void *context) {
    int saved_errno = errno;
    /* Only a fault on a page past the end of its file (BUS_ADRERR); a SIGBUS sent by kill(2) is not ours. */
    uintptr_t address = info->si_code == BUS_ADRERR ? (uintptr_t)info->si_addr : 0;
    for (int index = 0; address != 0 && index < GUARD_SLOTS; index++) {
        uintptr_t start = __atomic_load_n(&guards[index].start, __ATOMIC_ACQUIRE);
        if (start == 0 || start == CLAIMED || address < start) continue;
        uintptr_t end = __atomic_load_n(&guards[index].end, __ATOMIC_ACQUIRE);
        /* The slot may have been emptied and filled again between the two loads: then start changed. */
        if (address >= end || __atomic_load_n(&guards[index].start, __ATOMIC_ACQUIRE) != start) continue;
        /* mmap is a plain system call: safe here. The faulting instruction is retried on the new pages. */
        void *replaced = mmap((void *)start, end - start, PROT_READ | PROT_WRITE,
                              MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (replaced != MAP_FAILED) {
            __atomic_store_n(&guards[index].faulted, 1, __ATOMIC_RELEASE);
            errno = saved_errno;
            return;
        }
    }
    errno = saved_errno;
    /* Not ours: what would have happened without us. */
    if ((previous_action.sa_flags & SA_SIGINFO) && previous_action.sa_sigaction != NULL) {
        previous_action.sa_sigaction(signal_number, info, context);
    } else if (!(previous_action.sa_flags & SA_SIGINFO) && previous_action.sa_handler != SIG_DFL &&
               previous_action.sa_handler != SIG_IGN) {
        previous_action.sa_handler(signal_number);
    } else if (previous_action.sa_handler == SIG_IGN && info->si_code <= 0) {
        /* sent by someone and ignored before us: still ignored */
    } else {
        signal(SIGBUS, SIG_DFL);
        /* Sent by someone: deliver it with the default action now. A fault: returning repeats the access,
         * which now takes the default action. */
        if (info->si_code <= 0) raise(SIGBUS);
    }
}

static int install_handler(void) {
    int expected = 0;
    if (__atomic_compare_exchange_n(&installed, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_sigaction = on_bus_error;
        action.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&action.sa_mask);
        if (sigaction(SIGBUS, &action, &previous_action) != 0) {
            __atomic_store_n(&installed, 0, __ATOMIC_RELEASE);
            return -1;
        }
        __atomic_store_n(&installed, 2, __ATOMIC_RELEASE);
        return 0;
    }
    while (__atomic_load_n(&installed, __ATOMIC_ACQUIRE) == 1) { }
    return __atomic_load_n(&installed, __ATOMIC_ACQUIRE) == 2 ? 0 : -1;
}

int streamrecv_guard_register(void *base, size_t size) {
    if (base == NULL || size == 0 || install_handler() != 0) return -1;
    for (int index = 0; index < GUARD_SLOTS; index++) {
        uintptr_t free_slot = 0;
        /* Claim the slot with a start that matches nothing, then fill it in; start last. */
        if (__atomic_compare_exchange_n(&guards[index].start, &free_slot, (uintptr_t)CLAIMED, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            __atomic_store_n(&guards[index].faulted, 0, __ATOMIC_RELEASE);
            __atomic_store_n(&guards[index].end, (uintptr_t)base + size, __ATOMIC_RELEASE);
            __atomic_store_n(&guards[index].start, (uintptr_t)base, __ATOMIC_RELEASE);
            return index;
        }
    }
    return -1;
}

void streamrecv_guard_unregister(int guard) {
    if (guard < 0 || guard >= GUARD_SLOTS) return;
    __atomic_store_n(&guards[guard].start, (uintptr_t)CLAIMED, __ATOMIC_RELEASE);
    __atomic_store_n(&guards[guard].end, (uintptr_t)0, __ATOMIC_RELEASE);
    __atomic_store_n(&guards[guard].start, (uintptr_t)0, __ATOMIC_RELEASE);
}

int streamrecv_guard_faulted(int guard) {
    if (guard < 0 || guard >= GUARD_SLOTS) return 0;
    return __atomic_load_n(&guards[guard].faulted, __ATOMIC_ACQUIRE);
}
