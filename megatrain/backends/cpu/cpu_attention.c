// cpu_attention.c: causal GQA attention, flash style. Queries and keys are cut
// into tiles of ATT_BQ x ATT_BK; the forward keeps a running max and sum per
// query row (online softmax) and saves lse, so no T x T matrix ever exists and
// scratch is a few tiles per thread. The backward recomputes probabilities
// from lse (flash-attention-2) in two passes that each own their outputs:
// pass 1 walks key tiles and sums dK, dV over the query heads of the group and
// all query tiles; pass 2 walks query tiles for dQ. No atomics, fixed order:
// results do not depend on the thread count.
//
// Tiles are copied into per-thread scratch zero-padded to full size (rows to
// the tile size, head dim to a multiple of 16), so every inner loop has
// constant bounds and runs on register-blocked micro-kernels; masked and
// padded probabilities are exactly 0.
#include <math.h>
#include <omp.h>

#include "backends/cpu/cpu_internal.h"

#define ATT_BQ 64
#define ATT_BK 64 // = ATT_BQ: the row-tile buffers hold either query or key rows
#define MK_M 4    // micro-kernel block: MK_M rows x MK_N columns of C in registers
#define MK_N 16

typedef struct {
    int B, T, NH, NKV, HD, G; // G = NH / NKV query heads per kv head
    int HDp;                  // HD rounded up to a multiple of MK_N
    size_t rs;                // floats per token row of packed qkv
    float scale;              // 1/sqrt(HD)
} att_shape;

static att_shape att_make(int B, int T, int NH, int NKV, int HD) {
    att_shape s = {B, T, NH, NKV, HD, NH / NKV, (HD + MK_N - 1) / MK_N * MK_N, (size_t)(NH + 2 * NKV) * HD,
                   (float)(1.0 / sqrt((double)HD))};
    return s;
}

// Per-thread scratch in floats: 4 row tiles (64, HDp), 4 column tiles (HDp, 64),
// 2 score tiles (64, 64), 4 row vectors (64). Every piece stays 64-byte aligned.
static size_t att_tile_floats(int HD) {
    size_t HDp = (size_t)(HD + MK_N - 1) / MK_N * MK_N;
    return 8 * HDp * ATT_BQ + 2 * (size_t)ATT_BQ * ATT_BK + 4 * ATT_BQ;
}

typedef struct {
    float *Qs, *dOs, *acc, *Vs;  // row tiles (BQ or BK, HDp); Vs also holds K rows
    float *Kt, *Vt, *dKt, *dVt;  // column tiles (HDp, BK)
    float *S, *dS;               // score tiles (BQ, BK)
    float *m, *l, *lse, *D;      // per query row
} att_scratch;

static att_scratch att_scratch_at(float *base, int HDp) {
    att_scratch s;
    size_t rt = (size_t)ATT_BQ * HDp, st = (size_t)ATT_BQ * ATT_BK;
    s.Qs = base, s.dOs = s.Qs + rt, s.acc = s.dOs + rt, s.Vs = s.acc + rt;
    s.Kt = s.Vs + rt, s.Vt = s.Kt + rt, s.dKt = s.Vt + rt, s.dVt = s.dKt + rt;
    s.S = s.dVt + rt, s.dS = s.S + st;
    s.m = s.dS + st, s.l = s.m + ATT_BQ, s.lse = s.l + ATT_BQ, s.D = s.lse + ATT_BQ;
    return s;
}

// dst(64,HDp) = mul * src rows (n of them, stride rs, HD wide), zero-padded.
static inline void load_rows(float *restrict dst, const float *restrict src, size_t rs, int n, int HD, int HDp,
                             float mul) {
    for (int i = 0; i < ATT_BQ; i++)
        for (int d = 0; d < HDp; d++) dst[(size_t)i * HDp + d] = i < n && d < HD ? src[i * rs + d] * mul : 0.0f;
}

