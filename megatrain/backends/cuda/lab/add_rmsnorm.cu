// add_rmsnorm.cu: the residual add fused with RMSNorm (backend.h add_rmsnorm_fwd and
// rmsnorm_bwd_add, what engine/layer.c runs around each norm), activations and weights
// both f32 or both bf16:
//   fwd: sum = a + b (stored); out = sum / sqrt(mean(sum^2) + eps) * w; rstd saved
//   bwd: dacc += rstd (dy w) - sum rstd^3 mean(dy w sum)   (dw: as rmsnorm_bwd, see rmsnorm.cu)
// Versions, each checked against a double-precision CPU reference:
//   v1  unfused, scalar: add then rmsnorm / rmsnorm dx into a temporary then add (the
//       backend's kernel shapes until issue 16: add_kernel and the norm kernels with V = 1)
//   v2  unfused, the same two kernels with 16-byte accesses
//   v3  fused: one kernel each way (the backend's rmsnorm_fwd_kernel<A, W, V, RES = true>,
//       rmsnorm_bwd_dx_kernel<A, W, V, ACC = true> from ../norm_kernels.cuh)
// v2 and v3 take the 16-byte instantiation where D is a multiple of the vector and the
// buffers are aligned, as cuda_norm.cu does. Timing: median ms; GB/s counts the fused op's
// minimum traffic (fwd reads a, b and writes sum, out: 4 R D elements; bwd reads dy, x,
// dacc and writes dacc: 4 R D), the same count for every version, and its share of the
// device's peak DRAM bandwidth (lab_peak_gbps).
// usage: ./add_rmsnorm [R D]   (benchmark shape; default 16384 3584: Qwen2.5-7B's width)
#include "lab_common.h"
#include "lab_device.h"
#include "../elementwise_kernels.cuh"
#include "../norm_kernels.cuh"

static const float EPS = 1e-6f;

template <typename A> static bool vec_ok(int D, const void *a, const void *b, const void *c, const void *d) {
    return D % mt_vec_of<A>() == 0 && mt_cuda_aligned16(a, b, c, d);
}

// fwd: sum (may alias a), out, rstd from a, b, w.
template <typename A, int V>
static void fwd_unfused(A *sum, A *out, float *rstd, const A *a, const A *b, const A *w, int R, int D) {
    size_t n = (size_t)R * D, nv = V > 1 ? n / V : 0;
    add_kernel<A, V><<<mt_cuda_blocks(V > 1 ? nv : n, 256), 256>>>(sum, a, b, nv, n);
    row_map m = {1, 0, 1, (size_t)D};
    rmsnorm_fwd_kernel<A, A, V, false><<<(R + NORM_WARPS - 1) / NORM_WARPS, NORM_WARPS * 32>>>(
        out, rstd, NULL, sum, NULL, w, m, (size_t)R, D, EPS);
}

template <typename A>
static void run_fwd(int ver, A *sum, A *out, float *rstd, const A *a, const A *b, const A *w, int R, int D) {
    constexpr int V = mt_vec_of<A>();
    const bool vec = vec_ok<A>(D, sum, out, a, b) && mt_cuda_aligned16(w);
    if (ver == 1 || (ver == 2 && !vec)) {
        fwd_unfused<A, 1>(sum, out, rstd, a, b, w, R, D);
    } else if (ver == 2) {
        fwd_unfused<A, V>(sum, out, rstd, a, b, w, R, D);
    } else {
        row_map m = {1, 0, 1, (size_t)D};
        unsigned blocks = (unsigned)((R + NORM_WARPS - 1) / NORM_WARPS);
        if (vec)
            rmsnorm_fwd_kernel<A, A, V, true><<<blocks, NORM_WARPS * 32>>>(out, rstd, sum, a, b, w, m, (size_t)R, D, EPS);
        else
            rmsnorm_fwd_kernel<A, A, 1, true><<<blocks, NORM_WARPS * 32>>>(out, rstd, sum, a, b, w, m, (size_t)R, D, EPS);
    }
}

// bwd: dacc += dx(dy, x, w, rstd); tmp is the unfused versions' dx buffer.
template <typename A>
static void run_bwd(int ver, A *dacc, A *tmp, const A *dy, const A *x, const A *w, const float *rstd, int R, int D) {
    constexpr int V = mt_vec_of<A>();
    const bool vec = vec_ok<A>(D, dacc, tmp, dy, x) && mt_cuda_aligned16(w);
    row_map m = {1, 0, 1, (size_t)D};
    unsigned blocks = (unsigned)((R + NORM_WARPS - 1) / NORM_WARPS);
    size_t n = (size_t)R * D;
    if (ver == 1 || (ver == 2 && !vec)) {
        rmsnorm_bwd_dx_kernel<A, A, 1, false><<<blocks, NORM_WARPS * 32>>>(tmp, dy, x, w, rstd, m, (size_t)R, D);
        add_kernel<A, 1><<<mt_cuda_blocks(n, 256), 256>>>(dacc, dacc, tmp, 0, n);
    } else if (ver == 2) {
        rmsnorm_bwd_dx_kernel<A, A, V, false><<<blocks, NORM_WARPS * 32>>>(tmp, dy, x, w, rstd, m, (size_t)R, D);
        add_kernel<A, V><<<mt_cuda_blocks(n / V, 256), 256>>>(dacc, dacc, tmp, n / V, n);
    } else if (vec) {
        rmsnorm_bwd_dx_kernel<A, A, V, true><<<blocks, NORM_WARPS * 32>>>(dacc, dy, x, w, rstd, m, (size_t)R, D);
    } else {
        rmsnorm_bwd_dx_kernel<A, A, 1, true><<<blocks, NORM_WARPS * 32>>>(dacc, dy, x, w, rstd, m, (size_t)R, D);
    }
}

