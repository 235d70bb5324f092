// cuda_matmul.cu: matmul_fwd / matmul_bwd on cuBLASLt, with descriptors,
// layouts and the heuristic's algorithm cached per (shape, dtypes, transposes,
// epilogue, pointer alignments) key, and a deterministic dbias reduction.
//
// Row-major -> column-major mapping. A row-major X(R,C) is, byte for byte, the
// column-major X^T(C,R) with ld = C. So every product is written for the
// transposes, which cuBLAS sees as column-major (m x n, k inner):
//   fwd   out(N,OC) = inp(N,IC) w(OC,IC)^T  <=>  out^T(OC,N) = w(OC,IC) inp^T(IC,N)
//         A = w  (stored col-major IC x OC, ld IC) with transa = T -> op(A) = OC x IC
//         B = inp(stored col-major IC x N,  ld IC) with transb = N;  m=OC n=N k=IC, D ld OC
//   dinp  dinp(N,IC) = dout(N,OC) w(OC,IC)  <=>  dinp^T(IC,N) = w^T(IC,OC) dout^T(OC,N)
//         A = w (IC x OC, ld IC) N; B = dout (OC x N, ld OC) N;  m=IC n=N k=OC, D ld IC
//   dw    dw(OC,IC) = dout^T(OC,N) inp(N,IC) <=> dw^T(IC,OC) = inp^T(IC,N) dout(N,OC)
//         A = inp (IC x N, ld IC) N; B = dout (OC x N, ld OC) T;  m=IC n=OC k=N, D ld IC
// Bias (length OC = rows of D in the fwd mapping) rides the BIAS epilogue.
// Precision: CUBLAS_COMPUTE_32F everywhere: bf16 inputs accumulate in f32; f32
// inputs run true FP32 (no TF32). Mixed (act, weight) dtypes convert the weight
// (and bias) into scratch so both GEMM inputs share one type.
#include "backends/cuda/cuda_internal.h"

#include <stdlib.h>

#define MT_GEMM_CACHE_SIZE 128

typedef struct {
    int64_t m, n, k;
    int transa, transb;
    int ab_type, d_type; // cudaDataType
    int epilogue;        // cublasLtEpilogue_t
    int align_a, align_b, align_d;
} gemm_key;

typedef struct {
    gemm_key key;
    int used;
    unsigned long long last_use;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
    int fallback; // no cuBLASLt algorithm for this key: cublasGemmEx (classic cuBLAS) instead
} gemm_entry;

struct mt_cuda_gemm_cache {
    gemm_entry e[MT_GEMM_CACHE_SIZE];
    unsigned long long clock;
    int force_fallback; // MT_GEMM_FALLBACK=1: every GEMM on the fallback (tests exercise it this way)
};

static void entry_release(gemm_entry *e) {
    if (e->desc) cublasLtMatmulDescDestroy(e->desc);
    if (e->la) cublasLtMatrixLayoutDestroy(e->la);
    if (e->lb) cublasLtMatrixLayoutDestroy(e->lb);
    if (e->ld) cublasLtMatrixLayoutDestroy(e->ld);
    memset(e, 0, sizeof *e);
}

mt_status mt_cuda_gemm_init(mt_cuda_ctx *ctx) {
    ctx->gemm_cache = (struct mt_cuda_gemm_cache *)calloc(1, sizeof *ctx->gemm_cache);
    if (!ctx->gemm_cache) return mt_fail(MT_ERR_MEMORY, "cuda: out of host memory for the GEMM cache");
    MT_TRY(mt_env_bool("MT_GEMM_FALLBACK", 0, &ctx->gemm_cache->force_fallback));
    return MT_OK;
}

void mt_cuda_gemm_destroy(mt_cuda_ctx *ctx) {
    if (ctx->blas) cublasDestroy(ctx->blas);
    ctx->blas = NULL;
    if (!ctx->gemm_cache) return;
    for (int i = 0; i < MT_GEMM_CACHE_SIZE; i++)
        if (ctx->gemm_cache->e[i].used) entry_release(&ctx->gemm_cache->e[i]);
    free(ctx->gemm_cache);
    ctx->gemm_cache = NULL;
}

static int ptr_align(const void *p) {
    uintptr_t a = (uintptr_t)p;
    int al = 256;
    while (al > 1 && (a & (uintptr_t)(al - 1))) al >>= 1;
    return al;
}

static int key_eq(const gemm_key *a, const gemm_key *b) { return memcmp(a, b, sizeof *a) == 0; }

