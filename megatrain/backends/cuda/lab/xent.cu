// xent.cu: fused softmax cross-entropy forward+backward lab, in place over rows of
// V logits (backend.h xent_fwd_bwd):
//   losses[r] = logsumexp(x[r]) - x[r][t[r]],  x[r] <- dscale * (softmax(x[r]) - onehot(t[r]))
// and a target outside [0,V) gives loss 0 and a zero row. Versions, each checked
// against a double-precision CPU reference, f32 and bf16 logits:
//   v1  two-pass: one block per row; block max, then block sum of exp(x - max),
//       then the write pass (the first, obviously-correct version)
//   v2  online: one block per row, one read for (max, sum) merged online, then the
//       write pass; scalar accesses (the backend's xent_kernel<A, 1>: its fallback
//       where V is not a multiple of the vector, and the whole backend until issue 16)
//   v3  v2 with 16-byte accesses (the backend's xent_kernel<A, 16/sizeof(A)>, taken when
//       V is a multiple of the vector and the logits are aligned; skipped otherwise)
// Then CUDA-event timing for V = 152064 (Qwen2), 128256 (Llama 3) and 256 at 128 and
// n rows. GB/s counts the minimum traffic: one read and one write of the logits.
// usage: ./xent [n]   (benchmark rows; default 4096)
#include "lab_common.h"
#include "lab_device.h"
#include "../xent_kernels.cuh"

// ---- v1: two passes over the row for (max, sum), then the write pass ----
static const int V1_THREADS = 256;

// Block-wide max or sum; every thread gets the result. sh holds 32 floats.
template <bool MAX> __device__ float v1_block_reduce(float v, float *sh) {
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? fmaxf(v, u) : v + u;
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
    __syncthreads(); // a previous call may still be reading sh
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : (MAX ? -INFINITY : 0.f);
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? fmaxf(v, u) : v + u;
    }
    return v;
}

template <typename A> __global__ void xent_v1(A *logits, float *losses, const int32_t *targets, int V, float dscale) {
    __shared__ float sh[32];
    A *x = logits + (size_t)blockIdx.x * V;
    float m = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, mt_ld(x, (size_t)v));
    m = v1_block_reduce<true>(m, sh);
    float s = 0.f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) s += expf(mt_ld(x, (size_t)v) - m);
    s = v1_block_reduce<false>(s, sh);
    float lse = m + logf(s);
    int tgt = targets[blockIdx.x];
    bool valid = tgt >= 0 && tgt < V;
    if (threadIdx.x == 0) losses[blockIdx.x] = valid ? lse - mt_ld(x, (size_t)tgt) : 0.f;
    __syncthreads(); // x[tgt] is read before it is overwritten
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        float p = valid ? expf(mt_ld(x, (size_t)v) - lse) : 0.f;
        mt_st(x, (size_t)v, dscale * (p - (v == tgt ? 1.f : 0.f)));
    }
}

// ---- v2, v3: the backend's kernel: xent_kernel, XENT_THREADS (../xent_kernels.cuh) ----

template <typename A> static void run_xent(int ver, A *x, float *loss, const int32_t *t, int n, int V, float dscale) {
    if (ver == 1) xent_v1<A><<<(unsigned)n, V1_THREADS>>>(x, loss, t, V, dscale);
    else if (ver == 2) xent_kernel<A, 1><<<(unsigned)n, XENT_THREADS>>>(x, loss, t, V, dscale);
    else xent_kernel<A, mt_vec_of<A>()><<<(unsigned)n, XENT_THREADS>>>(x, loss, t, V, dscale); // mt_cuda_xent_fwd_bwd's
}

