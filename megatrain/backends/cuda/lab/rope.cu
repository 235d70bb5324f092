// rope.cu: HF rotate-half RoPE lab on packed qkv rows (B,T,(NH+2*NKV)*HD): the q and
// k heads rotate, element i pairing with i + HD/2, v is copied (backend.h rope_fwd/bwd):
//   fwd: y1 = x1 cos - x2 sin, y2 = x2 cos + x1 sin
//   bwd: dx1 = dy1 cos + dy2 sin, dx2 = dy2 cos - dy1 sin   (the inverse rotation)
// Out of place and in place (out == inp, what the engine uses). Versions, each checked
// against a double-precision CPU reference, f32 and bf16:
//   v1  one thread per (token, head): loops over the pairs of its head, copies a v head
//   v2  one thread per (token, head, pair), grid-stride with four 64-bit divisions per
//       pair, plus a v-copy kernel when out != inp (the backend's until issue 16)
//   v3  the backend's (rope_kernel from ../rope_kernels.cuh, copy_rows_part_kernel from
//       ../cuda_device.cuh, launched as cuda_rope.cu rope() launches them): tokens on the
//       grid, heads x groups of 16-byte vectors in the block, no index division
// Then CUDA-event timing; GB/s counts one read and one write of what each case touches
// (all heads out of place, q and k heads in place; the cos/sin tables are not counted).
// usage: ./rope [B T NH NKV HD]   (benchmark shape; default 1 4096 28 4 128, Qwen2.5-7B)
#include "lab_common.h"
#include "lab_device.h"
#include "../rope_kernels.cuh"

// ---- v1: one thread per (token, head) ----
template <typename A, int DIR>
__global__ void rope_v1(A *out, const A *inp, const float *cos_t, const float *sin_t, int BT, int T, int NH, int NKV,
                        int HD) {
    int QKV = NH + 2 * NKV, half = HD / 2;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= BT * QKV) return;
    int tok = idx / QKV, h = idx % QKV, t = tok % T;
    size_t o = (size_t)tok * QKV * HD + (size_t)h * HD;
    if (h >= NH + NKV) { // a v head
        if (out != inp)
            for (int d = 0; d < HD; d++) out[o + d] = inp[o + d];
        return;
    }
    float sg = DIR == 0 ? 1.f : -1.f;
    for (int p = 0; p < half; p++) {
        float c = cos_t[(size_t)t * half + p], s = sg * sin_t[(size_t)t * half + p];
        float x1 = mt_ld(inp, o + p), x2 = mt_ld(inp, o + p + half);
        mt_st(out, o + p, x1 * c - x2 * s);
        mt_st(out, o + p + half, x2 * c + x1 * s);
    }
}

// ---- v2: one thread per (token, head, pair) (the backend's until issue 16) ----
template <typename A, int DIR>
__global__ void rope_v2(A *out, const A *inp, const float *cos_t, const float *sin_t, size_t BT, int T, int NQK, int HD,
                        size_t stride) {
    int half = HD / 2;
    size_t total = BT * (size_t)NQK * half;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int p = (int)(i % (size_t)half);
        size_t th = i / (size_t)half;
        int hh = (int)(th % (size_t)NQK);
        size_t tok = th / (size_t)NQK;
        int t = (int)(tok % (size_t)T);
        size_t o = tok * stride + (size_t)hh * HD + p;
        float c = cos_t[(size_t)t * half + p], s = sin_t[(size_t)t * half + p];
        float x1 = mt_ld(inp, o), x2 = mt_ld(inp, o + half);
        if (DIR == 0) {
            mt_st(out, o, x1 * c - x2 * s);
            mt_st(out, o + half, x2 * c + x1 * s);
        } else {
            mt_st(out, o, x1 * c + x2 * s);
            mt_st(out, o + half, x2 * c - x1 * s);
        }
    }
}
template <typename A> __global__ void rope_copy_v_v2(A *dst, const A *src, size_t BT, int off, int per, size_t stride) {
    size_t total = BT * (size_t)per;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t j = (i / per) * stride + off + i % per;
        dst[j] = src[j];
    }
}

