// test_mem_limits: the cgroup limits the memory check counts (core/mem_limits.h), on fake
// /proc/self/cgroup files and cgroup trees: v2 memory.max less memory.current at every level
// up to the mount (the tightest wins, "max" is none), v1 memory.limit_in_bytes less
// memory.usage_in_bytes (its ~2^63 "no limit" is none), a usage past the limit is no room.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/mem_limits.h"
#include "test_util.h"

static void dir(const char *rel) { mkdir(mt_test_path(rel), 0755); }

static void test_v2(void) {
    dir("v2"), dir("v2/a"), dir("v2/a/b");
    const char *cg = mt_test_write_tmp("cg_v2", "0::/a/b\n");
    char what[320] = "", root[1024];
    snprintf(root, sizeof root, "%s", mt_test_path("v2"));
    CHECK(mt_mem_cgroup_room(cg, root, what, sizeof what) == SIZE_MAX, "no memory files: no limit (%s)", what);
    mt_test_write_tmp("v2/a/b/memory.max", "max\n");
    mt_test_write_tmp("v2/a/b/memory.current", "1000\n");
    CHECK(mt_mem_cgroup_room(cg, root, what, sizeof what) == SIZE_MAX, "\"max\" is no limit");
    mt_test_write_tmp("v2/a/memory.max", "1073741824\n");
    mt_test_write_tmp("v2/a/memory.current", "73741824\n");
    size_t r = mt_mem_cgroup_room(cg, root, what, sizeof what);
    CHECK(r == 1000000000, "the parent's limit applies to its child: %zu", r);
    CHECK(strstr(what, "memory.max 1.00 GiB") && strstr(what, "/a"), "names the file and the figures: %s", what);
    mt_test_write_tmp("v2/a/b/memory.max", "2000000\n");
    r = mt_mem_cgroup_room(cg, root, what, sizeof what);
    CHECK(r == 2000000 - 1000, "the tightest level wins: %zu (%s)", r, what);
    mt_test_write_tmp("v2/a/b/memory.current", "3000000\n");
    CHECK(mt_mem_cgroup_room(cg, root, what, sizeof what) == 0, "usage past the limit: no room");
}

static void test_v1(void) {
    dir("v1"), dir("v1/memory"), dir("v1/memory/x");
    const char *cg = mt_test_write_tmp("cg_v1", "9:name=systemd:/\n4:memory:/x\n3:cpuset:/\n0::/\n");
    char what[320] = "", root[1024];
    snprintf(root, sizeof root, "%s", mt_test_path("v1"));
    mt_test_write_tmp("v1/memory/x/memory.limit_in_bytes", "9223372036854771712\n");
    mt_test_write_tmp("v1/memory/x/memory.usage_in_bytes", "380661760\n");
    CHECK(mt_mem_cgroup_room(cg, root, what, sizeof what) == SIZE_MAX, "v1's ~2^63 is no limit (%s)", what);
    mt_test_write_tmp("v1/memory/x/memory.limit_in_bytes", "500000000\n");
    size_t r = mt_mem_cgroup_room(cg, root, what, sizeof what);
    CHECK(r == 500000000 - 380661760, "v1 limit less usage: %zu", r);
    CHECK(strstr(what, "memory.limit_in_bytes") && strstr(what, "memory.usage_in_bytes"), "names v1's files: %s", what);
    const char *cg2 = mt_test_write_tmp("cg_v1b", "4:cpuacct,memory:/x\n");
    CHECK(mt_mem_cgroup_room(cg2, root, what, sizeof what) == r, "memory among other controllers on the line");
    CHECK(mt_mem_cgroup_room(mt_test_path("none"), root, what, sizeof what) == SIZE_MAX, "no cgroup file: no limit");
}

static void test_room(void) {
    mt_mem_room a, b;
    mt_mem_room_now(0, &a);
    CHECK(a.bytes != SIZE_MAX && a.what[0], "this host has a limit known (MemAvailable at least): %s", a.what);
    setenv("MT_HOST_MEM_LIMIT", "12345", 1);
    mt_mem_room_now(0, &b);
    CHECK(b.bytes == 12345 && strstr(b.what, "MT_HOST_MEM_LIMIT"), "MT_HOST_MEM_LIMIT the tightest: %zu %s", b.bytes,
          b.what);
    unsetenv("MT_HOST_MEM_LIMIT");
}

int main(void) {
    mt_test_tmpdir_make("mem_limits");
    test_v2();
    test_v1();
    test_room();
    return mt_test_finish("test_mem_limits");
}
