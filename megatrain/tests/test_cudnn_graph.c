// test_cudnn_graph.c: cuDNN's attention graphs, built without a GPU. Every
// tensor and operation descriptor of the forward and backward SDPA graphs is
// finalized by the real libcudnn, which checks each op's shapes, strides and
// types against its inputs (a matmul whose inner dimensions disagree, a
// reduction onto a shape that does not divide, a wrong attribute type all fail
// here), for the graph variants each cuDNN version gets, on causal GQA and MHA
// shapes, head dims 64 and 128, odd lengths. The plan itself (engine choice) and
// the numbers need a GPU: test_backend_ops --backend cuda. Exit 77 where libcudnn does not load.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_util.h"

#ifndef MT_HAVE_CUDNN
int main(void) {
    fprintf(stderr, "test_cudnn_graph: skipped (built without the cuDNN headers)\n");
    return 77;
}
#else
#include "backends/cuda/cudnn_api.h"
#include "backends/cuda/cudnn_attention.h"

// Operations the frontend's expansion has for our case (cudnn_attention.c's header comment):
// forward 14; backward 23 for MHA, +2 head reductions for GQA, -1 without the dQ accumulator,
// +6 per padding mask (the <= 9.15 workaround for T % 128 != 0, twice before 9.10).
static int expected_ops(int bwd, int T, int NH, int NKV, int det, size_t version) {
    if (!bwd) return 14;
    int n = 23 + (NH != NKV ? 2 : 0) - (det ? 1 : 0);
    if (T % 128 != 0 && version <= 91500) n += version < 91000 ? 12 : 6;
    return n;
}

int main(void) {
    if (!mt_cudnn_api_load()) {
        fprintf(stderr, "test_cudnn_graph: skipped (%s)\n", mt_last_error());
        return 77;
    }
    const size_t versions[] = {90500, 90900, 91000, 91400, 91500, 91600, 91900};
    const int shapes[][5] = {
        // B, T, NH, NKV, HD
        {2, 77, 4, 2, 64},   // GQA, odd T
        {1, 130, 2, 1, 128}, // MQA, T just past a 128 tile
        {3, 45, 4, 1, 64},   // B > 1, rep 4
        {1, 256, 4, 4, 128}, // MHA, T a multiple of 128 (no padding workaround)
        {2, 5, 2, 1, 32},    // T shorter than any tile
        {1, 4096, 28, 4, 128}, // Qwen2.5-7B's attention
    };
    for (size_t v = 0; v < sizeof versions / sizeof *versions; v++)
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
            for (int bwd = 0; bwd < 2; bwd++)
                for (int det = 0; det < 2; det++) {
                    const int *s = shapes[i];
                    int n_ops = -1;
                    mt_status st = mt_cudnn_attn_graph_check(bwd, s[0], s[1], s[2], s[3], s[4], det, versions[v], &n_ops);
                    CHECK(st == MT_OK, "cuDNN %zu %s B=%d T=%d NH=%d NKV=%d HD=%d det=%d: %s", versions[v],
                          bwd ? "backward" : "forward", s[0], s[1], s[2], s[3], s[4], det, mt_last_error());
                    int want = expected_ops(bwd, s[1], s[2], s[3], det, versions[v]);
                    CHECK(st != MT_OK || n_ops == want, "cuDNN %zu %s T=%d NH=%d NKV=%d det=%d: %d operations, expected %d",
                          versions[v], bwd ? "backward" : "forward", s[1], s[2], s[3], det, n_ops, want);
                }
    int n_ops = 0;
    CHECK(mt_cudnn_attn_graph_check(1, 1, 64, 3, 2, 64, 0, 91900, &n_ops) == MT_ERR_SHAPE,
          "NH not a multiple of NKV is refused before cuDNN sees it");

    // What the backend routes to cuDNN and what it keeps on the native kernels.
    static char buf[64] __attribute__((aligned(16)));
    const void *al[] = {buf, buf + 16}, *mis[] = {buf, buf + 2};
    CHECK(mt_cudnn_attn_unsupported(1, 128, al, 2) == NULL, "bf16, HD 128, aligned: cuDNN");
    CHECK(mt_cudnn_attn_unsupported(1, 64, al, 2) == NULL, "bf16, HD 64, aligned: cuDNN");
    CHECK(mt_cudnn_attn_unsupported(0, 64, al, 2) != NULL, "f32 activations: native");
    CHECK(mt_cudnn_attn_unsupported(1, 40 + 4, al, 2) != NULL, "HD 44 (not a multiple of 8): native");
    CHECK(mt_cudnn_attn_unsupported(1, 256, al, 2) != NULL, "HD 256: native");
    CHECK(mt_cudnn_attn_unsupported(1, 64, mis, 2) != NULL, "a buffer off 16-byte alignment: native");
    const mt_cudnn_api *api = mt_cudnn_api_load();
    fprintf(stderr, "test_cudnn_graph: %s (cuDNN %zu)\n", api->path, api->version);
    return mt_test_finish("test_cudnn_graph");
}
#endif
