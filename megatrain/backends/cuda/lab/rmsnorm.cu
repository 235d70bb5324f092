// rmsnorm.cu: RMSNorm forward lab (f32). v1 = one thread per row (first version);
// v2 = one warp per row, scalar accesses (the backend's until issue 16); v3 = the
// backend's rmsnorm_fwd_kernel (../norm_kernels.cuh): one warp per row, 16-byte
// accesses. CPU check, then CUDA-event timing and effective bandwidth. Then the
// backward (dinp and dw; see "backward" below), checked and timed the same way.
// The fused residual forms are in add_rmsnorm.cu. usage: ./rmsnorm [R D]
#include "lab_common.h"
#include "lab_device.h"
#include "../norm_kernels.cuh"

__global__ void rmsnorm_v1(float *out, float *rstd, const float *inp, const float *w, int R, int D, float eps) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= R) return;
    const float *x = inp + (size_t)r * D;
    float ss = 0.f;
    for (int i = 0; i < D; i++) ss += x[i] * x[i];
    float rs = rsqrtf(ss / D + eps);
    for (int i = 0; i < D; i++) out[(size_t)r * D + i] = x[i] * rs * w[i];
    rstd[r] = rs;
}

__global__ void rmsnorm_v2(float *out, float *rstd, const float *inp, const float *w, int R, int D, float eps) {
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= R) return;
    const float *x = inp + (size_t)r * D;
    float ss = 0.f;
    for (int i = lane; i < D; i += 32) ss += x[i] * x[i];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    float rs = rsqrtf(ss / D + eps);
    for (int i = lane; i < D; i += 32) out[(size_t)r * D + i] = x[i] * rs * w[i];
    if (lane == 0) rstd[r] = rs;
}

// ======================= backward =======================
// dinp = rstd * (dy*w) - x * rstd^3 * mean(dy*w*x);  dw = sum over rows of dy * x * rstd
// (overwritten). Versions, checked against a double CPU reference, A = W = f32 and bf16:
//   v1  dx: one thread per row; dw: one thread per column, rows in order (deterministic)
//   v2  dx one warp per row, scalar accesses; dw as row-chunk partials (block 32x8,
//       fixed order) then a fixed-order sum over the chunks (the backend's dw)
//   v3  the backend's (launched as cuda_norm.cu norm_bwd_group does): v2 with 16-byte
//       accesses in dx where D is a multiple of the vector
// v3 is also checked to be bitwise repeatable and bitwise the same with dinp == dout.
// GB/s counts the minimum traffic: dx reads dy, x and writes dx; dw reads dy, x again.

// ---- bwd v1 ----
template <typename A, typename W>
__global__ void rmsnorm_bwd_dx_v1(A *dinp, const A *dout, const A *inp, const W *w, const float *rstd, int R, int D) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= R) return;
    size_t base = (size_t)r * D;
    float rs = rstd[r], dot = 0.f;
    for (int i = 0; i < D; i++) dot += mt_ld(dout, base + i) * mt_ld(w, (size_t)i) * mt_ld(inp, base + i);
    float c = rs * rs * rs * dot / (float)D;
    for (int i = 0; i < D; i++)
        mt_st(dinp, base + i, rs * mt_ld(dout, base + i) * mt_ld(w, (size_t)i) - mt_ld(inp, base + i) * c);
}
template <typename A, typename W>
__global__ void rmsnorm_bwd_dw_v1(W *dw, const A *dout, const A *inp, const float *rstd, int R, int D) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= D) return;
    float s = 0.f;
    for (int r = 0; r < R; r++) s += mt_ld(dout, (size_t)r * D + c) * mt_ld(inp, (size_t)r * D + c) * rstd[r];
    mt_st(dw, (size_t)c, s);
}

// ---- bwd v2: dx one warp per row with scalar accesses (the backend's until issue 16) ----
template <typename A, typename W>
__global__ void rmsnorm_bwd_dx_v2(A *dinp, const A *dout, const A *inp, const W *w, const float *rstd, row_map m,
                                  size_t R, int D) {
    size_t r = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= R) return;
    size_t base = rm_base(m, r, D);
    float rs = rstd[rm_rstd(m, r)];
    float dot = 0.f;
    for (int i = lane; i < D; i += 32) dot += mt_ld(dout, base + i) * mt_ld(w, (size_t)i) * mt_ld(inp, base + i);
    dot = mt_warp_sum(dot);
    float c = rs * rs * rs * dot / (float)D;
    for (int i = lane; i < D; i += 32) {
        float dy = mt_ld(dout, base + i), x = mt_ld(inp, base + i);
        mt_st(dinp, base + i, rs * dy * mt_ld(w, (size_t)i) - x * c);
    }
}