static const char *type_name(int t) {
    return t == CUDA_R_32F ? "f32" : t == CUDA_R_16BF ? "bf16" : "?";
}

// Builds (or finds) the cached plan for key.
static mt_status gemm_plan(mt_cuda_ctx *ctx, const gemm_key *key, gemm_entry **out) {
    struct mt_cuda_gemm_cache *c = ctx->gemm_cache;
    c->clock++;
    gemm_entry *victim = NULL;
    for (int i = 0; i < MT_GEMM_CACHE_SIZE; i++) {
        gemm_entry *e = &c->e[i];
        if (e->used && key_eq(&e->key, key)) {
            e->last_use = c->clock;
            *out = e;
            return MT_OK;
        }
        if (!e->used) {
            if (!victim || victim->used) victim = e;
        } else if (!victim || (victim->used && e->last_use < victim->last_use)) {
            victim = e;
        }
    }
    if (victim->used) entry_release(victim);
    gemm_entry *e = victim;
    e->key = *key;
    cudaDataType abt = (cudaDataType)key->ab_type, dt = (cudaDataType)key->d_type;
    MT_CUDA_CHECK(cublasLtMatmulDescCreate(&e->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    e->used = 1; // from here on entry_release frees what was created
    cublasOperation_t ta = key->transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = key->transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epi = (cublasLtEpilogue_t)key->epilogue;
    mt_status s = MT_OK;
#define PLAN_CHECK(stmt)                                                              \
    do {                                                                              \
        s = mt_cuda_check_impl((stmt), #stmt, __FILE__, __LINE__);                     \
        if (s != MT_OK) {                                                             \
            entry_release(e);                                                         \
            return s;                                                                 \
        }                                                                             \
    } while (0)
    PLAN_CHECK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    PLAN_CHECK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    PLAN_CHECK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (epi == CUBLASLT_EPILOGUE_BIAS) {
        int32_t bt = (int32_t)dt; // bias has the output's type (converted into scratch if needed)
        PLAN_CHECK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    // Stored (pre-op) shapes: op(A) is m x k, op(B) is k x n, D is m x n.
    uint64_t a_rows = key->transa ? key->k : key->m, a_cols = key->transa ? key->m : key->k;
    uint64_t b_rows = key->transb ? key->n : key->k, b_cols = key->transb ? key->k : key->n;
    PLAN_CHECK(cublasLtMatrixLayoutCreate(&e->la, abt, a_rows, a_cols, (int64_t)a_rows));
    PLAN_CHECK(cublasLtMatrixLayoutCreate(&e->lb, abt, b_rows, b_cols, (int64_t)b_rows));
    PLAN_CHECK(cublasLtMatrixLayoutCreate(&e->ld, dt, (uint64_t)key->m, (uint64_t)key->n, key->m));

    cublasLtMatmulPreference_t pref = NULL;
    PLAN_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = ctx->lt_workspace_bytes;
    uint32_t aa = (uint32_t)key->align_a, ab = (uint32_t)key->align_b, ad = (uint32_t)key->align_d;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof aa);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof ab);
    if (st == CUBLAS_STATUS_SUCCESS) // C aliases D (accumulate in place)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ad, sizeof ad);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ad, sizeof ad);
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS && !c->force_fallback)
        st = cublasLtMatmulAlgoGetHeuristic(ctx->lt, e->desc, e->la, e->lb, e->ld, e->ld, pref, 1, &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) found = 0; // no algorithm: fallback below
    else PLAN_CHECK(st);
#undef PLAN_CHECK
    if ((found < 1 || res.state != CUBLAS_STATUS_SUCCESS) && epi == CUBLASLT_EPILOGUE_DEFAULT) {
        // Fix: no algorithm (an odd shape/alignment) used to fail the whole run;
        // now the plain GEMM runs on classic cuBLAS (cached, so asked once).
        e->fallback = 1;
        e->last_use = c->clock;
        *out = e;
        return MT_OK;
    }
    if (found < 1 || res.state != CUBLAS_STATUS_SUCCESS) { // fused bias: the caller retries without it
        entry_release(e);
        return mt_fail(MT_ERR_UNSUPPORTED,
                       "cuda: cuBLASLt has no algorithm for m=%lld n=%lld k=%lld trans=%d%d %s->%s epilogue=%d "
                       "align=%d/%d/%d",
                       (long long)key->m, (long long)key->n, (long long)key->k, key->transa, key->transb,
                       type_name(key->ab_type), type_name(key->d_type), key->epilogue, key->align_a, key->align_b,
                       key->align_d);
    }
    e->algo = res.algo;
    e->last_use = c->clock;
    *out = e;
    return MT_OK;
}

// The same product on classic cuBLAS (cublasGemmEx, any alignment), on the
// compute stream with the cuBLASLt workspace (stream-ordered, so shared safely).
// CUBLAS_COMPUTE_32F: f32 inputs stay true FP32 (no TF32), bf16 accumulate in f32.
static mt_status gemm_fallback(mt_cuda_ctx *ctx, const gemm_key *key, const void *A, const void *B, void *D,
                               float beta) {
    if (!ctx->blas) { // the stream never changes; cublasSetStream resets the workspace, so it goes first
        MT_CUDA_CHECK(cublasCreate(&ctx->blas));
        MT_CUDA_CHECK(cublasSetStream(ctx->blas, ctx->stream[MT_STREAM_COMPUTE]));
        MT_CUDA_CHECK(cublasSetWorkspace(ctx->blas, ctx->lt_workspace, ctx->lt_workspace_bytes));
    }
    if (key->m > INT32_MAX || key->n > INT32_MAX || key->k > INT32_MAX)
        return mt_fail(MT_ERR_UNSUPPORTED, "cuda: GEMM fallback: m=%lld n=%lld k=%lld exceeds int", (long long)key->m,
                       (long long)key->n, (long long)key->k);
    int m = (int)key->m, n = (int)key->n, k = (int)key->k;
    int lda = key->transa ? k : m, ldb = key->transb ? n : k;
    float alpha = 1.0f;
    MT_CUDA_CHECK(cublasGemmEx(ctx->blas, key->transa ? CUBLAS_OP_T : CUBLAS_OP_N, key->transb ? CUBLAS_OP_T : CUBLAS_OP_N,
                               m, n, k, &alpha, A, (cudaDataType)key->ab_type, lda, B, (cudaDataType)key->ab_type, ldb,
                               &beta, D, (cudaDataType)key->d_type, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return MT_OK;
}

// D(m,n) = alpha op(A) op(B) + beta D (+ bias(m)), column-major, C aliases D.
// With a bias, returns MT_ERR_UNSUPPORTED (without side effects) when no fused
// algorithm exists; without one, falls back to classic cuBLAS.
static mt_status gemm(mt_backend *be, int transa, int transb, int64_t m, int64_t n, int64_t k, const void *A,
                      const void *B, void *D, cudaDataType abt, cudaDataType dt, float beta, const void *bias) {
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    gemm_key key;
    memset(&key, 0, sizeof key); // padding bytes take part in memcmp
    key.m = m;
    key.n = n;
    key.k = k;
    key.transa = transa;
    key.transb = transb;
    key.ab_type = (int)abt;
    key.d_type = (int)dt;
    key.epilogue = (int)(bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
    key.align_a = ptr_align(A);
    key.align_b = ptr_align(B);
    key.align_d = ptr_align(D);
    gemm_entry *e = NULL;
    MT_TRY(gemm_plan(ctx, &key, &e));
    if (e->fallback) return gemm_fallback(ctx, &key, A, B, D, beta);
    if (bias)
        MT_CUDA_CHECK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    float alpha = 1.0f;
    cublasStatus_t st = cublasLtMatmul(ctx->lt, e->desc, &alpha, A, e->la, B, e->lb, &beta, D, e->ld, D, e->ld, &e->algo,
                                       ctx->lt_workspace, ctx->lt_workspace_bytes, ctx->stream[MT_STREAM_COMPUTE]);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED && bias) // e.g. a bias pointer the fused epilogue cannot take
        return mt_fail(MT_ERR_UNSUPPORTED, "cuda: cuBLASLt rejected the fused bias for m=%lld n=%lld k=%lld",
                       (long long)m, (long long)n, (long long)k);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) { // rejected at run time: remember, and use the fallback
        e->fallback = 1;
        return gemm_fallback(ctx, &key, A, B, D, beta);
    }
    MT_CUDA_CHECK(st);
    return MT_OK;
}

static cudaDataType cuda_type(mt_dtype t) { return t == MT_F32 ? CUDA_R_32F : CUDA_R_16BF; }

// ---- small kernels: bias add (fallback), dbias column sums, dw accumulate ----

// out(N,OC) += bias(OC): rows along grid.y, columns along x (no per-element division).
template <typename A, typename W> __global__ void add_bias_kernel(A *out, const W *bias, int N, int OC) {
    for (int n = blockIdx.y; n < N; n += gridDim.y)
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < OC; c += gridDim.x * blockDim.x) {
            size_t i = (size_t)n * OC + c;
            mt_st(out, i, mt_ld(out, i) + mt_ld(bias, (size_t)c));
        }
}

// partial[chunk][c] = sum of dout[n][c] over the chunk's rows; block (32, 8).
template <typename A>
__global__ void colsum_partial_kernel(float *partial, const A *dout, int N, int OC, int rows_per_chunk) {
    __shared__ float sh[8][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    int r0 = blockIdx.y * rows_per_chunk;
    int r1 = min(N, r0 + rows_per_chunk);
    float acc = 0.f;
    if (c < OC)
        for (int r = r0 + threadIdx.y; r < r1; r += 8) acc += mt_ld(dout, (size_t)r * OC + c);
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < OC) {
        float s = 0.f;
        for (int y = 0; y < 8; y++) s += sh[y][threadIdx.x];
        partial[(size_t)blockIdx.y * OC + c] = s;
    }
}

// out[c] (= or +=) sum over chunks of partial[chunk][c], fixed order (deterministic).
template <typename W>
__global__ void colsum_final_kernel(W *out, const float *partial, int nchunk, int OC, int accumulate) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= OC) return;
    float s = 0.f;
    for (int i = 0; i < nchunk; i++) s += partial[(size_t)i * OC + c];
    if (accumulate) s += mt_ld(out, (size_t)c);
    mt_st(out, (size_t)c, s);
}

