// embedding.cu: embedding forward and backward lab (backend.h embedding_fwd/bwd):
//   fwd: out(N,C) = wte[ids[n]] (an id < 0 reads as a zero row)
//   bwd: dwte(V,C) += scatter of dout(N,C) by ids (accumulates; an id < 0 is skipped)
// for activations A and table W each f32 or bf16. Versions:
//   fwd v1  one block per token row
//   fwd v2  grid-stride over N*C, a 64-bit division per element (the backend's until issue 16)
//   fwd v3  the backend's embedding_fwd_kernel: 16-byte vectors of A (the table read as
//           the same number of W elements), rows along grid.y; scalar where C % vec != 0
//   bwd v1  one atomicAdd per element: order-dependent, and a bf16 table rounds after
//           every add (a token repeated k times loses ~log2(k) bits)
//   bwd v2  deterministic (the backend's: iota_kernel, CUB stable radix sort of
//           (id, position) by emb_sort_pairs, embedding_bwd_sorted_kernel): each id's
//           rows are summed onto dwte[id] in f32 in ascending token order, rounded once
// fwd v3, bwd v2 and the sort come from ../elementwise_kernels.cuh (the backend's header).
// Checks: fwd bitwise; bwd v2 BITWISE against the CPU's sequential f32 sum in ascending
// n (what the cpu backend computes), rounded once to bf16 for bf16 tables; v1 by nmse.
// Each check case has one id repeated on 30% of the tokens (runs longer than a block).
// Then CUDA-event timing with uniform ids and with one id on 30% of the tokens.
// GB/s: fwd reads N rows and writes N rows; bwd reads dout and reads+writes each touched row.
// usage: ./embedding [N C V]   (benchmark shape; default 16384 3584 152064, Qwen2.5-7B)
#include "lab_common.h"
#include "lab_device.h"
#include "../elementwise_kernels.cuh"

// ---- fwd v1: one block per token row ----
template <typename A, typename W> __global__ void embedding_fwd_v1(A *out, const int32_t *ids, const W *wte, int C) {
    size_t n = blockIdx.x;
    int id = ids[n];
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        mt_st(out, n * C + c, id >= 0 ? mt_ld(wte, (size_t)id * C + c) : 0.f);
}

// ---- fwd v2: grid-stride over N*C (the backend's until issue 16) ----
template <typename A, typename W> __global__ void embedding_fwd_v2(A *out, const int32_t *ids, const W *wte, size_t N, int C) {
    size_t total = N * (size_t)C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / (size_t)C, c = i % (size_t)C;
        int id = ids[n];
        mt_st(out, i, id >= 0 ? mt_ld(wte, (size_t)id * C + c) : 0.0f);
    }
}