// dst(HDp,64) = transpose of src rows (n,HD) (stride rs), zero-padded: keys
// along the fast axis so that score rows are unit-stride vectors.
static inline void load_cols(float *restrict dst, const float *restrict src, size_t rs, int n, int HD, int HDp) {
    for (int i = 0; i < HDp * ATT_BK; i++) dst[i] = 0.0f;
    for (int j = 0; j < n; j++)
        for (int d = 0; d < HD; d++) dst[(size_t)d * ATT_BK + j] = src[j * rs + d];
}

// C(M,N) (+)= A(M,K) @ B(K,N), all row-major. M % MK_M == 0, N % MK_N == 0.
// The MK_M x MK_N block of C lives in registers across the K loop.
static inline void mk_nn(float *restrict C, int ldc, const float *restrict A, int lda, const float *restrict B, int ldb,
                         int M, int N, int K, int accumulate) {
    for (int i = 0; i < M; i += MK_M)
        for (int j = 0; j < N; j += MK_N) {
            float c[MK_M][MK_N];
            for (int r = 0; r < MK_M; r++)
#pragma omp simd
                for (int jj = 0; jj < MK_N; jj++) c[r][jj] = accumulate ? C[(size_t)(i + r) * ldc + j + jj] : 0.0f;
            for (int k = 0; k < K; k++) {
                const float *b = B + (size_t)k * ldb + j;
                for (int r = 0; r < MK_M; r++) {
                    float a = A[(size_t)(i + r) * lda + k];
#pragma omp simd
                    for (int jj = 0; jj < MK_N; jj++) c[r][jj] += a * b[jj];
                }
            }
            for (int r = 0; r < MK_M; r++)
#pragma omp simd
                for (int jj = 0; jj < MK_N; jj++) C[(size_t)(i + r) * ldc + j + jj] = c[r][jj];
        }
}

// C(M,N) += A(K,M)^T @ B(K,N), all row-major. M % MK_M == 0, N % MK_N == 0.
static inline void mk_tn(float *restrict C, int ldc, const float *restrict A, int lda, const float *restrict B, int ldb,
                         int M, int N, int K) {
    for (int i = 0; i < M; i += MK_M)
        for (int j = 0; j < N; j += MK_N) {
            float c[MK_M][MK_N];
            for (int r = 0; r < MK_M; r++)
#pragma omp simd
                for (int jj = 0; jj < MK_N; jj++) c[r][jj] = C[(size_t)(i + r) * ldc + j + jj];
            for (int k = 0; k < K; k++) {
                const float *b = B + (size_t)k * ldb + j;
                for (int r = 0; r < MK_M; r++) {
                    float a = A[(size_t)k * lda + i + r];
#pragma omp simd
                    for (int jj = 0; jj < MK_N; jj++) c[r][jj] += a * b[jj];
                }
            }
            for (int r = 0; r < MK_M; r++)
#pragma omp simd
                for (int jj = 0; jj < MK_N; jj++) C[(size_t)(i + r) * ldc + j + jj] = c[r][jj];
        }
}

// Number of keys k0..k0+nk-1 that query q may see (k <= q), clamped to [0, nk].
static inline int visible(int q, int k0, int nk) {
    int v = q - k0 + 1;
    return v < 0 ? 0 : (v > nk ? nk : v);
}

