// test_cpu_dw_blocks.c: the cpu backend forms a bf16 weight gradient in f32 a block of rows at a
// time (cpu_matmul.c, so its scratch is a block's, not the head's V x C). The bits must be those of
// the whole matrix formed in f32 and rounded once, written (=) and summed onto (MT_ACC_DW), on a
// matrix just past one block (16 Mi floats) so that the last block is short.
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_call.h"
#include "backends/cpu/cpu.h"
#include "test_util.h"

enum { N = 8, IC = 2048, OC = 8200 }; // 16.8 Mi floats: a block of 8192 rows, then 8

// The whole gradient in f32 (from dw's bf16 values when acc), rounded once: the old path.
static void whole(uint16_t *dw, const float *dout, const float *inp, int acc) {
    size_t n = (size_t)OC * IC;
    float *f = malloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++) f[i] = acc ? mt_bf16_to_f32(dw[i]) : 0.0f;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, N, 1.0f, dout, OC, inp, IC, acc ? 1.0f : 0.0f, f,
                IC);
    for (size_t i = 0; i < n; i++) dw[i] = mt_f32_to_bf16(f[i]);
    free(f);
}

int main(void) {
    mt_backend *be = NULL;
    if (mt_backend_cpu_create(MT_F32, &be) != MT_OK) return 1;
    size_t n = (size_t)OC * IC;
    float *dout = malloc(sizeof(float) * N * OC), *inp = malloc(sizeof(float) * N * IC);
    uint16_t *w = malloc(n * 2), *got = malloc(n * 2), *want = malloc(n * 2);
    mt_test_fill_uniform(dout, (size_t)N * OC, 1, -1, 1);
    mt_test_fill_uniform(inp, (size_t)N * IC, 2, -1, 1);
    for (size_t i = 0; i < n; i++) w[i] = mt_f32_to_bf16((float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f);
    for (int acc = 0; acc < 2; acc++) {
        memcpy(got, w, n * 2);
        memcpy(want, w, n * 2);
        mt_status s = mt_backend_matmul_bwd(be, NULL, got, NULL, dout, inp, w, MT_BF16, N, IC, OC, acc ? MT_ACC_DW : 0);
        CHECK(s == MT_OK, "matmul_bwd: %s", mt_last_error());
        whole(want, dout, inp, acc);
        size_t diff = 0;
        for (size_t i = 0; i < n; i++) diff += got[i] != want[i];
        CHECK(diff == 0, "%s: %zu of %zu bf16 gradients differ from the whole matrix's", acc ? "+=" : "=", diff, n);
        CHECK(memcmp(got, w, n * 2) != 0, "the gradient was written");
    }
    free(dout), free(inp), free(w), free(got), free(want);
    mt_backend_destroy(be);
    return mt_test_finish("test_cpu_dw_blocks");
}