// ---- bwd v2/v3 share the backend's dw reduction: row_map, rmsnorm_dw_partial_kernel,
// dw_final_kernel, NORM_WARPS, dw_chunks (../norm_kernels.cuh); v3's dx is the backend's
// rmsnorm_bwd_dx_kernel (16-byte accesses where D allows, as norm_bwd_group picks) ----

// v2: the launch sequence of norm_bwd_group for plain RMSNorm (dw first, so dinp may
// alias dout); partial holds dw_chunks(R) * D floats (the backend's scratch).
template <typename A, typename W>
static void rmsnorm_bwd_run(int ver, A *dinp, W *dw, const A *dout, const A *inp, const W *w, const float *rstd,
                            float *partial, int R, int D) {
    if (ver == 1) {
        rmsnorm_bwd_dw_v1<A, W><<<(D + 255) / 256, 256>>>(dw, dout, inp, rstd, R, D);
        rmsnorm_bwd_dx_v1<A, W><<<(R + 127) / 128, 128>>>(dinp, dout, inp, w, rstd, R, D);
        return;
    }
    row_map m = {1, 0, 1, (size_t)D};
    int nchunk = dw_chunks((size_t)R);
    size_t rpc = ((size_t)R + nchunk - 1) / nchunk;
    dim3 grid((unsigned)((D + 31) / 32), (unsigned)nchunk), block(32, 8);
    rmsnorm_dw_partial_kernel<A><<<grid, block>>>(partial, dout, inp, rstd, m, (size_t)R, D, rpc);
    dw_final_kernel<W><<<(D + 255) / 256, 256>>>(dw, partial, nchunk, D);
    size_t blocks = ((size_t)R + NORM_WARPS - 1) / NORM_WARPS;
    constexpr int V = mt_vec_of<A>();
    if (ver == 2)
        rmsnorm_bwd_dx_v2<A, W><<<(unsigned)blocks, NORM_WARPS * 32>>>(dinp, dout, inp, w, rstd, m, (size_t)R, D);
    else if (D % V == 0 && mt_cuda_aligned16(dinp, dout, inp, w))
        rmsnorm_bwd_dx_kernel<A, W, V, false>
            <<<(unsigned)blocks, NORM_WARPS * 32>>>(dinp, dout, inp, w, rstd, m, (size_t)R, D);
    else
        rmsnorm_bwd_dx_kernel<A, W, 1, false>
            <<<(unsigned)blocks, NORM_WARPS * 32>>>(dinp, dout, inp, w, rstd, m, (size_t)R, D);
}

// ---- CPU reference (double), from the same f32 rstd the kernels get ----
static void ref_rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd,
                            int R, int D) {
    double *acc = (double *)calloc((size_t)D, sizeof(double));
    for (int r = 0; r < R; r++) {
        const float *g = dy + (size_t)r * D, *xr = x + (size_t)r * D;
        double rs = rstd[r], dot = 0;
        for (int i = 0; i < D; i++) dot += (double)g[i] * w[i] * xr[i];
        double c = rs * rs * rs * dot / D;
        for (int i = 0; i < D; i++) {
            dx[(size_t)r * D + i] = (float)(rs * g[i] * w[i] - xr[i] * c);
            acc[i] += (double)g[i] * xr[i] * rs;
        }
    }
    for (int i = 0; i < D; i++) dw[i] = (float)acc[i];
    free(acc);
}

