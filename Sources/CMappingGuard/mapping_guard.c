#define _GNU_SOURCE
#include "mapping_guard.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define GUARD_SLOTS 256

struct guarded_mapping {
    uintptr_t start; /* 0: free slot */
    uintptr_t end;
    int faulted;
};

static struct guarded_mapping guards[GUARD_SLOTS];
static struct sigaction previous_action;
static int installed; /* 0 no, 1 installing, 2 yes */

static void on_bus_error(int signal_number, siginfo_t *info, void *context) {
    uintptr_t address = (uintptr_t)info->si_addr;
    for (int index = 0; index < GUARD_SLOTS; index++) {
        uintptr_t start = __atomic_load_n(&guards[index].start, __ATOMIC_ACQUIRE);
        uintptr_t end = __atomic_load_n(&guards[index].end, __ATOMIC_ACQUIRE);
        if (start == 0 || address < start || address >= end) continue;
        /* mmap is a plain system call: safe here. The faulting instruction is retried on the new pages. */
        void *replaced = mmap((void *)start, end - start, PROT_READ | PROT_WRITE,
                              MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (replaced != MAP_FAILED) {
            __atomic_store_n(&guards[index].faulted, 1, __ATOMIC_RELEASE);
            return;
        }
        break;
    }
    /* Not ours: what would have happened without us. */
    if ((previous_action.sa_flags & SA_SIGINFO) && previous_action.sa_sigaction != NULL) {
        previous_action.sa_sigaction(signal_number, info, context);
    } else if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler != SIG_IGN) {
        previous_action.sa_handler(signal_number);
    } else {
        /* Returning re-executes the access, which faults again and now takes the default action. */
        signal(SIGBUS, SIG_DFL);
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
        /* Claim the slot with a placeholder start that matches nothing (end stays 0), then fill it in. */
        if (__atomic_compare_exchange_n(&guards[index].start, &free_slot, (uintptr_t)1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
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
    __atomic_store_n(&guards[guard].end, (uintptr_t)0, __ATOMIC_RELEASE);
    __atomic_store_n(&guards[guard].start, (uintptr_t)0, __ATOMIC_RELEASE);
}

int streamrecv_guard_faulted(int guard) {
    if (guard < 0 || guard >= GUARD_SLOTS) return 0;
    return __atomic_load_n(&guards[guard].faulted, __ATOMIC_ACQUIRE);
}