// ---- CPU reference (double): grad(n,V), loss(n) ----
static void ref_xent(float *grad, float *loss, const float *x, const int32_t *t, int n, int V, float dscale) {
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * V;
        float *g = grad + (size_t)r * V;
        double m = -INFINITY, s = 0;
        for (int v = 0; v < V; v++) m = xr[v] > m ? xr[v] : m;
        for (int v = 0; v < V; v++) s += exp(xr[v] - m);
        double lse = m + log(s);
        bool valid = t[r] >= 0 && t[r] < V;
        loss[r] = valid ? (float)(lse - xr[t[r]]) : 0.f;
        for (int v = 0; v < V; v++) g[v] = valid ? (float)(dscale * (exp(xr[v] - lse) - (v == t[r] ? 1.0 : 0.0))) : 0.f;
    }
}

// Test rows: 0 large logits (+100: exp overflows f32 without the max shift), 1 masked
// (-inf at every v % 3 == 1, target unmasked), 2 ignored (target -1), 3 target V-1, 4 target 0.
static void make_case(float *x, int32_t *t, int n, int V) {
    size_t N = (size_t)n * V;
    lab_fill(x, N, 1 + (unsigned long long)V, -10, 10);
    for (int r = 0; r < n; r++) t[r] = (int32_t)(lab_hash((unsigned)r * 2654435761u + (unsigned)V) % (unsigned)V);
    if (n > 0)
        for (int v = 0; v < V; v++) x[v] += 100.f;
    if (n > 1) {
        for (int v = 1; v < V; v += 3) x[(size_t)V + v] = -INFINITY;
        t[1] = t[1] / 3 * 3;
    }
    if (n > 2) t[2] = -1;
    if (n > 3) t[3] = V - 1;
    if (n > 4) t[4] = 0;
    lab_round_bf16(x, N); // one input set for both precisions
}

// nmse over the entries that are not a row's target (the softmax part alone; the
// full nmse is dominated by the -dscale at the targets).
static double nmse_off_target(const float *a, const float *b, const int32_t *t, int n, int V) {
    double num = 0, den = 0;
    for (int r = 0; r < n; r++)
        for (int v = 0; v < V; v++) {
            if (v == t[r]) continue;
            size_t i = (size_t)r * V + v;
            double d = (double)a[i] - b[i];
            num += d * d;
            den += (double)b[i] * b[i];
        }
    return den > 0 ? num / den : num;
}

template <typename A> static void check_dtype(const char *dn, const float *x, const int32_t *t, const float *rg,
                                              const float *rl, int n, int V, float dscale, double gtol) {
    size_t N = (size_t)n * V;
    float *hg = (float *)malloc(N * 4), *hl = (float *)malloc((size_t)n * 4);
    int32_t *dt;
    float *dl;
    LAB_CHECK(cudaMalloc(&dt, (size_t)n * 4));
    LAB_CHECK(cudaMalloc(&dl, (size_t)n * 4));
    LAB_CHECK(cudaMemcpy(dt, t, (size_t)n * 4, cudaMemcpyHostToDevice));
    for (int ver = 1; ver <= 3; ver++) {
        if (ver == 3 && V % mt_vec_of<A>() != 0) continue; // the backend takes v2 for this V
        A *dx = lab_upload<A>(x, N);
        run_xent<A>(ver, dx, dl, dt, n, V, dscale);
        LAB_CHECK(cudaDeviceSynchronize());
        lab_download(hg, dx, N);
        LAB_CHECK(cudaMemcpy(hl, dl, (size_t)n * 4, cudaMemcpyDeviceToHost));
        double lerr = 0, zerr = 0;
        for (int r = 0; r < n; r++) lerr = fmax(lerr, fabs((double)hl[r] - rl[r]));
        if (n > 2) { // the ignored row and the masked entries must be exactly 0
            zerr = fabs(hl[2]);
            for (int v = 0; v < V; v++) zerr = fmax(zerr, fabs(hg[(size_t)2 * V + v]));
            for (int v = 1; v < V; v += 3) zerr = fmax(zerr, fabs(hg[(size_t)V + v]));
        }
        char what[96];
        snprintf(what, sizeof what, "v%d %s loss max abs err", ver, dn);
        lab_report(what, lerr, 1e-4);
        snprintf(what, sizeof what, "v%d %s grad nmse", ver, dn);
        lab_report(what, lab_nmse(hg, rg, N), gtol);
        snprintf(what, sizeof what, "v%d %s grad nmse off-target", ver, dn);
        lab_report(what, nmse_off_target(hg, rg, t, n, V), gtol);
        snprintf(what, sizeof what, "v%d %s ignored row / masked entries", ver, dn);
        lab_report(what, zerr, 0);
        cudaFree(dx);
    }
    cudaFree(dt), cudaFree(dl);
    free(hg), free(hl);
}