template <typename A, typename W>
static void bwd_check_dtype(const char *dn, const float *x, const float *dy, const float *w, const float *rstd,
                            const float *rdx, const float *rdw, int R, int D, double tol) {
    size_t n = (size_t)R * D;
    float *hx = (float *)malloc(n * 4), *hw = (float *)malloc((size_t)D * 4), *hx2 = (float *)malloc(n * 4),
          *hw2 = (float *)malloc((size_t)D * 4);
    A *dx = lab_upload<A>(x, n), *ddy = lab_upload<A>(dy, n), *din;
    W *dwt = lab_upload<W>(w, (size_t)D), *ddw;
    float *drs = lab_upload<float>(rstd, (size_t)R), *part;
    LAB_CHECK(cudaMalloc(&din, n * sizeof(A)));
    LAB_CHECK(cudaMalloc(&ddw, (size_t)D * sizeof(W)));
    LAB_CHECK(cudaMalloc(&part, (size_t)dw_chunks((size_t)R) * D * 4));
    char what[96];
    for (int ver = 1; ver <= 3; ver++) {
        LAB_CHECK(cudaMemset(din, 0xff, n * sizeof(A))); // NaN where a kernel fails to write
        LAB_CHECK(cudaMemset(ddw, 0xff, (size_t)D * sizeof(W)));
        rmsnorm_bwd_run<A, W>(ver, din, ddw, ddy, dx, dwt, drs, part, R, D);
        LAB_CHECK(cudaDeviceSynchronize());
        lab_download(hx, din, n);
        lab_download(hw, ddw, (size_t)D);
        snprintf(what, sizeof what, "bwd v%d %s R=%d D=%d dinp nmse", ver, dn, R, D);
        lab_report(what, lab_nmse(hx, rdx, n), tol);
        snprintf(what, sizeof what, "bwd v%d %s R=%d D=%d dw nmse", ver, dn, R, D);
        lab_report(what, lab_nmse(hw, rdw, (size_t)D), tol);
    }
    // v3 again, with dinp == dout (in place): the same bits as the run above
    LAB_CHECK(cudaMemcpy(din, ddy, n * sizeof(A), cudaMemcpyDeviceToDevice));
    rmsnorm_bwd_run<A, W>(3, din, ddw, din, dx, dwt, drs, part, R, D);
    LAB_CHECK(cudaDeviceSynchronize());
    lab_download(hx2, din, n);
    lab_download(hw2, ddw, (size_t)D);
    snprintf(what, sizeof what, "bwd v3 %s rerun, dinp==dout: mismatches", dn);
    lab_report(what, (double)(lab_mismatches(hx2, hx, n) + lab_mismatches(hw2, hw, (size_t)D)), 0);
    cudaFree(dx), cudaFree(ddy), cudaFree(din), cudaFree(dwt), cudaFree(ddw), cudaFree(drs), cudaFree(part);
    free(hx), free(hw), free(hx2), free(hw2);
}

static void rmsnorm_bwd_check(int R, int D) {
    size_t n = (size_t)R * D;
    float *x = (float *)malloc(n * 4), *dy = (float *)malloc(n * 4), *w = (float *)malloc((size_t)D * 4);
    float *rstd = (float *)malloc((size_t)R * 4), *rdx = (float *)malloc(n * 4), *rdw = (float *)malloc((size_t)D * 4);
    lab_fill(x, n, 11, -2, 2);
    lab_fill(dy, n, 12, -1, 1);
    lab_fill(w, (size_t)D, 13, 0.5f, 1.5f);
    lab_round_bf16(x, n); // one input set for both precisions
    lab_round_bf16(dy, n);
    lab_round_bf16(w, (size_t)D);
    for (int r = 0; r < R; r++) {
        double ss = 0;
        for (int i = 0; i < D; i++) ss += (double)x[(size_t)r * D + i] * x[(size_t)r * D + i];
        rstd[r] = (float)(1.0 / sqrt(ss / D + 1e-6));
    }
    ref_rmsnorm_bwd(rdx, rdw, dy, x, w, rstd, R, D);
    bwd_check_dtype<float, float>("f32", x, dy, w, rstd, rdx, rdw, R, D, 1e-10);
    bwd_check_dtype<mt_bf16, mt_bf16>("bf16", x, dy, w, rstd, rdx, rdw, R, D, 1e-4);
    free(x), free(dy), free(w), free(rstd), free(rdx), free(rdw);
}

