// sysinfo.c: meminfo files and NUMA binding through sysfs (no hwloc: the GPU
// machine has none, and the engine needs nothing hwloc adds for this).
#define _GNU_SOURCE
#include "core/sysinfo.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

size_t mt_meminfo_bytes(const char *path, const char *key) {
    FILE *f = fopen(path ? path : "/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    size_t klen = strlen(key), bytes = 0;
    while (fgets(line, sizeof line, f)) {
        char *k = strstr(line, key); // "MemTotal:" or "Node 0 MemTotal:"
        unsigned long long kb;
        if (k && k[klen] == ':' && (k == line || k[-1] == ' ') && sscanf(k + klen + 1, " %llu", &kb) == 1) {
            bytes = (size_t)kb * 1024;
            break;
        }
    }
    fclose(f);
    return bytes;
}

size_t mt_host_mem_total_bytes(void) { return mt_meminfo_bytes(NULL, "MemTotal"); }

size_t mt_host_mem_available_bytes(void) {
    size_t b = mt_meminfo_bytes(NULL, "MemAvailable");
    if (b) return b;
    long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : 0;
}

#define MPOL_PREFERRED 1 // linux/mempolicy.h

// First line of a small sysfs file, without its newline; 0 on success.
static int read_line(const char *path, char *out, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int ok = fgets(out, (int)cap, f) != NULL;
    fclose(f);
    if (!ok) return -1;
    out[strcspn(out, "\n")] = 0;
    return 0;
}

mt_status mt_numa_bind_node(int node) {
    char path[128], list[4096];
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
    if (read_line(path, list, sizeof list)) { // a machine without NUMA nodes in sysfs is all node 0
        if (node != 0) return mt_fail(MT_ERR_ARG, "NUMA node %d: %s not readable", node, path);
        if (read_line("/sys/devices/system/cpu/online", list, sizeof list))
            return mt_fail(MT_ERR_IO, "NUMA node 0: neither %s nor the online CPU list is readable", path);
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    int n = 0;
    for (const char *s = list; *s;) { // "0-15,32-47"
        char *end;
        long a = strtol(s, &end, 10), b;
        if (end == s) break;
        b = a;
        s = end;
        if (*s == '-') {
            b = strtol(s + 1, &end, 10);
            s = end;
        }
        for (long c = a; c <= b && c < CPU_SETSIZE; c++) CPU_SET((int)c, &set), n++;
        if (*s == ',') s++;
    }
    if (n == 0) return mt_fail(MT_ERR_ARG, "NUMA node %d has no CPUs to bind to", node);
    if (sched_setaffinity(0, sizeof set, &set))
        return mt_fail(MT_ERR_BACKEND, "sched_setaffinity to NUMA node %d (cpus %s): %s", node, list, strerror(errno));
    // Prefer (not require) the node for this thread's allocations; ignored where forbidden.
    unsigned long mask[16] = {0};
    if (node >= 0 && node < (int)(sizeof mask * 8)) {
        mask[node / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
        (void)syscall(SYS_set_mempolicy, MPOL_PREFERRED, mask, (unsigned long)(sizeof mask * 8));
    }
    return MT_OK;
}