template <typename W> __global__ void acc_f32_kernel(W *dst, const float *src, size_t n, int accumulate) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        mt_st(dst, i, accumulate ? mt_ld(dst, i) + src[i] : src[i]);
}

static mt_status dbias_reduce(mt_backend *be, void *dbias, mt_dtype wdt, const void *dout, int N, int OC, int accumulate,
                              float *partial_scratch, int nchunk) {
    cudaStream_t s = mt_cuda_compute(be);
    int rows_per_chunk = (N + nchunk - 1) / nchunk;
    dim3 grid((unsigned)((OC + 31) / 32), (unsigned)nchunk), block(32, 8);
    mt_status st = mt_cuda_dispatch2(be->act_dtype, wdt, [&](auto a, auto w) -> mt_status {
        using A = decltype(a);
        using W = decltype(w);
        colsum_partial_kernel<A><<<grid, block, 0, s>>>(partial_scratch, (const A *)dout, N, OC, rows_per_chunk);
        MT_CUDA_CHECK_LAUNCH();
        colsum_final_kernel<W><<<(OC + 255) / 256, 256, 0, s>>>((W *)dbias, partial_scratch, nchunk, OC, accumulate);
        MT_CUDA_CHECK_LAUNCH();
        return MT_OK;
    });
    return st;
}