// ---- bwd v1: atomics ----
__device__ __forceinline__ void lab_atomic_add(float *p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void lab_atomic_add(mt_bf16 *p, float v) { atomicAdd(p, __float2bfloat16_rn(v)); }

template <typename A, typename W> __global__ void embedding_bwd_v1(W *dwte, const int32_t *ids, const A *dout, int C) {
    size_t n = blockIdx.x;
    int id = ids[n];
    if (id < 0) return;
    for (int c = threadIdx.x; c < C; c += blockDim.x) lab_atomic_add(dwte + (size_t)id * C + c, mt_ld(dout, n * C + c));
}

// ---- v2: the backend's kernels: embedding_fwd_kernel, EMB_COLS, iota_kernel,
// embedding_bwd_sorted_kernel, emb_sort_pairs (../elementwise_kernels.cuh) ----

// Scratch for bwd v2 (the backend takes it from mt_cuda_scratch): sorted ids | positions |
// sorted positions | CUB temp.
typedef struct {
    int32_t *sid, *pos, *spos;
    void *temp;
    size_t temp_bytes;
} emb_scratch;

static emb_scratch scratch_new(int N) {
    emb_scratch s;
    s.temp_bytes = 0;
    LAB_CHECK(emb_sort_pairs(NULL, s.temp_bytes, NULL, NULL, NULL, NULL, N, 0));
    LAB_CHECK(cudaMalloc(&s.sid, (size_t)N * 4));
    LAB_CHECK(cudaMalloc(&s.pos, (size_t)N * 4));
    LAB_CHECK(cudaMalloc(&s.spos, (size_t)N * 4));
    LAB_CHECK(cudaMalloc(&s.temp, s.temp_bytes > 0 ? s.temp_bytes : 1));
    return s;
}
static void scratch_free(emb_scratch s) { cudaFree(s.sid), cudaFree(s.pos), cudaFree(s.spos), cudaFree(s.temp); }

template <typename A, typename W> static void run_fwd(int ver, A *out, const int32_t *ids, const W *wte, int N, int C) {
    constexpr int V = mt_vec_of<A>();
    if (ver == 1) embedding_fwd_v1<A, W><<<(unsigned)N, 256>>>(out, ids, wte, C);
    else if (ver == 2) embedding_fwd_v2<A, W><<<mt_cuda_blocks((size_t)N * C, 256), 256>>>(out, ids, wte, (size_t)N, C);
    else if (C % V == 0 && mt_cuda_aligned16(out, wte)) // as mt_cuda_embedding_fwd launches it
        embedding_fwd_kernel<A, W, V><<<mt_cuda_rows_grid(N, C / V, 256), 256>>>(out, ids, wte, N, C, C / V);
    else
        embedding_fwd_kernel<A, W, 1><<<mt_cuda_rows_grid(N, C, 256), 256>>>(out, ids, wte, N, C, C);
}

// v2: the sequence of mt_cuda_embedding_bwd (iota, stable sort, one block per (run, 256 columns)).
template <typename A, typename W>
static void run_bwd(int ver, W *dwte, const int32_t *ids, const A *dout, int N, int C, emb_scratch *s) {
    if (ver == 1) {
        embedding_bwd_v1<A, W><<<(unsigned)N, 256>>>(dwte, ids, dout, C);
        return;
    }
    iota_kernel<<<mt_cuda_blocks((size_t)N, 256), 256>>>(s->pos, N);
    LAB_CHECK(emb_sort_pairs(s->temp, s->temp_bytes, ids, s->sid, s->pos, s->spos, N, 0));
    dim3 grid((unsigned)N, (unsigned)((C + EMB_COLS - 1) / EMB_COLS));
    embedding_bwd_sorted_kernel<A, W><<<grid, EMB_COLS>>>(dwte, s->sid, s->spos, dout, N, C);
}

// ids: uniform in [0,V) from a hash; heavy: one id (V/2) on ~30% of the tokens; neg: a few -1.
static void make_ids(int32_t *ids, int N, int V, int heavy, int neg, unsigned seed) {
    for (int n = 0; n < N; n++) {
        unsigned h = lab_hash((unsigned)n * 2654435761u + seed);
        ids[n] = heavy && h % 10 < 3 ? V / 2 : (int32_t)(lab_hash(h) % (unsigned)V);
        if (neg && n % 997 == 5) ids[n] = -1;
    }
}

// ---- CPU reference: dwte[id] += dout[n] in f32, n ascending (the cpu backend's order) ----
static void ref_bwd(float *acc, const int32_t *ids, const float *dout, int N, int C) {
    for (int n = 0; n < N; n++) {
        if (ids[n] < 0) continue;
        float *row = acc + (size_t)ids[n] * C;
        const float *g = dout + (size_t)n * C;
        for (int c = 0; c < C; c++) row[c] += g[c];
    }
}

static const char *dname(float) { return "f32"; }
static const char *dname(mt_bf16) { return "bf16"; }

template <typename A, typename W>
static void check_pair(const float *wte, const float *dout, const int32_t *ids, const float *ref32, int N, int C,
                       int V) {
    char tag[32], what[128];
    snprintf(tag, sizeof tag, "A=%s W=%s", dname(A()), dname(W()));
    bool wbf = sizeof(W) == 2;
    size_t nt = (size_t)V * C, no = (size_t)N * C;
    float *ref = (float *)malloc(nt * 4), *got = (float *)malloc((nt > no ? nt : no) * 4);
    float *fref = (float *)malloc(no * 4);
    memcpy(ref, ref32, nt * 4);
    if (wbf) lab_round_bf16(ref, nt); // bf16 tables: the f32 sum rounded once
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) fref[(size_t)n * C + c] = ids[n] >= 0 ? wte[(size_t)ids[n] * C + c] : 0.f;
    int32_t *dids;
    LAB_CHECK(cudaMalloc(&dids, (size_t)N * 4));
    LAB_CHECK(cudaMemcpy(dids, ids, (size_t)N * 4, cudaMemcpyHostToDevice));
    W *dw = lab_upload<W>(wte, nt);
    A *dd = lab_upload<A>(dout, no), *dout_buf;
    LAB_CHECK(cudaMalloc(&dout_buf, no * sizeof(A)));
    emb_scratch s = scratch_new(N);
    for (int ver = 1; ver <= 3; ver++) { // fwd: a copy, so bitwise (inputs are bf16-representable)
        LAB_CHECK(cudaMemset(dout_buf, 0xff, no * sizeof(A)));
        run_fwd<A, W>(ver, dout_buf, dids, dw, N, C);
        LAB_CHECK(cudaDeviceSynchronize());
        lab_download(got, dout_buf, no);
        snprintf(what, sizeof what, "fwd v%d %s mismatches", ver, tag);
        lab_report(what, (double)lab_mismatches(got, fref, no), 0);
    }
    for (int ver = 1; ver <= 2; ver++) {
        W *dt = lab_upload<W>(wte, nt); // accumulates onto the (nonzero) table
        run_bwd<A, W>(ver, dt, dids, dd, N, C, &s);
        LAB_CHECK(cudaDeviceSynchronize());
        lab_download(got, dt, nt);
        if (ver == 1) { // atomics: f32 differs from the sequential sum only in order; bf16 rounds per add
            snprintf(what, sizeof what, "bwd v1 %s nmse%s", tag, wbf ? " (rounds per add)" : "");
            lab_report(what, lab_nmse(got, ref, nt), wbf ? 1e-2 : 1e-10);
            size_t bad = lab_mismatches(got, ref, nt);
            printf("  %-46s %zu of %zu elements differ bitwise from the reference\n", "", bad, nt);
        } else {
            snprintf(what, sizeof what, "bwd v2 %s mismatches (bitwise)", tag);
            lab_report(what, (double)lab_mismatches(got, ref, nt), 0);
        }
        cudaFree(dt);
    }
    scratch_free(s);
    cudaFree(dids), cudaFree(dw), cudaFree(dd), cudaFree(dout_buf);
    free(ref), free(got), free(fref);
}

