// mem_limits.h: every memory limit the process lives under, in one place: the host's
// MemAvailable, MT_HOST_MEM_LIMIT, its cgroup's (v2 memory.max less memory.current, v1
// memory.limit_in_bytes less memory.usage_in_bytes, every level up to the root), and the
// address-space limits RLIMIT_AS (ulimit -v) and RLIMIT_DATA (ulimit -d), less what is
// mapped already and what threads yet to start will map (stacks, malloc arenas, OpenBLAS's
// buffers: virtual, yet counted by those limits, and OpenBLAS spins forever when its map fails).
#ifndef MT_MEM_LIMITS_H
#define MT_MEM_LIMITS_H

#include <stddef.h>

#include "core/status.h"

#define MT_MEM_BLAS_BUFFER_BYTES ((size_t)128 << 20) // OpenBLAS's per-thread buffer (BUFFER_SIZE, x86-64 and arm64)
#define MT_MEM_ARENA_BYTES ((size_t)64 << 20)        // a glibc malloc arena of a new thread (HEAP_MAX_SIZE)

typedef struct {
    size_t bytes;   // room for new memory under the tightest limit; SIZE_MAX: no limit known
    char what[320]; // that limit and its figures, one line ("" when none)
    int address_space; // that limit is RLIMIT_AS or RLIMIT_DATA (its remedy: ulimit -v / -d)
} mt_mem_room;

// The room now, keeping reserve_vm_bytes of address space for threads yet to start.
void mt_mem_room_now(size_t reserve_vm_bytes, mt_mem_room *out);
// The address-space limits alone (RLIMIT_AS, RLIMIT_DATA).
void mt_mem_vm_room(size_t reserve_vm_bytes, mt_mem_room *out);
// Address space one new thread maps: its stack (RLIMIT_STACK's size) and its malloc arena.
size_t mt_mem_thread_vm_bytes(void);
// What the engine's threads for `ranks` ranks will map (their stacks, arenas and, beyond the
// first rank, each rank's own OpenBLAS buffer: ranks call it at once).
size_t mt_mem_engine_reserve_bytes(int ranks);
// The cgroup room from a /proc/PID/cgroup file and the cgroup mount (tests pass a fake
// tree): SIZE_MAX when no memory limit is set; *what names the file and the figures.
size_t mt_mem_cgroup_room(const char *proc_cgroup, const char *root, char *what, size_t cap);

#endif