static int dbias_chunks(int N) {
    int c = (N + 255) / 256;
    return c < 1 ? 1 : c > 256 ? 256 : c;
}

static mt_status check_dims(const char *op, int N, int IC, int OC) {
    if (N < 0 || IC <= 0 || OC <= 0) return mt_fail(MT_ERR_SHAPE, "cuda %s: bad shape N=%d IC=%d OC=%d", op, N, IC, OC);
    return MT_OK;
}

mt_status mt_cuda_matmul_fwd(mt_backend *be, void *out, const void *inp, const void *w, const void *bias, mt_dtype wdt,
                             int N, int IC, int OC) {
    MT_TRY(check_dims("matmul_fwd", N, IC, OC));
    if (N == 0) return MT_OK;
    mt_dtype act = be->act_dtype;
    cudaStream_t s = mt_cuda_compute(be);
    const void *wk = w, *bk = bias;
    if (wdt != act) { // mixed: bring weight and bias to the activation type
        size_t wbytes = mt_cuda_align_up((size_t)OC * IC * mt_dtype_size(act), 256);
        void *scr = NULL;
        MT_TRY(mt_cuda_scratch(be, wbytes + (size_t)OC * 4 + 256, &scr));
        MT_TRY(mt_cuda_convert(s, scr, act, w, wdt, (size_t)OC * IC));
        wk = scr;
        if (bias) {
            void *bs = (char *)scr + wbytes;
            MT_TRY(mt_cuda_convert(s, bs, act, bias, wdt, (size_t)OC));
            bk = bs;
        }
    }
    cudaDataType t = cuda_type(act);
    // The fused BIAS epilogue for 16-byte aligned biases; else (or if cuBLASLt has no
    // fused algorithm for the shape) a plain GEMM followed by a bias-add kernel.
    int fuse = bk && ((uintptr_t)bk & 15u) == 0;
    mt_status st = gemm(be, 1, 0, OC, N, IC, wk, inp, out, t, t, 0.0f, fuse ? bk : NULL);
    if (bk && (!fuse || st == MT_ERR_UNSUPPORTED)) {
        // No fused-bias algorithm for this shape/alignment: plain GEMM, then add the bias.
        if (fuse) MT_TRY(gemm(be, 1, 0, OC, N, IC, wk, inp, out, t, t, 0.0f, NULL));
        else MT_TRY(st);
        return mt_cuda_dispatch1(act, [&](auto a) -> mt_status {
            using A = decltype(a);
            add_bias_kernel<A, A><<<mt_cuda_rows_grid(N, OC, 256), 256, 0, s>>>((A *)out, (const A *)bk, N, OC);
            MT_CUDA_CHECK_LAUNCH();
            return MT_OK;
        });
    }
    return st;
}