// ---- v3: the backend's kernels (../rope_kernels.cuh, ../cuda_device.cuh) ----

typedef struct {
    int B, T, NH, NKV, HD;
} rope_shape;

// The launches of v1, v2, and (v3) the host side of cuda_rope.cu rope<DIR>().
template <typename A, int DIR>
static void run_rope(int ver, A *out, const A *inp, const float *cos_t, const float *sin_t, rope_shape sh) {
    size_t BT = (size_t)sh.B * sh.T, stride = (size_t)(sh.NH + 2 * sh.NKV) * sh.HD;
    int NQK = sh.NH + sh.NKV;
    if (ver == 1) {
        int items = (int)BT * (sh.NH + 2 * sh.NKV);
        rope_v1<A, DIR><<<(items + 127) / 128, 128>>>(out, inp, cos_t, sin_t, (int)BT, sh.T, sh.NH, sh.NKV, sh.HD);
        return;
    }
    if (ver == 2) {
        size_t total = BT * NQK * (sh.HD / 2);
        rope_v2<A, DIR><<<mt_cuda_blocks(total, 256), 256>>>(out, inp, cos_t, sin_t, BT, sh.T, NQK, sh.HD, stride);
        if (out != inp) {
            size_t tv = BT * sh.NKV * sh.HD;
            rope_copy_v_v2<A><<<mt_cuda_blocks(tv, 256), 256>>>(out, inp, BT, NQK * sh.HD, sh.NKV * sh.HD, stride);
        }
        return;
    }
    constexpr int V = mt_vec_of<A>();
    const int half = sh.HD / 2;
    dim3 grid = rope_grid(sh.B, sh.T);
    const int vec = half % V == 0 && mt_cuda_aligned16(out, inp, cos_t, sin_t);
    if (vec)
        rope_kernel<A, DIR, V><<<grid, rope_block(half / V)>>>(out, inp, cos_t, sin_t, sh.B, sh.T, NQK, half, half / V,
                                                              stride);
    else
        rope_kernel<A, DIR, 1><<<grid, rope_block(half)>>>(out, inp, cos_t, sin_t, sh.B, sh.T, NQK, half, half, stride);
    if (out != inp) {
        const int per = sh.NKV * sh.HD, N = (int)BT;
        const size_t off = (size_t)NQK * sh.HD;
        if (sh.HD % V == 0 && mt_cuda_aligned16(out, inp))
            copy_rows_part_kernel<A, V><<<mt_cuda_rows_grid(N, per / V, 256), 256>>>(out, inp, N, stride, off, per / V);
        else
            copy_rows_part_kernel<A, 1><<<mt_cuda_rows_grid(N, per, 256), 256>>>(out, inp, N, stride, off, per);
    }
}

// cos/sin (T, HD/2) for theta = 1e6 (Qwen2), built in double and stored f32 as the engine does.
static void make_tables(float *cos_t, float *sin_t, int T, int HD) {
    int half = HD / 2;
    for (int t = 0; t < T; t++)
        for (int p = 0; p < half; p++) {
            double a = t * pow(1e6, -2.0 * p / HD);
            cos_t[(size_t)t * half + p] = (float)cos(a);
            sin_t[(size_t)t * half + p] = (float)sin(a);
        }
}

// ---- CPU reference (double): dir 0 forward, 1 backward; v heads copied ----
static void ref_rope(float *out, const float *inp, const float *cos_t, const float *sin_t, rope_shape sh, int dir) {
    int QKV = sh.NH + 2 * sh.NKV, NQK = sh.NH + sh.NKV, half = sh.HD / 2;
    size_t rs = (size_t)QKV * sh.HD;
    double sg = dir == 0 ? 1.0 : -1.0;
    for (size_t bt = 0; bt < (size_t)sh.B * sh.T; bt++) {
        int t = (int)(bt % sh.T);
        const float *x = inp + bt * rs;
        float *o = out + bt * rs;
        for (int h = 0; h < NQK; h++)
            for (int p = 0; p < half; p++) {
                size_t i = (size_t)h * sh.HD + p;
                double c = cos_t[(size_t)t * half + p], s = sg * sin_t[(size_t)t * half + p];
                o[i] = (float)(x[i] * c - x[i + half] * s);
                o[i + half] = (float)(x[i + half] * c + x[i] * s);
            }
        for (size_t i = (size_t)NQK * sh.HD; i < rs; i++) o[i] = x[i];
    }
}

