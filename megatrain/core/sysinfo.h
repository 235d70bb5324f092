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
// MemAvailable from /proc/meminfo (what can be allocated without swapping);
// free pages where /proc is missing; 0 if unknown.
size_t mt_host_mem_available_bytes(void);

// Binds the calling thread's CPUs to NUMA node `node` (its cpulist in sysfs)
// and prefers that node for the memory it touches from now on (set_mempolicy;
// a refused memory policy is not an error: containers often forbid it).
mt_status mt_numa_bind_node(int node);

#endif
