#ifndef STREAMRECV_ALLOCATION_COUNTER_H
#define STREAMRECV_ALLOCATION_COUNTER_H
#include <stdint.h>

// Counts heap allocations made by the whole process (malloc, calloc, realloc, memalign family) by interposing
// glibc's allocator. Linked only into benchmark executables: it proves "zero allocations per unit" claims.
uint64_t streamrecv_allocation_count(void);

#endif