// ---- CPU reference (double) on the values the GPU sees: sum rounded to A first ----
static void ref_fwd(float *sum, float *out, float *rstd, const float *a, const float *b, const float *w, int R, int D,
                    bool bf16) {
    for (int r = 0; r < R; r++) {
        size_t o = (size_t)r * D;
        double ss = 0;
        for (int i = 0; i < D; i++) {
            float s = a[o + i] + b[o + i];
            sum[o + i] = bf16 ? __bfloat162float(__float2bfloat16_rn(s)) : s;
            ss += (double)sum[o + i] * sum[o + i];
        }
        double rs = 1.0 / sqrt(ss / D + EPS);
        for (int i = 0; i < D; i++) out[o + i] = (float)(sum[o + i] * rs * w[i]);
        rstd[r] = (float)rs;
    }
}
static void ref_bwd(float *dacc, const float *dy, const float *x, const float *w, const float *rstd, int R, int D) {
    for (int r = 0; r < R; r++) {
        size_t o = (size_t)r * D;
        double rs = rstd[r], dot = 0;
        for (int i = 0; i < D; i++) dot += (double)dy[o + i] * w[i] * x[o + i];
        double c = rs * rs * rs * dot / D;
        for (int i = 0; i < D; i++) dacc[o + i] = (float)(dacc[o + i] + rs * dy[o + i] * w[i] - x[o + i] * c);
    }
}

template <typename A> static void check_dtype(const char *dn, int R, int D, double tol) {
    size_t n = (size_t)R * D;
    const bool bf16 = sizeof(A) == 2;
    float *a = (float *)malloc(n * 4), *b = (float *)malloc(n * 4), *w = (float *)malloc((size_t)D * 4);
    float *dy = (float *)malloc(n * 4), *acc = (float *)malloc(n * 4), *rsum = (float *)malloc(n * 4);
    float *rout = (float *)malloc(n * 4), *rrs = (float *)malloc((size_t)R * 4), *racc = (float *)malloc(n * 4);
    float *got = (float *)malloc(n * 4), *grs = (float *)malloc((size_t)R * 4);
    lab_fill(a, n, 21, -2, 2), lab_fill(b, n, 22, -2, 2), lab_fill(w, (size_t)D, 23, 0.5f, 1.5f);
    lab_fill(dy, n, 24, -1, 1), lab_fill(acc, n, 25, -1, 1);
    lab_round_bf16(a, n), lab_round_bf16(b, n), lab_round_bf16(w, (size_t)D), lab_round_bf16(dy, n);
    lab_round_bf16(acc, n); // one input set for both precisions
    ref_fwd(rsum, rout, rrs, a, b, w, R, D, bf16);
    memcpy(racc, acc, n * 4);
    ref_bwd(racc, dy, rsum, w, rrs, R, D);
    A *da = lab_upload<A>(a, n), *db = lab_upload<A>(b, n), *dw = lab_upload<A>(w, (size_t)D), *ddy = lab_upload<A>(dy, n);
    A *dsum, *dout, *dacc, *dtmp;
    float *drs, *drs_ref = lab_upload<float>(rrs, (size_t)R);
    LAB_CHECK(cudaMalloc(&dsum, n * sizeof(A)));
    LAB_CHECK(cudaMalloc(&dout, n * sizeof(A)));
    LAB_CHECK(cudaMalloc(&dtmp, n * sizeof(A)));
    LAB_CHECK(cudaMalloc(&drs, (size_t)R * 4));
    A *dx = lab_upload<A>(rsum, n); // the backward's input: the reference sum (A-representable)
    char what[96];
    for (int ver = 1; ver <= 3; ver++) {
        LAB_CHECK(cudaMemcpy(dsum, da, n * sizeof(A), cudaMemcpyDeviceToDevice)); // sum aliases a, as layer.c
        LAB_CHECK(cudaMemset(dout, 0xff, n * sizeof(A)));                       // NaN where nothing is written
        run_fwd<A>(ver, dsum, dout, drs, dsum, db, dw, R, D);
        LAB_CHECK(cudaDeviceSynchronize());
        lab_download(got, dsum, n);
        snprintf(what, sizeof what, "fwd v%d %s R=%d D=%d sum nmse", ver, dn, R, D);
        lab_report(what, lab_nmse(got, rsum, n), bf16 ? 1e-5 : 1e-14);
        lab_download(got, dout, n);
        snprintf(what, sizeof what, "fwd v%d %s R=%d D=%d out nmse", ver, dn, R, D);
        lab_report(what, lab_nmse(got, rout, n), tol);
        lab_download(grs, drs, (size_t)R);
        snprintf(what, sizeof what, "fwd v%d %s R=%d D=%d rstd nmse", ver, dn, R, D);
        lab_report(what, lab_nmse(grs, rrs, (size_t)R), 1e-10);
        dacc = lab_upload<A>(acc, n);
        run_bwd<A>(ver, dacc, dtmp, ddy, dx, dw, drs_ref, R, D);
        LAB_CHECK(cudaDeviceSynchronize());
        lab_download(got, dacc, n);
        snprintf(what, sizeof what, "bwd v%d %s R=%d D=%d dacc nmse", ver, dn, R, D);
        lab_report(what, lab_nmse(got, racc, n), tol);
        cudaFree(dacc);
    }
    cudaFree(da), cudaFree(db), cudaFree(dw), cudaFree(ddy), cudaFree(dsum), cudaFree(dout), cudaFree(dtmp);
    cudaFree(drs), cudaFree(drs_ref), cudaFree(dx);
    free(a), free(b), free(w), free(dy), free(acc), free(rsum), free(rout), free(rrs), free(racc), free(got), free(grs);
}