// Bitwise mismatches in the v heads of got against the input.
static size_t v_mismatches(const float *got, const float *inp, rope_shape sh) {
    size_t rs = (size_t)(sh.NH + 2 * sh.NKV) * sh.HD, off = (size_t)(sh.NH + sh.NKV) * sh.HD, bad = 0;
    for (size_t bt = 0; bt < (size_t)sh.B * sh.T; bt++)
        bad += lab_mismatches(got + bt * rs + off, inp + bt * rs + off, rs - off);
    return bad;
}

template <typename A>
static void check_dtype(const char *dn, const float *x, const float *ref[2], const float *dcos, const float *dsin,
                        rope_shape sh, double tol) {
    size_t n = (size_t)sh.B * sh.T * (sh.NH + 2 * sh.NKV) * sh.HD;
    float *h = (float *)malloc(n * 4);
    A *din = lab_upload<A>(x, n), *dout;
    LAB_CHECK(cudaMalloc(&dout, n * sizeof(A)));
    for (int ver = 1; ver <= 3; ver++)
        for (int dir = 0; dir < 2; dir++)
            for (int inplace = 0; inplace < 2; inplace++) {
                A *o = dout;
                if (inplace) LAB_CHECK(cudaMemcpy(dout, din, n * sizeof(A), cudaMemcpyDeviceToDevice));
                else LAB_CHECK(cudaMemset(dout, 0xff, n * sizeof(A))); // NaN: the v copy must overwrite it
                const A *i = inplace ? dout : din;
                if (dir == 0) run_rope<A, 0>(ver, o, i, dcos, dsin, sh);
                else run_rope<A, 1>(ver, o, i, dcos, dsin, sh);
                LAB_CHECK(cudaDeviceSynchronize());
                lab_download(h, o, n);
                char what[96];
                snprintf(what, sizeof what, "v%d %s %s %s nmse", ver, dn, dir ? "bwd" : "fwd",
                         inplace ? "in-place" : "out-of-place");
                lab_report(what, lab_nmse(h, ref[dir], n), tol);
                snprintf(what, sizeof what, "v%d %s %s %s v heads exact (mismatches)", ver, dn, dir ? "bwd" : "fwd",
                         inplace ? "in-place" : "out-of-place");
                lab_report(what, (double)v_mismatches(h, x, sh), 0);
            }
    // bwd(fwd(x)) == x up to rounding: the rotation is orthogonal (v2, in place, as the engine runs it)
    LAB_CHECK(cudaMemcpy(dout, din, n * sizeof(A), cudaMemcpyDeviceToDevice));
    run_rope<A, 0>(2, dout, dout, dcos, dsin, sh);
    run_rope<A, 1>(2, dout, dout, dcos, dsin, sh);
    LAB_CHECK(cudaDeviceSynchronize());
    lab_download(h, dout, n);
    char what[96];
    snprintf(what, sizeof what, "v2 %s bwd(fwd(x)) vs x nmse", dn);
    lab_report(what, lab_nmse(h, x, n), 2 * tol);
    cudaFree(din), cudaFree(dout);
    free(h);
}

static void check(rope_shape sh) {
    printf("# check B=%d T=%d NH=%d NKV=%d HD=%d\n", sh.B, sh.T, sh.NH, sh.NKV, sh.HD);
    size_t n = (size_t)sh.B * sh.T * (sh.NH + 2 * sh.NKV) * sh.HD, nt = (size_t)sh.T * (sh.HD / 2);
    float *x = (float *)malloc(n * 4), *rf = (float *)malloc(n * 4), *rb = (float *)malloc(n * 4);
    float *ct = (float *)malloc(nt * 4), *st = (float *)malloc(nt * 4);
    lab_fill(x, n, 1, -2, 2);
    lab_round_bf16(x, n); // one input set for both precisions
    make_tables(ct, st, sh.T, sh.HD);
    ref_rope(rf, x, ct, st, sh, 0);
    ref_rope(rb, x, ct, st, sh, 1);
    const float *ref[2] = {rf, rb};
    float *dcos = lab_upload<float>(ct, nt), *dsin = lab_upload<float>(st, nt);
    check_dtype<float>("f32", x, ref, dcos, dsin, sh, 1e-11);
    check_dtype<mt_bf16>("bf16", x, ref, dcos, dsin, sh, 1e-4);
    cudaFree(dcos), cudaFree(dsin);
    free(x), free(rf), free(rb), free(ct), free(st);
}