// One query tile [q0, q0+nq) of head h in batch row b: out rows and lse.
MT_CPU_MULTIVERSION
static void fwd_tile(float *out, float *lse, const float *qkv, const att_shape *sh, int b, int h, int q0, float *base) {
    int T = sh->T, HD = sh->HD, HDp = sh->HDp, nq = T - q0 < ATT_BQ ? T - q0 : ATT_BQ, kvh = h / sh->G;
    size_t rs = sh->rs;
    att_scratch s = att_scratch_at(base, HDp);
    const float *bq = qkv + (size_t)b * T * rs;
    const float *kp = bq + (size_t)(sh->NH + kvh) * HD, *vp = bq + (size_t)(sh->NH + sh->NKV + kvh) * HD;

    load_rows(s.Qs, bq + (size_t)q0 * rs + (size_t)h * HD, rs, nq, HD, HDp, sh->scale);
    for (int i = 0; i < ATT_BQ; i++) {
        s.m[i] = -INFINITY;
        s.l[i] = 0.0f;
    }
    for (int i = 0; i < ATT_BQ * HDp; i++) s.acc[i] = 0.0f;

    int kend = q0 + nq; // causal: no key beyond the tile's last query
    for (int k0 = 0; k0 < kend; k0 += ATT_BK) {
        int nk = kend - k0 < ATT_BK ? kend - k0 : ATT_BK;
        load_cols(s.Kt, kp + (size_t)k0 * rs, rs, nk, HD, HDp);
        load_rows(s.Vs, vp + (size_t)k0 * rs, rs, nk, HD, HDp, 1.0f);
        mk_nn(s.S, ATT_BK, s.Qs, HDp, s.Kt, ATT_BK, ATT_BQ, ATT_BK, HDp, 0);
        // Online softmax: P = exp(S - new max) on visible keys, 0 elsewhere;
        // the running sum and output are rescaled by exp(old max - new max).
        for (int i = 0; i < ATT_BQ; i++) {
            float *sr = s.S + (size_t)i * ATT_BK;
            int jv = i < nq ? visible(q0 + i, k0, nk) : 0;
            if (jv == 0) {
                for (int j = 0; j < ATT_BK; j++) sr[j] = 0.0f;
                continue;
            }
            float mx = s.m[i];
#pragma omp simd reduction(max : mx)
            for (int j = 0; j < jv; j++) mx = sr[j] > mx ? sr[j] : mx;
            float corr = s.m[i] == -INFINITY ? 0.0f : mt_cpu_expf(s.m[i] - mx), sum = 0.0f;
#pragma omp simd reduction(+ : sum)
            for (int j = 0; j < ATT_BK; j++) {
                float p = mt_cpu_expf(sr[j] - mx) * (float)(j < jv);
                sr[j] = p;
                sum += p;
            }
            s.l[i] = s.l[i] * corr + sum;
            s.m[i] = mx;
            float *a = s.acc + (size_t)i * HDp;
            for (int d = 0; d < HDp; d++) a[d] *= corr;
        }
        mk_nn(s.acc, HDp, s.S, ATT_BK, s.Vs, HDp, ATT_BQ, HDp, ATT_BK, 1);
    }
    for (int i = 0; i < nq; i++) {
        float inv = 1.0f / s.l[i], *o = out + ((size_t)(b * T + q0 + i) * sh->NH + h) * HD;
        for (int d = 0; d < HD; d++) o[d] = s.acc[(size_t)i * HDp + d] * inv;
        lse[((size_t)b * sh->NH + h) * T + q0 + i] = s.m[i] + logf(s.l[i]);
    }
}

// out(B,T,NH*HD), lse(B,NH,T) from qkv(B,T,(NH+2NKV)*HD); tile is per-thread scratch.
static void attention_fwd(float *out, float *lse, const float *qkv, const att_shape *sh, float *tile, int nthreads) {
    int nqt = (sh->T + ATT_BQ - 1) / ATT_BQ, nbh = sh->B * sh->NH;
    long long ntasks = (long long)nqt * nbh;
    size_t tf = att_tile_floats(sh->HD);
#pragma omp parallel num_threads(nthreads)
    {
        float *scr = tile + (size_t)omp_get_thread_num() * tf;
        // Largest (latest) query tiles first: causal work grows with the tile index.
#pragma omp for schedule(dynamic, 1)
        for (long long t = 0; t < ntasks; t++) {
            int qt = nqt - 1 - (int)(t / nbh), bh = (int)(t % nbh);
            fwd_tile(out, lse, qkv, sh, bh / sh->NH, bh % sh->NH, qt * ATT_BQ, scr);
        }
    }
}

