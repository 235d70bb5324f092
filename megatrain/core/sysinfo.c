// sysinfo.c: meminfo files and NUMA binding through sysfs (no hwloc: the GPU
// machine has none, and the engine needs nothing hwloc adds for this).
#define _GNU_SOURCE
#include "core/sysinfo.h"

#include "core/mem_limits.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
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

// The least room any limit leaves (core/mem_limits.h), the engine's threads of one rank kept.
size_t mt_host_mem_available_bytes(void) {
    mt_mem_room r;
    mt_mem_room_now(mt_mem_engine_reserve_bytes(1), &r);
    if (r.bytes == SIZE_MAX) {
        long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        return pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : 0;
    }
    return r.bytes ? r.bytes : 1; // 1: no room (0 would read as "unknown")
}

#define MPOL_PREFERRED 1 // linux/mempolicy.h
#define MT_MPOL_BITS 1024 // node mask bits: above any nr_node_ids get_mempolicy may need

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

int mt_numa_mempolicy_prefers(int node, mt_numa_binding *b) {
    unsigned long mask[MT_MPOL_BITS / (8 * sizeof(unsigned long))] = {0};
    int mode = -1;
    if (syscall(SYS_get_mempolicy, &mode, mask, (unsigned long)MT_MPOL_BITS + 1, NULL, 0UL)) {
        snprintf(b->mem_how, sizeof b->mem_how, "get_mempolicy: %s", strerror(errno));
        return 0;
    }
    const size_t w = 8 * sizeof(unsigned long);
    int has = node < MT_MPOL_BITS && (mask[node / w] >> (node % w) & 1ul);
    // preferred (1), bind (2) or preferred-many (5: what hwloc asks of kernels >= 5.15)
    if (!(mode == MPOL_PREFERRED || mode == 2 || mode == 5) || !has) {
        snprintf(b->mem_how, sizeof b->mem_how, "the policy read back is mode %d%s, not node %d", mode,
                 has ? "" : " without the node", node);
        return 0;
    }
    return mode;
}

const char *mt_numa_mpol_name(int mode) {
    return mode == MPOL_PREFERRED ? "MPOL_PREFERRED" : mode == 2 ? "MPOL_BIND" : "MPOL_PREFERRED_MANY";
}

// set_mempolicy(MPOL_PREFERRED, {node}).
static int set_preferred(int node, mt_numa_binding *b) {
    unsigned long mask[MT_MPOL_BITS / (8 * sizeof(unsigned long))] = {0};
    const size_t w = 8 * sizeof(unsigned long);
    if (node >= MT_MPOL_BITS) {
        snprintf(b->mem_how, sizeof b->mem_how, "node %d is beyond the %d-bit node mask", node, MT_MPOL_BITS);
        return 0;
    }
    mask[node / w] |= 1ul << (node % w);
    // maxnode counts one more than the mask's bits (the kernel drops the last one)
    if (syscall(SYS_set_mempolicy, MPOL_PREFERRED, mask, (unsigned long)MT_MPOL_BITS + 1)) {
        snprintf(b->mem_how, sizeof b->mem_how, "set_mempolicy(MPOL_PREFERRED, node %d): %s", node, strerror(errno));
        return 0;
    }
    return 1;
}

mt_status mt_numa_bind_node(int node, mt_numa_binding *out) {
    mt_numa_binding tmp;
    mt_numa_binding *b = out ? out : &tmp;
    memset(b, 0, sizeof *b);
    if (node < 0) return mt_fail(MT_ERR_ARG, "NUMA node %d: must be >= 0", node);
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
        long a = strtol(s, &end, 10), z;
        if (end == s) break;
        z = a;
        s = end;
        if (*s == '-') {
            z = strtol(s + 1, &end, 10);
            s = end;
        }
        for (long c = a; c <= z && c < CPU_SETSIZE; c++) CPU_SET((int)c, &set), n++;
        if (*s == ',') s++;
    }
    if (n == 0) return mt_fail(MT_ERR_ARG, "NUMA node %d has no CPUs to bind to", node);
    if (sched_setaffinity(0, sizeof set, &set))
        return mt_fail(MT_ERR_BACKEND, "sched_setaffinity to NUMA node %d (cpus %s): %s", node, list, strerror(errno));
    b->cpus = n;
    int mode;
    if (set_preferred(node, b) && (mode = mt_numa_mempolicy_prefers(node, b)))
        b->memory = 1, snprintf(b->mem_how, sizeof b->mem_how, "set_mempolicy(MPOL_PREFERRED, node %d); read back %s",
                                node, mt_numa_mpol_name(mode));
    return MT_OK;
}
