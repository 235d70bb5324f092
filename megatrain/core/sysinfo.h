// sysinfo.h: facts about the host machine that several modules need, read in
// one place: /proc/meminfo (or a NUMA node's meminfo) and NUMA binding.
#ifndef MT_SYSINFO_H
#define MT_SYSINFO_H

#include <stddef.h>

#include "core/status.h"

// The value of `key` ("MemTotal", "MemAvailable", ...) in a meminfo file, in
// bytes: /proc/meminfo when path is NULL, or a node's
// /sys/devices/system/node/nodeN/meminfo ("Node N MemTotal: ... kB"); 0 if absent.
size_t mt_meminfo_bytes(const char *path, const char *key);
// MemTotal (all host memory); 0 if unknown.
size_t mt_host_mem_total_bytes(void);
// The room for new host memory under every limit (core/mem_limits.h: MemAvailable,
// MT_HOST_MEM_LIMIT=BYTES, the cgroup's, ulimit -v and -d); free pages where /proc is
// missing; 0 if unknown, 1 if none is left.
size_t mt_host_mem_available_bytes(void);

// What a NUMA binding did.
typedef struct {
    int cpus;           // CPUs of the node the calling thread is now bound to
    int memory;         // 1: the thread's memory policy prefers the node (set, and read back
                        //    with get_mempolicy); 0: memory is not bound (mem_how says why)
    char mem_how[256];  // one line: how memory was bound, or why it was not
} mt_numa_binding;

// Binds the calling thread (and the threads it creates later, which inherit both)
// to NUMA node `node` through sysfs: its CPUs (sched_setaffinity over the node's
// cpulist) and its memory (set_mempolicy(MPOL_PREFERRED): preferred, not strict,
// so a state larger than one node still allocates), the policy read back with
// get_mempolicy. A CPU-binding failure is an error; a memory-policy failure is
// not (containers often forbid it): out->memory is 0 and out->mem_how says why.
// `out` may be NULL. (harness/topology.c binds through hwloc where it has it.)
mt_status mt_numa_bind_node(int node, mt_numa_binding *out);
// Reads the calling thread's memory policy back: its mode when it holds `node`
// (preferred, bind or preferred-many), else 0 with the reason in b->mem_how.
int mt_numa_mempolicy_prefers(int node, mt_numa_binding *b);
// "MPOL_PREFERRED", "MPOL_BIND" or "MPOL_PREFERRED_MANY".
const char *mt_numa_mpol_name(int mode);

#endif
