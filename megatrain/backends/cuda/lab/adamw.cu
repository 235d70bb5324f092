// adamw.cu: the device AdamW and gradient sum of squares (../exact/adamw_kernels.cuh,
// the backend's cuda_adamw.cu) against the host's own code (optim/: mt_adamw_update on
// its dispatched SIMD path, mt_grad_sumsq), which they must equal BITWISE: p, m, v and
// the master after three steps (a clip factor, weight decay, both lerp branches) in every
// precision mode (fp32; paper: bf16 p and g; mixed: f32 master, bf16 p and g; bf16 p with
// f32 g), on sizes with ragged tails and values that reach denormals; the sum of squares
// on f32 and bf16 across several blocks; the micro-batches' gradient add. Then the kernels' speed against the HBM peak.
// Built without fast math, as the backend's (CMakeLists.txt). usage: ./adamw [N]
#include "lab_common.h"
#include "lab_device.h"
#include "../exact/adamw_kernels.cuh"

extern "C" {
#include "optim/adamw.h"
#include "optim/adamw_isa.h"
#include "optim/grad_ops.h"
}

typedef struct {
    mt_dtype pdt, gdt;
    int master;
    const char *name;
} mode;
static const mode MODES[] = {{MT_F32, MT_F32, 0, "fp32"},
                             {MT_BF16, MT_BF16, 0, "paper"},
                             {MT_BF16, MT_BF16, 1, "mixed"},
                             {MT_BF16, MT_F32, 0, "p bf16 / g f32"},
                             {MT_BF16, MT_F32, 1, "master / g f32"}};

static mt_adamw_dev_consts dev_consts(const mt_adamw_hparams *h, float wd) {
    mt_adamw_consts c;
    mt_adamw_consts_init(&c, h, wd);
    return {c.gscale, c.decay, c.lerp_w, c.lerp_small, c.beta2, c.c2, c.bc2_sqrt, c.eps, c.neg_step};
}

template <typename P, typename G>
static void run_dev(float *master, void *p, const void *g, float *m, float *v, size_t n, mt_adamw_dev_consts c) {
    unsigned b = mt_cuda_blocks(n, 256);
    if (master) mt_ex_adamw_kernel<P, G, true><<<b, 256>>>(master, (P *)p, (const G *)g, m, v, n, c);
    else mt_ex_adamw_kernel<P, G, false><<<b, 256>>>(NULL, (P *)p, (const G *)g, m, v, n, c);
    LAB_CHECK(cudaGetLastError());
}
static void adamw_dev(const mode *md, float *master, void *p, const void *g, float *m, float *v, size_t n,
                      mt_adamw_dev_consts c) {
    if (md->pdt == MT_F32) run_dev<float, float>(master, p, g, m, v, n, c);
    else if (md->gdt == MT_F32) run_dev<uint16_t, float>(master, p, g, m, v, n, c);
    else run_dev<uint16_t, uint16_t>(master, p, g, m, v, n, c);
}

// Values across the range the optimizer meets: ordinary, tiny (their squares are denormal
// or zero in v), large, and exact zeros.
static void fill_mixed(float *x, size_t n, unsigned long long seed) {
    lab_fill(x, n, seed, -2.0f, 2.0f);
    for (size_t i = 0; i < n; i++) {
        unsigned k = lab_hash((unsigned)(i * 2654435761u + seed));
        if (k % 7 == 0) x[i] *= 1e-21f;
        else if (k % 11 == 0) x[i] *= 3e4f;
        else if (k % 13 == 0) x[i] = 0.0f;
    }
}