static void check(int N, int C, int V) {
    printf("# check N=%d C=%d V=%d, id %d on ~30%% of the tokens, a few ids -1\n", N, C, V, V / 2);
    size_t nt = (size_t)V * C, no = (size_t)N * C;
    float *wte = (float *)malloc(nt * 4), *dout = (float *)malloc(no * 4), *ref32 = (float *)malloc(nt * 4);
    int32_t *ids = (int32_t *)malloc((size_t)N * 4);
    make_ids(ids, N, V, 1, 1, (unsigned)V);
    lab_fill(wte, nt, 1, -1, 1);
    lab_fill(dout, no, 2, -1, 1);
    lab_round_bf16(wte, nt); // one input set for every (A, W) pair
    lab_round_bf16(dout, no);
    memcpy(ref32, wte, nt * 4);
    ref_bwd(ref32, ids, dout, N, C);
    check_pair<float, float>(wte, dout, ids, ref32, N, C, V);
    check_pair<mt_bf16, mt_bf16>(wte, dout, ids, ref32, N, C, V);
    check_pair<float, mt_bf16>(wte, dout, ids, ref32, N, C, V);
    check_pair<mt_bf16, float>(wte, dout, ids, ref32, N, C, V);
    free(wte), free(dout), free(ref32), free(ids);
}

