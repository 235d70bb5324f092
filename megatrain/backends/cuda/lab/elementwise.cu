// elementwise.cu: the residual add and the dtype cast (backend.h add, cast), the
// backend's one-dimensional kernels (../elementwise_kernels.cuh). Versions:
//   v1  one element a thread, grid-stride (add_kernel / convert_kernel with V = 1: the
//       backend's until issue 16, and its fallback for unaligned buffers)
//   v2  16-byte accesses, V elements a thread, the n % V tail element by element (V = 8
//       bf16 or 4 f32 for add; 8 of each for the cast)
// Checks: bitwise against the CPU (one f32 add, or one rounding, per element) on lengths
// with and without a tail. Timing: median ms, GB/s of the minimum traffic (add: read 2n,
// write n elements; cast: read n of one type, write n of the other) and its share of
// the device's peak DRAM bandwidth (lab_peak_gbps).
// usage: ./elementwise [n]   (benchmark length; default 16384 * 3584, a 7B-width activation)
#include "lab_common.h"
#include "lab_device.h"
#include "../elementwise_kernels.cuh"

template <typename A> static void run_add(int ver, A *out, const A *a, const A *b, size_t n) {
    constexpr int V = mt_vec_of<A>();
    if (ver == 1) add_kernel<A, 1><<<mt_cuda_blocks(n, 256), 256>>>(out, a, b, 0, n);
    else add_kernel<A, V><<<mt_cuda_blocks(n / V > 0 ? n / V : 1, 256), 256>>>(out, a, b, n / V, n);
}
template <typename D, typename S> static void run_cast(int ver, D *dst, const S *src, size_t n) {
    if (ver == 1) convert_kernel<D, S, 1><<<mt_cuda_blocks(n, 256), 256>>>(dst, src, 0, n);
    else convert_kernel<D, S, 8><<<mt_cuda_blocks(n / 8 > 0 ? n / 8 : 1, 256), 256>>>(dst, src, n / 8, n);
}

template <typename A> static void check_add(const char *dn, size_t n) {
    float *a = (float *)malloc(n * 4), *b = (float *)malloc(n * 4), *ref = (float *)malloc(n * 4), *got = (float *)malloc(n * 4);
    lab_fill(a, n, 31, -2, 2), lab_fill(b, n, 32, -2, 2);
    lab_round_bf16(a, n), lab_round_bf16(b, n);
    const bool bf16 = sizeof(A) == 2;
    for (size_t i = 0; i < n; i++) ref[i] = bf16 ? __bfloat162float(__float2bfloat16_rn(a[i] + b[i])) : a[i] + b[i];
    A *da = lab_upload<A>(a, n), *db = lab_upload<A>(b, n), *dout;
    LAB_CHECK(cudaMalloc(&dout, n * sizeof(A)));
    char what[96];
    for (int ver = 1; ver <= 2; ver++) {
        LAB_CHECK(cudaMemset(dout, 0xff, n * sizeof(A)));
        run_add<A>(ver, dout, da, db, n);
        LAB_CHECK(cudaDeviceSynchronize());
        lab_download(got, dout, n);
        snprintf(what, sizeof what, "add v%d %s n=%zu mismatches", ver, dn, n);
        lab_report(what, (double)lab_mismatches(got, ref, n), 0);
    }
    cudaFree(da), cudaFree(db), cudaFree(dout);
    free(a), free(b), free(ref), free(got);
}

static void check_cast(size_t n) {
    float *x = (float *)malloc(n * 4), *ref = (float *)malloc(n * 4), *got = (float *)malloc(n * 4);
    lab_fill(x, n, 33, -3, 3);
    for (size_t i = 0; i < n; i++) ref[i] = __bfloat162float(__float2bfloat16_rn(x[i]));
    float *dx = lab_upload<float>(x, n), *back;
    mt_bf16 *mid;
    LAB_CHECK(cudaMalloc(&mid, n * 2));
    LAB_CHECK(cudaMalloc(&back, n * 4));
    char what[96];
    for (int ver = 1; ver <= 2; ver++) {
        LAB_CHECK(cudaMemset(back, 0xff, n * 4));
        run_cast<mt_bf16, float>(ver, mid, dx, n);
        run_cast<float, mt_bf16>(ver, back, mid, n);
        LAB_CHECK(cudaDeviceSynchronize());
        lab_download(got, back, n);
        snprintf(what, sizeof what, "cast v%d f32->bf16->f32 n=%zu mismatches", ver, n);
        lab_report(what, (double)lab_mismatches(got, ref, n), 0);
    }
    cudaFree(dx), cudaFree(mid), cudaFree(back);
    free(x), free(ref), free(got);
}

static void pr(const char *what, int ver, float ms, double gb, double peak) {
    printf("  %-22s v%d  %8.3f ms  %7.1f GB/s  %5.1f%% of peak\n", what, ver, ms, gb / ms * 1e3,
           peak > 0 ? 100.0 * gb / ms * 1e3 / peak : 0.0);
}

int main(int argc, char **argv) {
    size_t n = argc == 2 ? (size_t)atoll(argv[1]) : (size_t)16384 * 3584;
    if (argc > 2 || n == 0) {
        fprintf(stderr, "usage: ./elementwise [n]   (benchmark length, default 16384*3584)\n");
        return 2;
    }
    printf("# check\n");
    for (size_t len : {(size_t)1, (size_t)7, (size_t)4096, (size_t)100003}) {
        check_add<float>("f32", len);
        check_add<mt_bf16>("bf16", len);
        check_cast(len);
    }
    double peak = lab_peak_gbps();
    printf("# bench n=%zu (peak DRAM bandwidth %.0f GB/s from the device's memory clock and bus width)\n", n, peak);
    float *f0, *f1, *f2;
    mt_bf16 *h0, *h1, *h2;
    LAB_CHECK(cudaMalloc(&f0, n * 4));
    LAB_CHECK(cudaMalloc(&f1, n * 4));
    LAB_CHECK(cudaMalloc(&f2, n * 4));
    LAB_CHECK(cudaMalloc(&h0, n * 2));
    LAB_CHECK(cudaMalloc(&h1, n * 2));
    LAB_CHECK(cudaMalloc(&h2, n * 2));
    lab_fill_dev<float>(f0, n, 1, -1, 1), lab_fill_dev<float>(f1, n, 2, -1, 1);
    lab_fill_dev<mt_bf16>(h0, n, 3, -1, 1), lab_fill_dev<mt_bf16>(h1, n, 4, -1, 1);
    for (int ver = 1; ver <= 2; ver++) {
        pr("add f32", ver, lab_time_ms([&] { run_add<float>(ver, f2, f0, f1, n); }), 12.0 * n / 1e9, peak);
        pr("add bf16", ver, lab_time_ms([&] { run_add<mt_bf16>(ver, h2, h0, h1, n); }), 6.0 * n / 1e9, peak);
        pr("cast f32->bf16", ver, lab_time_ms([&] { run_cast<mt_bf16, float>(ver, h2, f0, n); }), 6.0 * n / 1e9, peak);
        pr("cast bf16->f32", ver, lab_time_ms([&] { run_cast<float, mt_bf16>(ver, f2, h0, n); }), 6.0 * n / 1e9, peak);
    }
    cudaFree(f0), cudaFree(f1), cudaFree(f2), cudaFree(h0), cudaFree(h1), cudaFree(h2);
    LAB_CHECK(cudaGetLastError());
    printf("# %s\n", lab_failures ? "SOME CHECKS FAILED" : "all checks PASS");
    return lab_failures ? 1 : 0;
}