static void check(int n, int V) {
    printf("# check n=%d V=%d\n", n, V);
    size_t N = (size_t)n * V;
    float dscale = 1.0f / (float)n;
    float *x = (float *)malloc(N * 4), *rg = (float *)malloc(N * 4), *rl = (float *)malloc((size_t)n * 4);
    int32_t *t = (int32_t *)malloc((size_t)n * 4);
    make_case(x, t, n, V);
    ref_xent(rg, rl, x, t, n, V, dscale);
    check_dtype<float>("f32", x, t, rg, rl, n, V, dscale, 1e-9);
    check_dtype<mt_bf16>("bf16", x, t, rg, rl, n, V, dscale, 1e-4);
    free(x), free(rg), free(rl), free(t);
}

template <typename A> static void bench_dtype(const char *dn, int n, int V, const int32_t *dt, float *dl) {
    size_t N = (size_t)n * V;
    A *dx;
    LAB_CHECK(cudaMalloc(&dx, N * sizeof(A)));
    double gb = 2.0 * N * sizeof(A) / 1e9;
    for (int ver = 1; ver <= 3; ver++) {
        if (ver == 3 && V % mt_vec_of<A>() != 0) continue; // the backend takes v2 for this V
        lab_fill_dev<A>(dx, N, 7, -10, 10); // later runs see gradients: same traffic, finite values
        float ms = lab_time_ms([&] { run_xent<A>(ver, dx, dl, dt, n, V, 1.0f / n); });
        printf("  v%d %-4s n=%-5d V=%-6d  %9.3f ms  %7.1f GB/s\n", ver, dn, n, V, ms, gb / ms * 1e3);
    }
    cudaFree(dx);
}

static void bench(int n, int V) {
    int32_t *t = (int32_t *)malloc((size_t)n * 4), *dt;
    for (int r = 0; r < n; r++) t[r] = (int32_t)(lab_hash((unsigned)r + 12345u) % (unsigned)V);
    float *dl;
    LAB_CHECK(cudaMalloc(&dt, (size_t)n * 4));
    LAB_CHECK(cudaMalloc(&dl, (size_t)n * 4));
    LAB_CHECK(cudaMemcpy(dt, t, (size_t)n * 4, cudaMemcpyHostToDevice));
    bench_dtype<float>("f32", n, V, dt, dl);
    bench_dtype<mt_bf16>("bf16", n, V, dt, dl);
    cudaFree(dt), cudaFree(dl);
    free(t);
}

int main(int argc, char **argv) {
    int n = argc == 2 ? atoi(argv[1]) : 4096;
    if (argc > 2 || n <= 0) {
        fprintf(stderr, "usage: ./xent [n]   (benchmark rows, default 4096)\n");
        return 2;
    }
    check(128, 152064);
    check(128, 128256);
    check(4096, 256);
    check(5, 1001);
    static const int Vs[3] = {152064, 128256, 256};
    printf("# bench (GB/s = one read + one write of the logits)\n");
    for (int i = 0; i < 3; i++) {
        bench(128, Vs[i]);
        if (n != 128) bench(n, Vs[i]);
    }
    LAB_CHECK(cudaGetLastError());
    printf("# %s\n", lab_failures ? "SOME CHECKS FAILED" : "all checks PASS");
    return lab_failures ? 1 : 0;
}