static void *dev_copy(const void *h, size_t bytes) {
    void *d;
    LAB_CHECK(cudaMalloc(&d, bytes ? bytes : 1));
    LAB_CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

static size_t differ(const void *host, const void *dev, size_t bytes, size_t es) {
    unsigned char *back = (unsigned char *)malloc(bytes ? bytes : 1);
    LAB_CHECK(cudaMemcpy(back, dev, bytes, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < bytes; i += es) bad += memcmp(back + i, (const unsigned char *)host + i, es) != 0;
    free(back);
    return bad;
}

static void check_mode(const mode *md, size_t n, float beta1) {
    size_t ps = mt_dtype_size(md->pdt), gs = mt_dtype_size(md->gdt);
    float *f = (float *)malloc(n * sizeof(float)), *master = (float *)malloc(n * 4), *m = (float *)calloc(n, 4),
          *v = (float *)calloc(n, 4);
    void *p = malloc(n * ps), *g = malloc(n * gs);
    fill_mixed(f, n, 1);
    memcpy(master, f, n * 4);
    mt_convert(p, md->pdt, f, MT_F32, n);
    float *dmaster = (float *)dev_copy(master, n * 4), *dm = (float *)dev_copy(m, n * 4), *dv = (float *)dev_copy(v, n * 4);
    void *dp = dev_copy(p, n * ps), *dg = NULL;
    LAB_CHECK(cudaMalloc(&dg, n * gs + 1));
    for (int step = 1; step <= 3; step++) {
        fill_mixed(f, n, 100 + step);
        mt_convert(g, md->gdt, f, MT_F32, n);
        LAB_CHECK(cudaMemcpy(dg, g, n * gs, cudaMemcpyHostToDevice));
        mt_adamw_hparams h = {.lr = 3e-4f, .beta1 = beta1, .beta2 = 0.95f, .eps = 1e-8f,
                              .grad_scale = step == 2 ? 0.37f : 1.0f, .step = step};
        float wd = step == 3 ? 0.0f : 0.1f;
        mt_adamw_update(md->master ? master : NULL, p, md->pdt, g, md->gdt, m, v, n, &h, wd);
        adamw_dev(md, md->master ? dmaster : NULL, dp, dg, dm, dv, n, dev_consts(&h, wd));
    }
    LAB_CHECK(cudaDeviceSynchronize());
    size_t bad = differ(p, dp, n * ps, ps) + differ(m, dm, n * 4, 4) + differ(v, dv, n * 4, 4) +
                 (md->master ? differ(master, dmaster, n * 4, 4) : 0);
    char what[96];
    snprintf(what, sizeof what, "adamw %s n=%zu beta1=%.2f: elements differing", md->name, n, beta1);
    lab_report(what, (double)bad, 0);
    cudaFree(dmaster), cudaFree(dm), cudaFree(dv), cudaFree(dp), cudaFree(dg);
    free(f), free(master), free(m), free(v), free(p), free(g);
}

static double sumsq_dev(const void *dx, mt_dtype t, size_t n) {
    size_t nb = (n + MT_EX_SUMSQ_BLOCK - 1) / MT_EX_SUMSQ_BLOCK;
    double *sums, *out, r;
    LAB_CHECK(cudaMalloc(&sums, (nb ? nb : 1) * 8));
    LAB_CHECK(cudaMalloc(&out, 8));
    if (nb && t == MT_F32) mt_ex_sumsq_blocks<float><<<(unsigned)nb, MT_EX_SUMSQ_LANES>>>(sums, (const float *)dx, n);
    else if (nb) mt_ex_sumsq_blocks<uint16_t><<<(unsigned)nb, MT_EX_SUMSQ_LANES>>>(sums, (const uint16_t *)dx, n);
    mt_ex_sumsq_total<<<1, 1>>>(out, sums, nb);
    LAB_CHECK(cudaGetLastError());
    LAB_CHECK(cudaMemcpy(&r, out, 8, cudaMemcpyDeviceToHost));
    cudaFree(sums), cudaFree(out);
    return r;
}

static void check_grad_add(mt_dtype t, size_t n) {
    size_t es = mt_dtype_size(t);
    float *f = (float *)malloc(n * 4);
    void *a = malloc(n * es), *b = malloc(n * es);
    fill_mixed(f, n, 21);
    mt_convert(a, t, f, MT_F32, n);
    fill_mixed(f, n, 22);
    mt_convert(b, t, f, MT_F32, n);
    void *da = dev_copy(a, n * es), *db = dev_copy(b, n * es);
    if (t == MT_F32) mt_ex_grad_add<float><<<mt_cuda_blocks(n, 256), 256>>>((float *)da, (const float *)db, n);
    else mt_ex_grad_add<uint16_t><<<mt_cuda_blocks(n, 256), 256>>>((uint16_t *)da, (const uint16_t *)db, n);
    LAB_CHECK(cudaGetLastError());
    mt_grad_accumulate(a, b, t, n, 0);
    char what[96];
    snprintf(what, sizeof what, "grad_add %s n=%zu: elements differing", mt_dtype_name(t), n);
    lab_report(what, (double)differ(a, da, n * es, es), 0);
    cudaFree(da), cudaFree(db), free(f), free(a), free(b);
}

static void check_sumsq(mt_dtype t, size_t n) {
    float *f = (float *)malloc((n ? n : 1) * 4);
    void *x = malloc((n ? n : 1) * 4);
    fill_mixed(f, n, 7);
    mt_convert(x, t, f, MT_F32, n);
    void *dx = dev_copy(x, n * mt_dtype_size(t));
    double host = mt_grad_sumsq(x, t, n), dev = sumsq_dev(dx, t, n);
    char what[96];
    snprintf(what, sizeof what, "sumsq %s n=%zu: bits differ", mt_dtype_name(t), n);
    lab_report(what, memcmp(&host, &dev, 8) != 0, 0);
    cudaFree(dx), free(f), free(x);
}

int main(int argc, char **argv) {
    size_t N = argc > 1 ? strtoull(argv[1], NULL, 10) : ((size_t)1 << 28);
    printf("device AdamW and sum of squares vs the host's (%s), bitwise\n", mt_adamw_isa());
    const size_t sizes[] = {1, 31, 1000, ((size_t)1 << 16) + 77, 3000001};
    for (const mode &md : MODES)
        for (size_t n : sizes) check_mode(&md, n, 0.9f);
    check_mode(&MODES[1], 4097, 0.3f); // torch's other lerp branch (1 - beta1 >= 0.5)
    check_mode(&MODES[2], 4097, 0.3f);
    const size_t sq_sizes[] = {0, 5, ((size_t)1 << 16) * 3 + 11, 10000019};
    for (size_t n : sq_sizes) check_sumsq(MT_F32, n), check_sumsq(MT_BF16, n);
    check_grad_add(MT_F32, 3000001), check_grad_add(MT_BF16, 3000001);

    // Speed (paper mode: read g, p, m, v; write p, m, v = 16 + 2*2 + 2 = 22 bytes/element).
    uint16_t *p, *g;
    float *m, *v;
    LAB_CHECK(cudaMalloc(&p, N * 2));
    LAB_CHECK(cudaMalloc(&g, N * 2));
    LAB_CHECK(cudaMalloc(&m, N * 4));
    LAB_CHECK(cudaMalloc(&v, N * 4));
    LAB_CHECK(cudaMemset(m, 0, N * 4));
    LAB_CHECK(cudaMemset(v, 0, N * 4));
    lab_fill_dev((mt_bf16 *)p, N, 1, -1, 1);
    lab_fill_dev((mt_bf16 *)g, N, 2, -1, 1);
    mt_adamw_hparams h = {.lr = 3e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 1.0f, .step = 1};
    mt_adamw_dev_consts c = dev_consts(&h, 0.1f);
    float ms = lab_time_ms([&] { run_dev<uint16_t, uint16_t>(NULL, p, g, m, v, N, c); });
    double *sums, *out;
    LAB_CHECK(cudaMalloc(&sums, (N / MT_EX_SUMSQ_BLOCK + 1) * 8));
    LAB_CHECK(cudaMalloc(&out, 8));
    size_t nb = (N + MT_EX_SUMSQ_BLOCK - 1) / MT_EX_SUMSQ_BLOCK;
    float ms_sq = lab_time_ms([&] {
        mt_ex_sumsq_blocks<uint16_t><<<(unsigned)nb, MT_EX_SUMSQ_LANES>>>(sums, g, N);
        mt_ex_sumsq_total<<<1, 1>>>(out, sums, nb);
    });
    double peak = lab_peak_gbps();
    printf("adamw paper, %zu elements: %.3f ms, %.0f GB/s (peak %.0f), %.2e params/s\n", N, ms, 22.0 * N / ms / 1e6,
           peak, N / (ms * 1e-3));
    printf("sumsq bf16, %zu elements: %.3f ms, %.0f GB/s\n", N, ms_sq, 2.0 * N / ms_sq / 1e6);
    printf("%s\n", lab_failures ? "FAIL" : "PASS");
    return lab_failures ? 1 : 0;
}
