// cuda_xent.cu: fused softmax cross-entropy forward+backward on a chunk of
// logits(n,V), in place. One block per row: pass 1 an online (max, sum) over V
// in f32 (each thread its strided slice, then a block merge), pass 2 writes
// dscale * (softmax - onehot). A target outside [0,V) gets loss 0 and a zero
// gradient row (ignore-index semantics; the data loader rejects such ids).
#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/xent_kernels.cuh"

mt_status mt_cuda_xent_fwd_bwd(mt_backend *be, void *logits, float *losses, const int32_t *targets, int n, int V,
                               float dscale) {
    if (n < 0 || V <= 0) return mt_fail(MT_ERR_SHAPE, "cuda xent: bad shape n=%d V=%d", n, V);
    if (n == 0) return MT_OK;
    cudaStream_t s = mt_cuda_compute(be);
    return mt_cuda_dispatch1(be->act_dtype, [&](auto a) -> mt_status {
        using A = decltype(a);
        constexpr int VEC = mt_vec_of<A>();
        if (V % VEC == 0 && mt_cuda_aligned16(logits))
            xent_kernel<A, VEC><<<(unsigned)n, XENT_THREADS, 0, s>>>((A *)logits, losses, targets, V, dscale);
        else
            xent_kernel<A, 1><<<(unsigned)n, XENT_THREADS, 0, s>>>((A *)logits, losses, targets, V, dscale);
        MT_CUDA_CHECK_LAUNCH();
        return MT_OK;
    });
}