template <typename A> static void bench_dtype(const char *dn, rope_shape sh, const float *dcos, const float *dsin) {
    int QKV = sh.NH + 2 * sh.NKV, NQK = sh.NH + sh.NKV;
    size_t BT = (size_t)sh.B * sh.T, n = BT * QKV * sh.HD;
    A *a, *b;
    LAB_CHECK(cudaMalloc(&a, n * sizeof(A)));
    LAB_CHECK(cudaMalloc(&b, n * sizeof(A)));
    lab_fill_dev<A>(a, n, 3, -2, 2);
    double gb_out = 2.0 * n * sizeof(A) / 1e9, gb_in = 2.0 * BT * NQK * sh.HD * sizeof(A) / 1e9;
    for (int ver = 1; ver <= 3; ver++) {
        float ms = lab_time_ms([&] { run_rope<A, 0>(ver, b, a, dcos, dsin, sh); });
        printf("  v%d %-4s fwd out-of-place  %9.3f ms  %7.1f GB/s\n", ver, dn, ms, gb_out / ms * 1e3);
        ms = lab_time_ms([&] { run_rope<A, 0>(ver, a, a, dcos, dsin, sh); });
        printf("  v%d %-4s fwd in-place      %9.3f ms  %7.1f GB/s\n", ver, dn, ms, gb_in / ms * 1e3);
        ms = lab_time_ms([&] { run_rope<A, 1>(ver, a, a, dcos, dsin, sh); });
        printf("  v%d %-4s bwd in-place      %9.3f ms  %7.1f GB/s\n", ver, dn, ms, gb_in / ms * 1e3);
    }
    cudaFree(a), cudaFree(b);
}

static void bench(rope_shape sh) {
    printf("# bench B=%d T=%d NH=%d NKV=%d HD=%d\n", sh.B, sh.T, sh.NH, sh.NKV, sh.HD);
    size_t nt = (size_t)sh.T * (sh.HD / 2);
    float *ct = (float *)malloc(nt * 4), *st = (float *)malloc(nt * 4);
    make_tables(ct, st, sh.T, sh.HD);
    float *dcos = lab_upload<float>(ct, nt), *dsin = lab_upload<float>(st, nt);
    bench_dtype<float>("f32", sh, dcos, dsin);
    bench_dtype<mt_bf16>("bf16", sh, dcos, dsin);
    cudaFree(dcos), cudaFree(dsin);
    free(ct), free(st);
}

int main(int argc, char **argv) {
    rope_shape sh = {1, 4096, 28, 4, 128};
    if (argc == 6) sh = {atoi(argv[1]), atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5])};
    else if (argc != 1) {
        fprintf(stderr, "usage: ./rope [B T NH NKV HD]   (benchmark shape, default 1 4096 28 4 128)\n");
        return 2;
    }
    if (sh.B <= 0 || sh.T <= 0 || sh.NH <= 0 || sh.NKV <= 0 || sh.HD <= 0 || sh.HD % 2) {
        fprintf(stderr, "rope lab: bad shape (all positive, HD even)\n");
        return 2;
    }
    check({2, 64, 4, 2, 64});
    check({1, 300, 28, 4, 128});
    check({3, 5, 3, 1, 6}); // half = 3: pairs do not fill a warp
    bench(sh);
    LAB_CHECK(cudaGetLastError());
    printf("# %s\n", lab_failures ? "SOME CHECKS FAILED" : "all checks PASS");
    return lab_failures ? 1 : 0;
}
