// mem_limits.c: the memory limits of this process (mem_limits.h).
#define _GNU_SOURCE
#include "core/mem_limits.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/bytes_text.h"
#include "core/env.h"
#include "core/sysinfo.h"

// A candidate: the tighter of *out and `room`, described by what (printf-style).
static void consider(mt_mem_room *out, size_t room, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void consider(mt_mem_room *out, size_t room, const char *fmt, ...) {
    if (room >= out->bytes) return;
    out->bytes = room;
    out->address_space = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->what, sizeof out->what, fmt, ap);
    va_end(ap);
}

// "VmSize" or "VmData" of /proc/self/status, in bytes (0 unknown).
static size_t vm_status_bytes(const char *key) { return mt_meminfo_bytes("/proc/self/status", key); }

size_t mt_mem_thread_vm_bytes(void) {
    struct rlimit rl;
    size_t stack = (size_t)8 << 20; // glibc's default where RLIMIT_STACK is unlimited is smaller
    if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) stack = (size_t)rl.rlim_cur;
    return stack + 4096 + MT_MEM_ARENA_BYTES;
}

size_t mt_mem_engine_reserve_bytes(int ranks) {
    size_t R = ranks > 0 ? (size_t)ranks : 1;
    return (2 + 2 * R) * mt_mem_thread_vm_bytes() + (R - 1) * MT_MEM_BLAS_BUFFER_BYTES;
}

void mt_mem_vm_room(size_t reserve, mt_mem_room *out) {
    out->bytes = SIZE_MAX;
    out->what[0] = 0;
    out->address_space = 0;
    static const struct { int res; const char *name, *key; } lim[] = {
        {RLIMIT_AS, "RLIMIT_AS (ulimit -v)", "VmSize"}, {RLIMIT_DATA, "RLIMIT_DATA (ulimit -d)", "VmData"}};
    for (int i = 0; i < 2; i++) {
        struct rlimit rl;
        if (getrlimit(lim[i].res, &rl) || rl.rlim_cur == RLIM_INFINITY) continue;
        size_t cap = (size_t)rl.rlim_cur, used = vm_status_bytes(lim[i].key), taken = used + reserve;
        if (reserve)
            consider(out, taken < cap ? cap - taken : 0, "%s %s, of which %s is mapped and %s kept for threads' "
                     "stacks, arenas and BLAS buffers", lim[i].name, mt_bytes_format(cap).s,
                     mt_bytes_format(used).s, mt_bytes_format(reserve).s);
        else
            consider(out, used < cap ? cap - used : 0, "%s %s, of which %s is mapped", lim[i].name,
                     mt_bytes_format(cap).s, mt_bytes_format(used).s);
        if (out->bytes != SIZE_MAX) out->address_space = 1; // every candidate so far is an address-space limit
    }
}

static int read_u64_file(const char *path, unsigned long long *v) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char s[64] = "";
    int ok = fgets(s, sizeof s, f) != NULL;
    fclose(f);
    char *end;
    if (!ok || s[0] < '0' || s[0] > '9') return -1; // "max": no limit
    *v = strtoull(s, &end, 10);
    return 0;
}

size_t mt_mem_cgroup_room(const char *proc_cgroup, const char *root, char *what, size_t cap) {
    FILE *f = fopen(proc_cgroup, "r");
    if (!f) return SIZE_MAX;
    char line[4096], path[4096 + 64];
    size_t best = SIZE_MAX;
    while (fgets(line, sizeof line, f)) { // "0::/a/b" (v2) or "4:memory:/a/b" (v1)
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = 0;
        const char *ctrl = c1 + 1, *rel = c2 + 1;
        int v2 = !*ctrl, v1 = !v2 && (!strcmp(ctrl, "memory") || strstr(ctrl, "memory,") ||
                                      (strlen(ctrl) > 7 && !strcmp(ctrl + strlen(ctrl) - 7, ",memory")));
        if (!v2 && !v1) continue;
        const char *lim_f = v2 ? "memory.max" : "memory.limit_in_bytes",
                   *cur_f = v2 ? "memory.current" : "memory.usage_in_bytes";
        char dir[4096];
        snprintf(dir, sizeof dir, "%s%s%s", root, v1 ? "/memory" : "", strcmp(rel, "/") ? rel : "");
        for (;;) { // every level up to the mount: each one's limit applies
            unsigned long long lim, cur = 0;
            snprintf(path, sizeof path, "%s/%s", dir, lim_f);
            if (read_u64_file(path, &lim) == 0 && lim < (1ull << 60)) { // v1 writes "no limit" as ~2^63
                snprintf(path, sizeof path, "%s/%s", dir, cur_f);
                read_u64_file(path, &cur);
                size_t room = cur < lim ? (size_t)(lim - cur) : 0;
                if (room < best) {
                    best = room;
                    snprintf(what, cap, "the cgroup's %s %s less %s %s (%s)", lim_f, mt_bytes_format(lim).s, cur_f,
                             mt_bytes_format(cur).s, dir);
                }
            }
            char *slash = strrchr(dir, '/');
            if (!slash || (size_t)(slash - dir) < strlen(root) + (v1 ? 7 : 0)) break;
            *slash = 0;
        }
    }
    fclose(f);
    return best;
}

void mt_mem_room_now(size_t reserve, mt_mem_room *out) {
    mt_mem_vm_room(reserve, out);
    size_t avail = mt_meminfo_bytes(NULL, "MemAvailable");
    if (avail) consider(out, avail, "the host's MemAvailable %s", mt_bytes_format(avail).s);
    uint64_t cap = 0;
    if (mt_env_u64("MT_HOST_MEM_LIMIT", 1, UINT64_MAX, 0, &cap) == MT_OK && cap) // a bad value: refused by the CLI
        consider(out, (size_t)cap, "MT_HOST_MEM_LIMIT %s", mt_bytes_format((size_t)cap).s);
    char what[sizeof out->what];
    size_t cg = mt_mem_cgroup_room("/proc/self/cgroup", "/sys/fs/cgroup", what, sizeof what);
    if (cg != SIZE_MAX) consider(out, cg, "%s", what);
}