// Loads the query-side tiles of [q0, q0+nq) for head h: Qs (scaled), dOs,
// lse and D (padded rows get 0).
static inline void load_q_side(att_scratch *s, const float *dout, const float *qkv, const float *lse, const float *D,
                               const att_shape *sh, int b, int h, int q0, int nq) {
    int T = sh->T, NH = sh->NH, HD = sh->HD;
    const float *bq = qkv + (size_t)b * T * sh->rs;
    load_rows(s->Qs, bq + (size_t)q0 * sh->rs + (size_t)h * HD, sh->rs, nq, HD, sh->HDp, sh->scale);
    load_rows(s->dOs, dout + ((size_t)(b * T + q0) * NH + h) * HD, (size_t)NH * HD, nq, HD, sh->HDp, 1.0f);
    const float *lr = lse + ((size_t)b * NH + h) * T + q0, *dr = D + ((size_t)b * NH + h) * T + q0;
    for (int i = 0; i < ATT_BQ; i++) {
        s->lse[i] = i < nq ? lr[i] : 0.0f;
        s->D[i] = i < nq ? dr[i] : 0.0f;
    }
}

// Probabilities and score gradients of one (query tile, key tile) pair, with
// S = Qs Kt and dP = dOs Vt already in s->S and s->dS:
// P = exp(S - lse) and dS = P * (dP - D) on visible entries, exactly 0 elsewhere.
static inline void probs_tile(att_scratch *s, int q0, int nq, int k0, int nk) {
    for (int i = 0; i < ATT_BQ; i++) {
        int jv = i < nq ? visible(q0 + i, k0, nk) : 0;
        float *p = s->S + (size_t)i * ATT_BK, *ds = s->dS + (size_t)i * ATT_BK, li = s->lse[i], di = s->D[i];
#pragma omp simd
        for (int j = 0; j < ATT_BK; j++) {
            float e = mt_cpu_expf(p[j] - li) * (float)(j < jv);
            p[j] = e;
            ds[j] = e * (ds[j] - di);
        }
    }
}

// Pass 1: key tile [k0, k0+nk) of kv head kvh in batch row b -> dk, dv rows of dqkv.
MT_CPU_MULTIVERSION
static void bwd_kv_tile(float *dqkv, const float *dout, const float *qkv, const float *lse, const float *D,
                        const att_shape *sh, int b, int kvh, int k0, float *base) {
    int T = sh->T, HD = sh->HD, HDp = sh->HDp, nk = T - k0 < ATT_BK ? T - k0 : ATT_BK;
    size_t rs = sh->rs;
    att_scratch s = att_scratch_at(base, HDp);
    const float *bq = qkv + (size_t)b * T * rs;
    size_t koff = (size_t)(sh->NH + kvh) * HD, voff = (size_t)(sh->NH + sh->NKV + kvh) * HD;

    load_cols(s.Kt, bq + (size_t)k0 * rs + koff, rs, nk, HD, HDp);
    load_cols(s.Vt, bq + (size_t)k0 * rs + voff, rs, nk, HD, HDp);
    for (int i = 0; i < HDp * ATT_BK; i++) s.dKt[i] = s.dVt[i] = 0.0f;

    for (int g = 0; g < sh->G; g++) {
        int h = kvh * sh->G + g;
        for (int q0 = k0 / ATT_BQ * ATT_BQ; q0 < T; q0 += ATT_BQ) {
            int nq = T - q0 < ATT_BQ ? T - q0 : ATT_BQ;
            load_q_side(&s, dout, qkv, lse, D, sh, b, h, q0, nq);
            mk_nn(s.S, ATT_BK, s.Qs, HDp, s.Kt, ATT_BK, ATT_BQ, ATT_BK, HDp, 0);
            mk_nn(s.dS, ATT_BK, s.dOs, HDp, s.Vt, ATT_BK, ATT_BQ, ATT_BK, HDp, 0);
            probs_tile(&s, q0, nq, k0, nk);
            // dV^T += dO^T P;  dK^T += (scale Q)^T dS
            mk_tn(s.dVt, ATT_BK, s.dOs, HDp, s.S, ATT_BK, HDp, ATT_BK, ATT_BQ);
            mk_tn(s.dKt, ATT_BK, s.Qs, HDp, s.dS, ATT_BK, HDp, ATT_BK, ATT_BQ);
        }
    }
    for (int j = 0; j < nk; j++) {
        float *row = dqkv + ((size_t)b * T + k0 + j) * rs;
        for (int d = 0; d < HD; d++) {
            row[koff + d] = s.dKt[(size_t)d * ATT_BK + j];
            row[voff + d] = s.dVt[(size_t)d * ATT_BK + j];
        }
    }
}

