// cuda_adamw.cu: the cuda backend's share of the optimizer (backend.h adamw, grad_sumsq):
// the kernels of adamw_kernels.cuh on the stream the engine names, constants from the
// host's own mt_adamw_consts_init. Built apart from the other kernels, without fast math
// (megatrain/CMakeLists.txt): bitwise the host's AdamW is the contract.
#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/exact/adamw_kernels.cuh"

extern "C" {
#include "optim/adamw_isa.h"
}

static mt_adamw_dev_consts dev_consts(const mt_adamw_hparams *h, float wd) {
    mt_adamw_consts c;
    mt_adamw_consts_init(&c, h, wd);
    return {c.gscale, c.decay, c.lerp_w, c.lerp_small, c.beta2, c.c2, c.bc2_sqrt, c.eps, c.neg_step};
}

template <typename P, typename G>
static void launch(const mt_adamw_state *s, const void *g, size_t n, const mt_adamw_dev_consts &c, cudaStream_t st) {
    unsigned blocks = mt_cuda_blocks(n, 256);
    if (s->master)
        mt_ex_adamw_kernel<P, G, true><<<blocks, 256, 0, st>>>(s->master, (P *)s->p, (const G *)g, s->m, s->v, n, c);
    else
        mt_ex_adamw_kernel<P, G, false><<<blocks, 256, 0, st>>>(NULL, (P *)s->p, (const G *)g, s->m, s->v, n, c);
}

static int exact_dtype(mt_dtype t) { return t == MT_F32 || t == MT_BF16; }

mt_status mt_cuda_adamw(mt_backend *be, const mt_adamw_state *s, mt_dtype pdt, const void *g, mt_dtype gdt,
                                   size_t n, const mt_adamw_hparams *h, float wd, mt_stream_id sid) {
    if (!exact_dtype(pdt) || !exact_dtype(gdt))
        return mt_fail(MT_ERR_UNSUPPORTED, "weights and gradients must be f32 or bf16 (got %s, %s)",
                       mt_dtype_name(pdt), mt_dtype_name(gdt));
    if (n == 0) return MT_OK;
    cudaStream_t st = mt_cuda_ctx_of(be)->stream[sid];
    mt_adamw_dev_consts c = dev_consts(h, wd);
    if (pdt == MT_F32 && gdt == MT_F32) launch<float, float>(s, g, n, c, st);
    else if (pdt == MT_F32) launch<float, uint16_t>(s, g, n, c, st);
    else if (gdt == MT_F32) launch<uint16_t, float>(s, g, n, c, st);
    else launch<uint16_t, uint16_t>(s, g, n, c, st);
    MT_CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_grad_add(mt_backend *be, void *dst, const void *src, mt_dtype t, size_t n, mt_stream_id sid) {
    if (!exact_dtype(t)) return mt_fail(MT_ERR_UNSUPPORTED, "gradients must be f32 or bf16 (got %s)", mt_dtype_name(t));
    if (n == 0) return MT_OK;
    cudaStream_t st = mt_cuda_ctx_of(be)->stream[sid];
    if (t == MT_F32) mt_ex_grad_add<float><<<mt_cuda_blocks(n, 256), 256, 0, st>>>((float *)dst, (const float *)src, n);
    else mt_ex_grad_add<uint16_t><<<mt_cuda_blocks(n, 256), 256, 0, st>>>((uint16_t *)dst, (const uint16_t *)src, n);
    MT_CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_grad_sumsq(mt_backend *be, double *out, const void *x, mt_dtype t, size_t n,
                                        mt_stream_id sid) {
    if (!exact_dtype(t)) return mt_fail(MT_ERR_UNSUPPORTED, "gradients must be f32 or bf16 (got %s)", mt_dtype_name(t));
    cudaStream_t st = mt_cuda_ctx_of(be)->stream[sid];
    size_t nb = (n + MT_EX_SUMSQ_BLOCK - 1) / MT_EX_SUMSQ_BLOCK;
    double *sums = NULL;
    // Stream-ordered: the block sums live only as long as this pass on this stream.
    if (nb) MT_CUDA_CHECK(cudaMallocAsync((void **)&sums, nb * sizeof(double), st));
    if (nb && t == MT_F32) mt_ex_sumsq_blocks<float><<<(unsigned)nb, MT_EX_SUMSQ_LANES, 0, st>>>(sums, (const float *)x, n);
    else if (nb) mt_ex_sumsq_blocks<uint16_t><<<(unsigned)nb, MT_EX_SUMSQ_LANES, 0, st>>>(sums, (const uint16_t *)x, n);
    mt_ex_sumsq_total<<<1, 1, 0, st>>>(out, sums, nb);
    MT_CUDA_CHECK_LAUNCH();
    if (nb) MT_CUDA_CHECK(cudaFreeAsync(sums, st));
    return MT_OK;
}
