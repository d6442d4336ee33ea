/* Survives a shared-memory object shrinking under its mapping.
 *
 * Touching a page of a MAP_SHARED mapping that lies beyond the end of its file raises SIGBUS, and anyone allowed
 * to write the object can truncate it at any instant: no size check before an access can close that race. A
 * guarded mapping instead has a SIGBUS handler behind it: a fault inside it replaces the whole mapping with
 * private zero pages (the access then completes harmlessly) and marks the guard as faulted, which its owner
 * checks after each access. Faults outside every guarded mapping go to the handler that was installed before
 * (or kill the process as SIGBUS always did). Libwayland protects compositors from clients' shm the same way. */
#ifndef STREAMRECV_MAPPING_GUARD_H
#define STREAMRECV_MAPPING_GUARD_H

#include <stddef.h>

/* Registers [base, base + size) and returns a guard number (>= 0), or -1 when the table (1024 mappings) is
 * full or the handler could not be installed. */
int streamrecv_guard_register(void *base, size_t size);

/* Forgets the guard; call before unmapping. */
void streamrecv_guard_unregister(int guard);

/* 1 when a fault hit the mapping since it was registered: its contents are zeros from then on. */
int streamrecv_guard_faulted(int guard);

#endif