template <typename A> static void rmsnorm_bwd_bench(const char *dn, int R, int D) {
    size_t n = (size_t)R * D;
    A *x, *dy, *din, *w, *dw;
    float *rs, *part;
    LAB_CHECK(cudaMalloc(&x, n * sizeof(A)));
    LAB_CHECK(cudaMalloc(&dy, n * sizeof(A)));
    LAB_CHECK(cudaMalloc(&din, n * sizeof(A)));
    LAB_CHECK(cudaMalloc(&w, (size_t)D * sizeof(A)));
    LAB_CHECK(cudaMalloc(&dw, (size_t)D * sizeof(A)));
    LAB_CHECK(cudaMalloc(&rs, (size_t)R * 4));
    LAB_CHECK(cudaMalloc(&part, (size_t)dw_chunks((size_t)R) * D * 4));
    lab_fill_dev<A>(x, n, 1, -2, 2);
    lab_fill_dev<A>(dy, n, 2, -1, 1);
    lab_fill_dev<A>(w, (size_t)D, 3, 0.5f, 1.5f);
    lab_fill_dev<float>(rs, (size_t)R, 4, 0.5f, 1.5f);
    double gb = 5.0 * n * sizeof(A) / 1e9;
    for (int ver = 1; ver <= 3; ver++) {
        float ms = lab_time_ms([&] { rmsnorm_bwd_run<A, A>(ver, din, dw, dy, x, w, rs, part, R, D); });
        printf("bwd v%d %-4s R=%d D=%d  %.3f ms  %.0f GB/s\n", ver, dn, R, D, ms, gb / ms * 1e3);
    }
    cudaFree(x), cudaFree(dy), cudaFree(din), cudaFree(w), cudaFree(dw), cudaFree(rs), cudaFree(part);
}

// The backward section: returns the number of failed checks.
static int rmsnorm_bwd_lab(int R, int D) {
    printf("# backward check\n");
    rmsnorm_bwd_check(R, D);
    rmsnorm_bwd_check(37, 1000); // D not a multiple of 32, one dw chunk
    rmsnorm_bwd_check(1001, 96); // 8 dw chunks of 126 rows, the last one 119
    printf("# backward bench\n");
    rmsnorm_bwd_bench<float>("f32", R, D);
    rmsnorm_bwd_bench<mt_bf16>("bf16", R, D);
    LAB_CHECK(cudaGetLastError());
    return lab_failures;
}

int main(int argc, char **argv) {
    int R = argc == 3 ? atoi(argv[1]) : 16384, D = argc == 3 ? atoi(argv[2]) : 4096;
    size_t n = (size_t)R * D;
    float *x = (float *)malloc(n * 4), *w = (float *)malloc(D * 4), *ref = (float *)malloc(n * 4), *got = (float *)malloc(n * 4);
    lab_fill(x, n, 1, -2, 2);
    lab_fill(w, D, 2, 0.5f, 1.5f);
    for (int r = 0; r < R; r++) {
        double ss = 0;
        for (int i = 0; i < D; i++) ss += (double)x[(size_t)r * D + i] * x[(size_t)r * D + i];
        double rs = 1.0 / sqrt(ss / D + 1e-6);
        for (int i = 0; i < D; i++) ref[(size_t)r * D + i] = (float)(x[(size_t)r * D + i] * rs * w[i]);
    }
    float *dx = lab_upload<float>(x, n), *dw = lab_upload<float>(w, D), *dout, *drs;
    LAB_CHECK(cudaMalloc(&dout, n * 4));
    LAB_CHECK(cudaMalloc(&drs, R * 4));
    int fails = 0;
    double gb = 2.0 * n * 4 / 1e9;
    row_map m = {1, 0, 1, (size_t)D};
    for (int v = 1; v <= 3; v++) {
        auto run = [&] {
            if (v == 1) rmsnorm_v1<<<(R + 127) / 128, 128>>>(dout, drs, dx, dw, R, D, 1e-6f);
            else if (v == 2) rmsnorm_v2<<<(R + 7) / 8, 256>>>(dout, drs, dx, dw, R, D, 1e-6f);
            else if (D % 4 == 0) // the backend's, as norm_fwd_group picks it for f32
                rmsnorm_fwd_kernel<float, float, 4, false><<<(R + NORM_WARPS - 1) / NORM_WARPS, NORM_WARPS * 32>>>(
                    dout, drs, NULL, dx, NULL, dw, m, (size_t)R, D, 1e-6f);
            else
                rmsnorm_fwd_kernel<float, float, 1, false><<<(R + NORM_WARPS - 1) / NORM_WARPS, NORM_WARPS * 32>>>(
                    dout, drs, NULL, dx, NULL, dw, m, (size_t)R, D, 1e-6f);
        };
        run();
        LAB_CHECK(cudaDeviceSynchronize());
        lab_download(got, dout, n);
        double e = lab_nmse(got, ref, n);
        float ms = lab_time_ms(run);
        printf("v%d  R=%d D=%d  nmse %.2e %s  %.3f ms  %.0f GB/s\n", v, R, D, e, e < 1e-10 ? "ok" : "WRONG", ms,
               gb / ms * 1e3);
        if (!(e < 1e-10)) fails++;
    }
    fails += rmsnorm_bwd_lab(R, D);
    return fails ? 1 : 0;
}