template <typename A> static void bench_dtype(const char *dn, int R, int D, double peak) {
    size_t n = (size_t)R * D;
    A *a, *b, *w, *sum, *out, *dy, *acc, *tmp;
    float *rs;
    A **bufs[] = {&a, &b, &sum, &out, &dy, &acc, &tmp};
    for (A **p : bufs) LAB_CHECK(cudaMalloc(p, n * sizeof(A)));
    LAB_CHECK(cudaMalloc(&w, (size_t)D * sizeof(A)));
    LAB_CHECK(cudaMalloc(&rs, (size_t)R * 4));
    lab_fill_dev<A>(a, n, 1, -2, 2), lab_fill_dev<A>(b, n, 2, -2, 2), lab_fill_dev<A>(w, (size_t)D, 3, 0.5f, 1.5f);
    lab_fill_dev<A>(dy, n, 4, -1, 1), lab_fill_dev<A>(acc, n, 5, -1, 1), lab_fill_dev<float>(rs, (size_t)R, 6, 0.5f, 1.5f);
    double gb = 4.0 * n * sizeof(A) / 1e9;
    for (int ver = 1; ver <= 3; ver++) {
        float ms = lab_time_ms([&] { run_fwd<A>(ver, sum, out, rs, a, b, w, R, D); });
        printf("  fwd v%d %-4s R=%d D=%d  %8.3f ms  %7.1f GB/s  %5.1f%% of peak\n", ver, dn, R, D, ms, gb / ms * 1e3,
               peak > 0 ? 100.0 * gb / ms * 1e3 / peak : 0.0);
        ms = lab_time_ms([&] { run_bwd<A>(ver, acc, tmp, dy, sum, w, rs, R, D); });
        printf("  bwd v%d %-4s R=%d D=%d  %8.3f ms  %7.1f GB/s  %5.1f%% of peak\n", ver, dn, R, D, ms, gb / ms * 1e3,
               peak > 0 ? 100.0 * gb / ms * 1e3 / peak : 0.0);
    }
    for (A **p : bufs) cudaFree(*p);
    cudaFree(w), cudaFree(rs);
}

int main(int argc, char **argv) {
    int R = argc == 3 ? atoi(argv[1]) : 16384, D = argc == 3 ? atoi(argv[2]) : 3584;
    if ((argc != 1 && argc != 3) || R <= 0 || D <= 0) {
        fprintf(stderr, "usage: ./add_rmsnorm [R D]   (benchmark shape, default 16384 3584)\n");
        return 2;
    }
    printf("# check\n");
    check_dtype<float>("f32", 37, 3584, 1e-10);
    check_dtype<mt_bf16>("bf16", 37, 3584, 1e-4);
    check_dtype<float>("f32", 19, 100, 1e-10);   // f32: D % 4 == 0, 16-byte rows
    check_dtype<mt_bf16>("bf16", 19, 100, 1e-4); // bf16: D % 8 != 0, scalar rows
    double peak = lab_peak_gbps();
    printf("# bench R=%d D=%d (peak DRAM bandwidth %.0f GB/s from the device's memory clock and bus width)\n", R, D,
           peak);
    bench_dtype<float>("f32", R, D, peak);
    bench_dtype<mt_bf16>("bf16", R, D, peak);
    LAB_CHECK(cudaGetLastError());
    printf("# %s\n", lab_failures ? "SOME CHECKS FAILED" : "all checks PASS");
    return lab_failures ? 1 : 0;
}