mt_status mt_cuda_matmul_bwd(mt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp,
                             const void *w, mt_dtype wdt, int N, int IC, int OC, int flags) {
    MT_TRY(check_dims("matmul_bwd", N, IC, OC));
    mt_dtype act = be->act_dtype;
    cudaStream_t s = mt_cuda_compute(be);
    int acc_dw = (flags & MT_ACC_DW) != 0, acc_dinp = (flags & MT_ACC_DINP) != 0;
    // dw and dbias: wdt, or f32 under MT_DW_F32 (the caller sums chunks there and rounds once).
    mt_dtype dwt = (flags & MT_DW_F32) ? MT_F32 : wdt;
    if (N == 0) { // nothing to sum: "=" means zero, "+=" means unchanged
        if (dw && !acc_dw) MT_CUDA_CHECK(cudaMemsetAsync(dw, 0, (size_t)OC * IC * mt_dtype_size(dwt), s));
        if (dbias && !acc_dw) MT_CUDA_CHECK(cudaMemsetAsync(dbias, 0, (size_t)OC * mt_dtype_size(dwt), s));
        return MT_OK;
    }
    cudaDataType t = cuda_type(act);
    // Scratch layout: [converted w | f32 dw | dbias partials].
    size_t wconv_bytes = wdt != act && dinp ? mt_cuda_align_up((size_t)OC * IC * mt_dtype_size(act), 256) : 0;
    int need_dw_f32 = dw && act == MT_F32 && dwt == MT_BF16;
    size_t dwf_bytes = need_dw_f32 ? mt_cuda_align_up((size_t)OC * IC * 4, 256) : 0;
    int nchunk = dbias_chunks(N);
    size_t part_bytes = dbias ? mt_cuda_align_up((size_t)nchunk * OC * 4, 256) : 0;
    char *scr = NULL;
    if (wconv_bytes + dwf_bytes + part_bytes) {
        void *p = NULL;
        MT_TRY(mt_cuda_scratch(be, wconv_bytes + dwf_bytes + part_bytes, &p));
        scr = (char *)p;
    }
    if (dinp) {
        const void *wk = w;
        if (wdt != act) {
            MT_TRY(mt_cuda_convert(s, scr, act, w, wdt, (size_t)OC * IC));
            wk = scr;
        }
        MT_TRY(gemm(be, 0, 0, IC, N, OC, wk, dout, dinp, t, t, acc_dinp ? 1.0f : 0.0f, NULL));
    }
    if (dw) {
        if (need_dw_f32) { // f32 activations, bf16 dw: f32 product, then (accumulate and) round once
            float *dwf = (float *)(scr + wconv_bytes);
            MT_TRY(gemm(be, 0, 1, IC, OC, N, inp, dout, dwf, t, CUDA_R_32F, 0.0f, NULL));
            size_t n = (size_t)OC * IC;
            acc_f32_kernel<mt_bf16><<<mt_cuda_blocks(n, 256), 256, 0, s>>>((mt_bf16 *)dw, dwf, n, acc_dw);
            MT_CUDA_CHECK_LAUNCH();
        } else { // same types, or bf16 A/B into an f32 C/D: cuBLASLt (and cublasGemmEx) read and
                 // write the f32 C directly under CUBLAS_COMPUTE_32F, so "+=" never rounds to bf16
            MT_TRY(gemm(be, 0, 1, IC, OC, N, inp, dout, dw, t, cuda_type(dwt), acc_dw ? 1.0f : 0.0f, NULL));
        }
    }
    if (dbias) MT_TRY(dbias_reduce(be, dbias, dwt, dout, N, OC, acc_dw, (float *)(scr + wconv_bytes + dwf_bytes), nchunk));
    return MT_OK;
}