// Pass 2: query tile [q0, q0+nq) of head h in batch row b -> dq rows of dqkv.
MT_CPU_MULTIVERSION
static void bwd_q_tile(float *dqkv, const float *dout, const float *qkv, const float *lse, const float *D,
                       const att_shape *sh, int b, int h, int q0, float *base) {
    int T = sh->T, HD = sh->HD, HDp = sh->HDp, kvh = h / sh->G, nq = T - q0 < ATT_BQ ? T - q0 : ATT_BQ;
    size_t rs = sh->rs;
    att_scratch s = att_scratch_at(base, HDp);
    const float *bq = qkv + (size_t)b * T * rs;
    const float *kp = bq + (size_t)(sh->NH + kvh) * HD, *vp = bq + (size_t)(sh->NH + sh->NKV + kvh) * HD;

    load_q_side(&s, dout, qkv, lse, D, sh, b, h, q0, nq);
    for (int i = 0; i < ATT_BQ * HDp; i++) s.acc[i] = 0.0f;
    int kend = q0 + nq;
    for (int k0 = 0; k0 < kend; k0 += ATT_BK) {
        int nk = kend - k0 < ATT_BK ? kend - k0 : ATT_BK;
        load_cols(s.Kt, kp + (size_t)k0 * rs, rs, nk, HD, HDp);
        load_cols(s.Vt, vp + (size_t)k0 * rs, rs, nk, HD, HDp);
        load_rows(s.Vs, kp + (size_t)k0 * rs, rs, nk, HD, HDp, 1.0f); // K rows
        mk_nn(s.S, ATT_BK, s.Qs, HDp, s.Kt, ATT_BK, ATT_BQ, ATT_BK, HDp, 0);
        mk_nn(s.dS, ATT_BK, s.dOs, HDp, s.Vt, ATT_BK, ATT_BQ, ATT_BK, HDp, 0);
        probs_tile(&s, q0, nq, k0, nk);
        mk_nn(s.acc, HDp, s.dS, ATT_BK, s.Vs, HDp, ATT_BQ, HDp, ATT_BK, 1); // dQ += dS K
    }
    for (int i = 0; i < nq; i++) {
        float *row = dqkv + ((size_t)b * T + q0 + i) * rs + (size_t)h * HD;
        for (int d = 0; d < HD; d++) row[d] = s.acc[(size_t)i * HDp + d] * sh->scale;
    }
}