template <typename A, typename W> static void bench_pair(int N, int C, int V, int heavy) {
    int32_t *ids = (int32_t *)malloc((size_t)N * 4), *dids;
    make_ids(ids, N, V, heavy, 0, 99);
    char *seen = (char *)calloc((size_t)V, 1);
    size_t U = 0; // distinct ids: the rows bwd reads and writes
    for (int n = 0; n < N; n++) U += !seen[ids[n]], seen[ids[n]] = 1;
    LAB_CHECK(cudaMalloc(&dids, (size_t)N * 4));
    LAB_CHECK(cudaMemcpy(dids, ids, (size_t)N * 4, cudaMemcpyHostToDevice));
    size_t nt = (size_t)V * C, no = (size_t)N * C;
    W *dw;
    A *dd, *out;
    LAB_CHECK(cudaMalloc(&dw, nt * sizeof(W)));
    LAB_CHECK(cudaMalloc(&dd, no * sizeof(A)));
    LAB_CHECK(cudaMalloc(&out, no * sizeof(A)));
    LAB_CHECK(cudaMemset(dw, 0, nt * sizeof(W)));
    lab_fill_dev<A>(dd, no, 5, -1, 1);
    emb_scratch s = scratch_new(N);
    double gf = (double)no * (sizeof(A) + sizeof(W)) / 1e9;
    double gb = ((double)no * sizeof(A) + 2.0 * U * C * sizeof(W)) / 1e9;
    const char *tag = heavy ? "30% one id" : "uniform";
    for (int ver = 1; ver <= 3; ver++) {
        float ms = lab_time_ms([&] { run_fwd<A, W>(ver, out, dids, dw, N, C); });
        printf("  fwd v%d A=%-4s W=%-4s %-10s  %9.3f ms  %7.1f GB/s\n", ver, dname(A()), dname(W()), tag, ms,
               gf / ms * 1e3);
    }
    for (int ver = 1; ver <= 2; ver++) {
        float ms = lab_time_ms([&] { run_bwd<A, W>(ver, dw, dids, dd, N, C, &s); });
        printf("  bwd v%d A=%-4s W=%-4s %-10s  %9.3f ms  %7.1f GB/s  (%zu distinct ids)\n", ver, dname(A()), dname(W()),
               tag, ms, gb / ms * 1e3, U);
    }
    scratch_free(s);
    cudaFree(dids), cudaFree(dw), cudaFree(dd), cudaFree(out);
    free(ids), free(seen);
}

int main(int argc, char **argv) {
    int N = 16384, C = 3584, V = 152064;
    if (argc == 4) N = atoi(argv[1]), C = atoi(argv[2]), V = atoi(argv[3]);
    else if (argc != 1) {
        fprintf(stderr, "usage: ./embedding [N C V]   (benchmark shape, default 16384 3584 152064)\n");
        return 2;
    }
    if (N <= 0 || C <= 0 || V <= 0 || (C + EMB_COLS - 1) / EMB_COLS > 65535) {
        fprintf(stderr, "embedding lab: bad shape N=%d C=%d V=%d\n", N, C, V);
        return 2;
    }
    check(4096, 512, 1000); // the 30% id has a run of ~1200 > EMB_COLS
    check(1000, 300, 50000); // C not a multiple of EMB_COLS; mostly distinct ids
    printf("# bench N=%d C=%d V=%d\n", N, C, V);
    for (int heavy = 0; heavy < 2; heavy++) {
        bench_pair<float, float>(N, C, V, heavy);
        bench_pair<mt_bf16, mt_bf16>(N, C, V, heavy);
    }
    LAB_CHECK(cudaGetLastError());
    printf("# %s\n", lab_failures ? "SOME CHECKS FAILED" : "all checks PASS");
    return lab_failures ? 1 : 0;
}
