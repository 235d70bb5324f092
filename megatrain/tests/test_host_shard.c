// test_host_shard.c: the slices of a unit across hosts (engine/host_shard.h), the one split
// the sum, the sharded update and the sharded saves share: host order, contiguous, every
// element once, starts aligned, none longer than ceil(n/H) rounded up to the alignment; and
// a release gives back the pages of a unit's moments outside the slice (zeros after) while
// the slice keeps its values.
#include "core/host_mem.h"
#include "engine/host_shard.h"
#include "engine/host_state.h"
#include "test_util.h"

static void test_ranges(void) {
    const size_t ns[] = {0, 1, 63, 64, 65, 1000, 4096, 100003, (size_t)3 << 31};
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
        for (int H = 1; H <= 9; H++) {
            size_t n = ns[k], next = 0, per = ((n + H - 1) / H + 63) / 64 * 64;
            for (int h = 0; h < H; h++) {
                size_t off, cnt;
                mt_host_shard_range(n, H, h, &off, &cnt);
                CHECK(off == next || cnt == 0, "n %zu H %d host %d: starts at %zu, the last ended at %zu", n, H, h, off,
                      next);
                CHECK(cnt == 0 || off % MT_HOST_SHARD_ALIGN == 0, "n %zu H %d host %d: start %zu not aligned", n, H, h, off);
                CHECK(cnt <= per, "n %zu H %d host %d: %zu elements, more than %zu", n, H, h, cnt, per);
                CHECK(off + cnt <= n, "n %zu H %d host %d: past the end", n, H, h);
                next = off + cnt;
            }
            CHECK(next == n, "n %zu H %d: the slices cover %zu elements", n, H, next);
        }
}

static void test_release(void) {
    const size_t n = (size_t)1 << 20; // 4 MiB of f32 per array: whole pages outside any slice
    mt_unit_layout lay = {.numel = n};
    mt_unit u = {.lay = &lay};
    void *block = NULL;
    CHECK(mt_host_mem_alloc(2 * n * sizeof(float), &block) == MT_OK, "%s", mt_last_error());
    if (!block) return;
    u.m = block, u.v = (float *)block + n;
    for (size_t i = 0; i < 2 * n; i++) ((float *)block)[i] = 1.0f;
    size_t off, cnt;
    mt_host_shard_range(n, 3, 1, &off, &cnt);
    mt_host_shard_release(&u, 3, 1);
    int kept = 1;
    for (size_t i = off; i < off + cnt; i++) kept &= u.m[i] == 1.0f && u.v[i] == 1.0f;
    CHECK(kept, "the slice [%zu, %zu) keeps its values", off, off + cnt);
    CHECK(u.m[0] == 0.0f && u.v[n - 1] == 0.0f, "whole pages outside the slice read as zeros (m[0] %g, v[n-1] %g)",
          u.m[0], u.v[n - 1]);
    mt_host_mem_free(block, 2 * n * sizeof(float));
}

int main(void) {
    test_ranges();
    test_release();
    return mt_test_finish("test_host_shard");
}