// dqkv(B,T,QKV*HD) from dout, out (B,T,NH*HD), qkv, lse (B,NH,T); Dbuf (B,NH,T)
// scratch for D_i = rowsum(dout_i * out_i).
static void attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                          float *Dbuf, const att_shape *sh, float *tile, int nthreads) {
    int B = sh->B, T = sh->T, NH = sh->NH, HD = sh->HD;
    int nqt = (T + ATT_BQ - 1) / ATT_BQ, nkt = (T + ATT_BK - 1) / ATT_BK;
    int nbh = B * NH, nbk = B * sh->NKV;
    size_t tf = att_tile_floats(HD);
#pragma omp parallel num_threads(nthreads)
    {
        float *scr = tile + (size_t)omp_get_thread_num() * tf;
#pragma omp for schedule(static)
        for (long long bt = 0; bt < (long long)B * T; bt++) {
            int b = (int)(bt / T), t = (int)(bt % T);
            for (int h = 0; h < NH; h++) {
                const float *o = out + ((size_t)bt * NH + h) * HD, *g = dout + ((size_t)bt * NH + h) * HD;
                float acc = 0.0f;
                for (int d = 0; d < HD; d++) acc += o[d] * g[d];
                Dbuf[((size_t)b * NH + h) * T + t] = acc;
            }
        }
        // (implicit barrier: D is complete)
        // Pass 1: early key tiles see the most queries, so they go first.
#pragma omp for schedule(dynamic, 1) nowait
        for (long long t = 0; t < (long long)nkt * nbk; t++) {
            int kt = (int)(t / nbk), bk = (int)(t % nbk);
            bwd_kv_tile(dqkv, dout, qkv, lse, Dbuf, sh, bk / sh->NKV, bk % sh->NKV, kt * ATT_BK, scr);
        }
        // Pass 2 writes only the q part of dqkv, so it needs no barrier after pass 1.
#pragma omp for schedule(dynamic, 1)
        for (long long t = 0; t < (long long)nqt * nbh; t++) {
            int qt = nqt - 1 - (int)(t / nbh), bh = (int)(t % nbh);
            bwd_q_tile(dqkv, dout, qkv, lse, Dbuf, sh, bh / NH, bh % NH, qt * ATT_BQ, scr);
        }
    }
}

static mt_status att_check(const char *op, int B, int T, int NH, int NKV, int HD) {
    if (B < 0 || T < 0 || NH <= 0 || NKV <= 0 || HD <= 0 || NH % NKV)
        return mt_fail(MT_ERR_SHAPE, "cpu %s: bad shape B=%d T=%d NH=%d NKV=%d HD=%d (NH must be a multiple of NKV)",
                       op, B, T, NH, NKV, HD);
    return MT_OK;
}

mt_status mt_cpu_op_attention_fwd(mt_backend *be, void *out, float *lse, const void *qkv, int B, int T, int NH, int NKV,
                                  int HD) {
    MT_TRY(att_check("attention_fwd", B, T, NH, NKV, HD));
    if ((long long)B * T == 0) return MT_OK;
    att_shape sh = att_make(B, T, NH, NKV, HD);
    int nthreads = omp_get_max_threads();
    void *tile = NULL;
    MT_TRY(mt_cpu_scratch(be, MT_CPU_SCR_TILE, (size_t)nthreads * att_tile_floats(HD) * sizeof(float), &tile));
    attention_fwd(out, lse, qkv, &sh, tile, nthreads);
    return MT_OK;
}

mt_status mt_cpu_op_attention_bwd(mt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out,
                                  const float *lse, int B, int T, int NH, int NKV, int HD) {
    MT_TRY(att_check("attention_bwd", B, T, NH, NKV, HD));
    if ((long long)B * T == 0) return MT_OK;
    att_shape sh = att_make(B, T, NH, NKV, HD);
    int nthreads = omp_get_max_threads();
    void *tile = NULL, *Dbuf = NULL;
    MT_TRY(mt_cpu_scratch(be, MT_CPU_SCR_TILE, (size_t)nthreads * att_tile_floats(HD) * sizeof(float), &tile));
    MT_TRY(mt_cpu_scratch(be, MT_CPU_SCR_ROWS, (size_t)B * NH * T * sizeof(float), &Dbuf));
    attention_bwd(dqkv, dout, qkv, out, lse, Dbuf, &sh, tile, nthreads);
    return MT_OK;
}
